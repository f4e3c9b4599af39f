"""End-to-end encryption of message payloads, as the official C++ client's
``MessageCrypto`` does it (so either client reads what the other wrote).

This module owns the cryptography: ``PayloadEncryptor`` (a producer's) and
``PayloadDecryptor`` (a consumer's or reader's), and ``encryption_context``,
the ``_pulsar.EncryptionContext`` of a received encrypted message. Where it
happens in a message's life is the producer's and consumer's business:
encryption after compression (a batch's whole payload; each chunk of a
chunked message on its own, as the official producers write them);
decryption before decompression (each chunk before the chunks are put back
together).

The scheme (wire-compatible with pulsar-client-cpp ``lib/MessageCrypto.cc``):

* a random 32-byte data key encrypts payloads with AES-256-GCM, a random
  12-byte IV per payload (``MessageMetadata.encryption_param``) and the
  16-byte tag appended to the ciphertext; ``encryption_algo`` is not set
  (the C++ client leaves it empty);
* the data key is encrypted with each configured RSA public key (RSA-OAEP,
  OpenSSL's ``RSA_PKCS1_OAEP_PADDING``: SHA-1 and MGF1-SHA-1) and carried in
  ``MessageMetadata.encryption_keys`` (the key's name, the encrypted data key,
  and the metadata the key reader gave);
* the data key is renewed every ``DATA_KEY_LIFETIME`` seconds (4 hours, the
  C++ producer's refresh period), at the first encryption after that; a
  renewal whose public key cannot be read keeps the current key (logged);
* RSA keys only, PEM (the C++ client reads them with
  ``PEM_read_bio_RSA_PUBKEY`` / ``PEM_read_bio_RSAPrivateKey``): any other
  kind of key fails like an unreadable one (``CryptoError`` for a producer,
  a decryption failure for a consumer).

A decryptor keeps the data keys it decrypted (by their encrypted bytes, for
``DATA_KEY_LIFETIME``), so the private key is used once per data key.

Keys never reach a log line or an exception's message: only key names, and
what went wrong.

The ``cryptography`` library (the ``encryption`` extra: ``pip install
'nsqfast[encryption]'``) is imported when the first encryptor or decryptor
is made; without it, that raises ``ImportError``.
"""
from __future__ import annotations

import logging
import os
import time
import types
from typing import Any

from pulsarfast.base.enums import CompressionType
from pulsarfast.base.results import CryptoError
from pulsarfast.wire import proto
from pulsarfast.wire.cryptokeys import RawEncryptionContext, RawEncryptionKey

__all__ = ["DATA_KEY_LIFETIME", "PayloadEncryptor", "PayloadDecryptor", "encryption_context", "encryption_metadata",
           "key_names", "raw_key_reader"]

logger = logging.getLogger(__name__)

#: seconds a data key is used (a producer's) or kept (a consumer's) for: the C++ client's 4 hours
DATA_KEY_LIFETIME = 4 * 60 * 60.0
DATA_KEY_SIZE = 32
IV_SIZE = 12
TAG_SIZE = 16

# MessageMetadata fields
_ENCRYPTION_KEYS = 13
_ENCRYPTION_PARAM = 15

ENCRYPTION_KEYS = proto.Schema("EncryptionKeys", [
    (1, "key", proto.STR), (2, "value", proto.BYTES), (3, "metadata", proto.MSG, "repeated", proto.KEY_VALUE),
])
#: what a consumer reads of an encrypted message's MessageMetadata (the rest: the hot path's decoder)
ENCRYPTED_METADATA = proto.Schema("MessageMetadata", [
    (8, "compression", proto.UINT), (9, "uncompressed_size", proto.UINT),
    (11, "num_messages_in_batch", proto.INT, ("default", None)),
    (_ENCRYPTION_KEYS, "encryption_keys", proto.MSG, "repeated", ENCRYPTION_KEYS),
    (14, "encryption_algo", proto.STR), (_ENCRYPTION_PARAM, "encryption_param", proto.BYTES),
])


def encryption_metadata(metadata: Any) -> Any:
    """The encryption fields (and those the encryption context tells) of a serialized
    MessageMetadata; ``encryption_keys`` is empty when the message is not encrypted
    (ProtocolError when they are malformed)."""
    return proto.decode(ENCRYPTED_METADATA, metadata)


def _cryptography() -> Any:
    """The modules of the cryptography library used here, or ImportError naming the extra."""
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding, rsa
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ImportError("end-to-end encryption needs the cryptography library: "
                          "pip install 'nsqfast[encryption]'") from None

    oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    return types.SimpleNamespace(AESGCM=AESGCM, serialization=serialization, rsa=rsa, oaep=oaep)


def raw_key_reader(crypto_key_reader: Any) -> Any:
    """The ``_pulsar``-level reader (``getPublicKey``/``getPrivateKey``) of a ``pulsar.CryptoKeyReader``."""
    return getattr(crypto_key_reader, "cryptoKeyReader", crypto_key_reader)


def _describe(exc: BaseException) -> str:
    """What went wrong, without the key: the exception's type, and an OSError's text (a path)."""
    if isinstance(exc, OSError):
        return "%s: %s" % (type(exc).__name__, exc)
    return type(exc).__name__


def _key_bytes(key: Any) -> bytes:
    value = key.value() if callable(getattr(key, "value", None)) else getattr(key, "value", key)
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError("the key reader gave no bytes")
    return bytes(value)


def _key_metadata(key: Any) -> dict[str, str]:
    return dict(getattr(key, "metadata", None) or {})


class _Sealing:
    """A producer's current data key: its cipher, the serialized ``encryption_keys`` fields, and
    when it was made."""

    __slots__ = ("cipher", "keys_metadata", "made")

    def __init__(self, cipher: Any, keys_metadata: bytes, made: float) -> None:
        self.cipher = cipher
        self.keys_metadata = keys_metadata
        self.made = made


class PayloadEncryptor:
    """A producer's encryption: ``encrypt(payload) -> (ciphertext, metadata fields)`` with the
    data key encrypted for each of key_names (public keys from crypto_key_reader).

    The public keys are read when it is made; if that fails, the failure is logged and each
    ``encrypt`` (and ``check``) tries again, raising ``CryptoError`` while it fails (the official
    client creates the producer and fails each send with CryptoError)."""

    def __init__(self, key_names: list[str], crypto_key_reader: Any, label: str = "") -> None:
        self._lib = _cryptography()
        self._names = list(key_names)
        self._reader = raw_key_reader(crypto_key_reader)
        self._label = label
        self._sealing: _Sealing | None = None
        try:
            self._sealing = self._new_sealing()
        except CryptoError as exc:
            logger.error("[%s] %s", label, exc)

    def _public_key(self, name: str) -> tuple[Any, dict[str, str]]:
        if not name:
            raise CryptoError("the encryption key's name is empty")
        try:
            key = self._reader.getPublicKey(name, {})
            pem = _key_bytes(key)
            metadata = _key_metadata(key)
        except Exception as exc:  # (the key reader is the application's)
            raise CryptoError("cannot read the public key %r (%s)" % (name, _describe(exc))) from None
        try:
            public = self._lib.serialization.load_pem_public_key(pem)
        except Exception as exc:
            raise CryptoError("cannot load the public key %r: not a PEM public key (%s)"
                              % (name, _describe(exc))) from None
        if not isinstance(public, self._lib.rsa.RSAPublicKey):
            raise CryptoError("the public key %r is a %s: only RSA keys are supported (as by the official client)"
                              % (name, type(public).__name__.lstrip("_")))
        return public, metadata

    def _new_sealing(self) -> _Sealing:
        """A new data key, encrypted with each public key (CryptoError when one cannot be used)."""
        data_key = os.urandom(DATA_KEY_SIZE)
        fields = []
        for name in self._names:
            public, metadata = self._public_key(name)
            encrypted = public.encrypt(data_key, self._lib.oaep)
            body = proto.f_str(1, name) + proto.f_bytes(2, encrypted)
            if metadata:
                body += proto.key_values(3, metadata)
            fields.append(proto.f_bytes(_ENCRYPTION_KEYS, body))
        return _Sealing(self._lib.AESGCM(data_key), b"".join(fields), time.monotonic())

    def check(self) -> None:
        """CryptoError unless a data key is ready (the public keys could be read)."""
        self._current()

    def _current(self) -> _Sealing:
        sealing = self._sealing
        if sealing is None:
            sealing = self._sealing = self._new_sealing()
        elif time.monotonic() - sealing.made >= DATA_KEY_LIFETIME:
            try:
                sealing = self._sealing = self._new_sealing()
            except CryptoError as exc:  # (the key in use stays: the consumers can still read it)
                sealing.made = time.monotonic()
                logger.warning("[%s] the data key was not renewed: %s", self._label, exc)
        return sealing

    def encrypt(self, payload: bytes) -> tuple[bytes, bytes]:
        """(the payload encrypted, the serialized MessageMetadata fields to add: encryption_keys and
        encryption_param); CryptoError when no public key can be used."""
        sealing = self._current()
        iv = os.urandom(IV_SIZE)
        sealed = sealing.cipher.encrypt(iv, bytes(payload), None)  # (ciphertext + 16-byte tag)
        return sealed, sealing.keys_metadata + proto.f_bytes(_ENCRYPTION_PARAM, iv)


class PayloadDecryptor:
    """A consumer's decryption: ``decrypt(metadata, payload)`` (metadata: ``encryption_metadata``'s
    record) -> the payload, or None when it
    cannot be decrypted (no private key reads it, or it does not authenticate: logged)."""

    def __init__(self, crypto_key_reader: Any, label: str = "") -> None:
        self._lib = _cryptography()
        self._reader = raw_key_reader(crypto_key_reader)
        self._label = label
        #: the encrypted data key -> (its cipher, when it was decrypted)
        self._data_keys: dict[bytes, tuple[Any, float]] = {}

    def _open_with_known_keys(self, keys: Any, iv: bytes, payload: bytes) -> bytes | None:
        for key in keys:
            known = self._data_keys.get(key.value)
            if known is not None:
                try:
                    return known[0].decrypt(iv, payload, None)
                except Exception:  # (InvalidTag: another key, or a damaged payload)
                    continue
        return None

    def _learn_data_key(self, key: Any) -> bool:
        """Decrypt one EncryptionKeys' data key with its private key; False (logged) when that fails."""
        try:
            pem = _key_bytes(self._reader.getPrivateKey(key.key, {pair.key: pair.value for pair in key.metadata}))
        except Exception as exc:
            logger.error("[%s] cannot read the private key %r (%s)", self._label, key.key, _describe(exc))
            return False
        try:
            private = self._lib.serialization.load_pem_private_key(pem, password=None)
        except Exception as exc:
            logger.error("[%s] cannot load the private key %r (%s)", self._label, key.key, _describe(exc))
            return False
        if not isinstance(private, self._lib.rsa.RSAPrivateKey):
            logger.error("[%s] the private key %r is a %s: only RSA keys are supported", self._label, key.key,
                         type(private).__name__.lstrip("_"))
            return False
        try:
            data_key = private.decrypt(key.value, self._lib.oaep)
        except Exception:
            logger.error("[%s] the private key %r does not decrypt the message's data key", self._label, key.key)
            return False
        if len(data_key) != DATA_KEY_SIZE:
            logger.error("[%s] the data key of %r has %d bytes, not %d", self._label, key.key, len(data_key),
                         DATA_KEY_SIZE)
            return False
        now = time.monotonic()
        for known, (_cipher, when) in list(self._data_keys.items()):
            if now - when > DATA_KEY_LIFETIME:
                self._data_keys.pop(known, None)
        self._data_keys[key.value] = (self._lib.AESGCM(data_key), now)
        return True

    def decrypt(self, metadata: Any, payload: bytes) -> bytes | None:
        """The payload decrypted with the data key of metadata.encryption_keys and the IV of
        metadata.encryption_param; None when it cannot be."""
        keys = metadata.encryption_keys
        iv = metadata.encryption_param
        payload = bytes(payload)
        if not keys or not iv or len(payload) < TAG_SIZE:
            logger.error("[%s] an encrypted message without its keys, IV or tag", self._label)
            return None
        opened = self._open_with_known_keys(keys, iv, payload)
        if opened is not None:
            return opened
        if not any(self._learn_data_key(key) for key in keys):
            return None
        opened = self._open_with_known_keys(keys, iv, payload)
        if opened is None:
            logger.error("[%s] the message does not decrypt with its data key (damaged?)", self._label)
        return opened


def encryption_context(metadata: Any, failed: bool) -> RawEncryptionContext:
    """The ``_pulsar.EncryptionContext`` of a received encrypted message, from its
    ``encryption_metadata`` (what the official client gives: also for a message it decrypted, failed False)."""
    keys = [RawEncryptionKey(key.key, key.value, {pair.key: pair.value for pair in key.metadata})
            for key in metadata.encryption_keys]
    batch_size = metadata.num_messages_in_batch
    try:
        compression = CompressionType(metadata.compression)
    except ValueError:
        compression = CompressionType.NONE
    return RawEncryptionContext(
        keys, metadata.encryption_param, metadata.encryption_algo or "", compression,
        metadata.uncompressed_size if compression is not CompressionType.NONE else 0,
        batch_size if batch_size is not None else -1, failed)


def key_names(encryption_key: str | list[str] | None) -> list[str]:
    """The names of the keys a producer encrypts for (the official client takes one)."""
    if not encryption_key:
        return []
    return [encryption_key] if isinstance(encryption_key, str) else list(encryption_key)
