"""The names of end-to-end encryption: ``CryptoKeyReader`` (the
official ``pulsar.CryptoKeyReader``), the extension's
``AbstractCryptoKeyReader``, ``CryptoKeyReader`` and
``EncryptionKey``/``EncryptionContext`` data objects (``_pulsar``), and the
official wrappers ``EncryptionKey`` and ``EncryptionContext`` that
``Message.encryption_context()`` hands out for an encrypted message.

``pulsar.CryptoKeyReader(public_key_path, private_key_path)`` checks that
both are str (``ValueError``, the official message) and holds them in
``cryptoKeyReader``, a ``_pulsar.CryptoKeyReader``, whose
``getPublicKey(key_name, metadata)`` / ``getPrivateKey(key_name, metadata)``
read the key file into a ``_pulsar.EncryptionKey`` (the official ones fill a
C++ ``EncryptionKeyInfo`` argument, which Python cannot build). The files are
read when a key is needed, not here (a missing one is the producer's
``CryptoError`` at send, or the consumer's decryption failure).

The encryption itself (AES-GCM payloads, RSA-OAEP data keys, as the official
C++ client) is ``pulsarfast.wire.crypto``'s: a producer given ``encryption_key``
and ``crypto_key_reader`` encrypts, a consumer or reader given
``crypto_key_reader`` decrypts, and ``crypto_failure_action`` says what
happens to a message that cannot be decrypted.
"""
from __future__ import annotations

from typing import Any, Mapping

from pulsarfast.base.enums import CompressionType

__all__ = ["CryptoKeyReader", "AbstractCryptoKeyReader", "RawCryptoKeyReader", "RawEncryptionKey",
           "RawEncryptionContext", "EncryptionKey", "EncryptionContext"]


class RawEncryptionKey:
    """``_pulsar.EncryptionKey``: one key of an encrypted message (``key`` its name, ``value()`` its
    bytes, ``metadata`` a dict). The official one cannot be built from Python; this one can."""

    def __init__(self, key: str, value: bytes, metadata: Mapping[str, str] | None = None) -> None:
        self.key = key
        self._value = value
        self.metadata = dict(metadata or {})

    def value(self) -> bytes:
        return self._value


class RawEncryptionContext:
    """``_pulsar.EncryptionContext``: how a message was encrypted (the official one cannot be built
    from Python; this one can: ``crypto.encryption_context`` makes it for a received message)."""

    def __init__(self, keys: list[RawEncryptionKey], param: bytes, algorithm: str,
                 compression_type: CompressionType = CompressionType.NONE, uncompressed_message_size: int = 0,
                 batch_size: int = -1, is_decryption_failed: bool = False) -> None:
        self._keys = list(keys)
        self._param = param
        self._algorithm = algorithm
        self._compression_type = compression_type
        self._uncompressed_message_size = uncompressed_message_size
        self._batch_size = batch_size
        self._is_decryption_failed = is_decryption_failed

    def keys(self) -> list[RawEncryptionKey]:
        return list(self._keys)

    def param(self) -> bytes:
        return self._param

    def algorithm(self) -> str:
        return self._algorithm

    def compression_type(self) -> CompressionType:
        return self._compression_type

    def uncompressed_message_size(self) -> int:
        return self._uncompressed_message_size

    def batch_size(self) -> int:
        return self._batch_size

    def is_decryption_failed(self) -> bool:
        return self._is_decryption_failed


class AbstractCryptoKeyReader:
    """``_pulsar.AbstractCryptoKeyReader``: where the keys of encrypted messages come from."""

    def getPublicKey(self, key_name: str, metadata: Mapping[str, str]) -> RawEncryptionKey:  # noqa: N802
        raise NotImplementedError

    def getPrivateKey(self, key_name: str, metadata: Mapping[str, str]) -> RawEncryptionKey:  # noqa: N802
        raise NotImplementedError


def _read(path: str, key_name: str, metadata: Mapping[str, str]) -> RawEncryptionKey:
    with open(path, "rb") as file:
        return RawEncryptionKey(key_name, file.read(), metadata)


class RawCryptoKeyReader(AbstractCryptoKeyReader):
    """``_pulsar.CryptoKeyReader(public_key_path, private_key_path)``: keys read from two files."""

    def __init__(self, public_key_path: str, private_key_path: str) -> None:
        for value in (public_key_path, private_key_path):
            if not isinstance(value, str):
                raise TypeError("__init__(): incompatible constructor arguments: CryptoKeyReader(str, str), not %r"
                                % (value,))
        self.public_key_path = public_key_path
        self.private_key_path = private_key_path

    def getPublicKey(self, key_name: str, metadata: Mapping[str, str]) -> RawEncryptionKey:  # noqa: N802
        return _read(self.public_key_path, key_name, metadata)

    def getPrivateKey(self, key_name: str, metadata: Mapping[str, str]) -> RawEncryptionKey:  # noqa: N802
        return _read(self.private_key_path, key_name, metadata)


class CryptoKeyReader:
    """``pulsar.CryptoKeyReader(public_key_path, private_key_path)`` (see the module docstring)."""

    def __init__(self, public_key_path: str, private_key_path: str) -> None:
        for name, value in (("public_key_path", public_key_path), ("private_key_path", private_key_path)):
            if not isinstance(value, str):
                raise ValueError("Argument %s is expected to be of type 'str' and not '%s'"
                                 % (name, type(value).__name__))
        self.cryptoKeyReader: AbstractCryptoKeyReader = RawCryptoKeyReader(  # noqa: N815 - official
            public_key_path, private_key_path)

    @classmethod
    def of(cls, reader: AbstractCryptoKeyReader) -> "CryptoKeyReader":
        """The ``pulsar.CryptoKeyReader`` of a ``_pulsar`` one (what a ``_pulsar`` configuration holds)."""
        wrapper = cls.__new__(cls)
        wrapper.cryptoKeyReader = reader
        return wrapper


class EncryptionKey:
    """``pulsar.EncryptionKey(key)``: a view of a ``_pulsar.EncryptionKey``."""

    def __init__(self, key: Any) -> None:
        self._key = key

    @property
    def key(self) -> str:
        """The key's name (usually its file's)."""
        return self._key.key

    @property
    def value(self) -> bytes:
        """The key's bytes."""
        return self._key.value()

    @property
    def metadata(self) -> dict:
        return self._key.metadata

    def __str__(self) -> str:
        return "EncryptionKey(key=%s, value_len=%d, metadata=%s)" % (self.key, len(self.value), self.metadata)

    __repr__ = __str__


class EncryptionContext:
    """``pulsar.EncryptionContext(context)``: a view of a ``_pulsar.EncryptionContext``."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def keys(self) -> list[EncryptionKey]:
        return [EncryptionKey(key) for key in self._context.keys()]

    def param(self) -> bytes:
        return self._context.param()

    def algorithm(self) -> str:
        return self._context.algorithm()

    def compression_type(self) -> CompressionType:
        return self._context.compression_type()

    def uncompressed_message_size(self) -> int:
        """The size before compression (0 when not compressed)."""
        return self._context.uncompressed_message_size()

    def batch_size(self) -> int:
        """The number of messages of the batch (-1 when not batched)."""
        return self._context.batch_size()

    def is_decryption_failed(self) -> bool:
        return self._context.is_decryption_failed()

    def __str__(self) -> str:
        return ("EncryptionContext(algorithm=%s, compression_type=%s, uncompressed_message_size=%d, "
                "is_decryption_failed=%s, keys=[%s])" % (
                    self.algorithm(), self.compression_type().name, self.uncompressed_message_size(),
                    self.is_decryption_failed(), ", ".join(str(key) for key in self.keys())))

    __repr__ = __str__
