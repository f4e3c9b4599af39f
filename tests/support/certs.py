"""Test PKI in pure Python (standard library only, so it runs wherever python3
does, with no openssl CLI and no `cryptography` package): RSA-2048 keys,
X.509 v3 certificates signed with sha256WithRSAEncryption, written as PEM.

  pki = make_pki()               # made once per test run (or per process), files in a temp dir
  pki.ca_cert                    # CA certificate (PEM path)
  pki.server_cert, .server_key   # SAN: DNS localhost, IP 127.0.0.1
  pki.other_cert, .other_key     # same CA, SAN only DNS other.invalid (hostname mismatch)
  pki.client_cert, .client_key   # clientAuth, CN "nsq-test-client"
  pki.wrong_ca_cert              # an unrelated CA (chain mismatch)
  pki.rogue_client_cert          # a client certificate issued by that unrelated CA

Certificates carry what strict verifiers (OpenSSL's X509_STRICT, Go) want:
basicConstraints (critical), keyUsage, extKeyUsage, subject and authority key
identifiers. Nothing here is meant for production use.
"""
from __future__ import annotations

import atexit
import datetime
import fcntl
import hashlib
import ipaddress
import math
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

# --------------------------------------------------------------------------- DER


def _len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _tlv(tag: int, value: bytes) -> bytes:
    return bytes([tag]) + _len(len(value)) + value


def _int(n: int) -> bytes:
    raw = n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)
    return _tlv(0x02, raw)


def _seq(*items: bytes) -> bytes:
    return _tlv(0x30, b"".join(items))


def _set(*items: bytes) -> bytes:
    return _tlv(0x31, b"".join(sorted(items)))


def _oid(dotted: str) -> bytes:
    parts = [int(p) for p in dotted.split(".")]
    out = bytearray([parts[0] * 40 + parts[1]])
    for part in parts[2:]:
        chunk = [part & 0x7F]
        part >>= 7
        while part:
            chunk.append(0x80 | (part & 0x7F))
            part >>= 7
        out += bytes(reversed(chunk))
    return _tlv(0x06, bytes(out))


def _null() -> bytes:
    return b"\x05\x00"


def _bool(value: bool) -> bytes:
    return _tlv(0x01, b"\xff" if value else b"\x00")


def _octets(value: bytes) -> bytes:
    return _tlv(0x04, value)


def _bits(value: bytes, unused: int = 0) -> bytes:
    return _tlv(0x03, bytes([unused]) + value)


def _utf8(text: str) -> bytes:
    return _tlv(0x0C, text.encode("utf-8"))


def _time(moment: datetime.datetime) -> bytes:
    if moment.year < 2050:
        return _tlv(0x17, moment.strftime("%y%m%d%H%M%SZ").encode())
    return _tlv(0x18, moment.strftime("%Y%m%d%H%M%SZ").encode())


def _explicit(number: int, value: bytes) -> bytes:
    return _tlv(0xA0 | number, value)


def _pem(kind: str, der: bytes) -> bytes:
    import base64

    body = base64.encodebytes(der).replace(b"\n", b"")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (kind.encode(), b"\n".join(lines), kind.encode())


# --------------------------------------------------------------------------- RSA

_SMALL_PRIMES = [p for p in range(3, 2000, 2) if all(p % d for d in range(3, int(p**0.5) + 1, 2))]
_SMALL_PRODUCT = math.prod(_SMALL_PRIMES)


def _probably_prime(n: int, rounds: int = 12) -> bool:
    if math.gcd(n, _SMALL_PRODUCT) != 1:
        return n in _SMALL_PRIMES
    if pow(2, n - 1, n) != 1:  # cheap Fermat filter first (a small base makes pow fast)
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for _ in range(rounds):
        a = secrets.randbelow(n - 3) + 2
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(bits: int, e: int) -> int:
    while True:
        candidate = secrets.randbits(bits) | (0b11 << (bits - 2)) | 1  # top two bits set: n has exactly 2*bits bits
        if math.gcd(candidate - 1, e) == 1 and _probably_prime(candidate):
            return candidate


@dataclass(frozen=True)
class RSAKey:
    n: int
    e: int
    d: int
    p: int
    q: int

    @classmethod
    def generate(cls, bits: int = 2048) -> "RSAKey":
        e = 65537
        while True:
            p, q = _prime(bits // 2, e), _prime(bits // 2, e)
            if p != q:
                break
        d = pow(e, -1, math.lcm(p - 1, q - 1))
        return cls(p * q, e, d, max(p, q), min(p, q))

    @property
    def size(self) -> int:
        return (self.n.bit_length() + 7) // 8

    def public_key_info(self) -> bytes:
        rsa_public_key = _seq(_int(self.n), _int(self.e))
        return _seq(_seq(_oid("1.2.840.113549.1.1.1"), _null()), _bits(rsa_public_key))

    def key_id(self) -> bytes:
        # RFC 5280 method 1: SHA-1 of the subjectPublicKey BIT STRING contents.
        return hashlib.sha1(_seq(_int(self.n), _int(self.e))).digest()

    def private_pem(self) -> bytes:
        """PKCS#1 RSAPrivateKey (BEGIN RSA PRIVATE KEY), which OpenSSL and Go both load."""
        p, q, d = self.p, self.q, self.d
        der = _seq(
            _int(0), _int(self.n), _int(self.e), _int(d), _int(p), _int(q),
            _int(d % (p - 1)), _int(d % (q - 1)), _int(pow(q, -1, p)),
        )
        return _pem("RSA PRIVATE KEY", der)

    def sign_sha256(self, message: bytes) -> bytes:
        """PKCS#1 v1.5 signature over SHA-256 (RFC 8017 EMSA-PKCS1-v1_5)."""
        digest_info = _seq(_seq(_oid("2.16.840.1.101.3.4.2.1"), _null()), _octets(hashlib.sha256(message).digest()))
        padding = b"\xff" * (self.size - len(digest_info) - 3)
        encoded = int.from_bytes(b"\x00\x01" + padding + b"\x00" + digest_info, "big")
        # CRT: two half-size exponentiations instead of one full-size one.
        p, q = self.p, self.q
        m1 = pow(encoded, self.d % (p - 1), p)
        m2 = pow(encoded, self.d % (q - 1), q)
        h = (pow(q, -1, p) * (m1 - m2)) % p
        signature = m2 + h * q
        assert pow(signature, self.e, self.n) == encoded
        return signature.to_bytes(self.size, "big")


# --------------------------------------------------------------------------- X.509

_SHA256_RSA = _seq(_oid("1.2.840.113549.1.1.11"), _null())


def _name(common_name: str) -> bytes:
    return _seq(
        _set(_seq(_oid("2.5.4.10"), _utf8("nsqfast tests"))),
        _set(_seq(_oid("2.5.4.3"), _utf8(common_name))),
    )


def _extension(oid: str, value: bytes, critical: bool = False) -> bytes:
    return _seq(_oid(oid), *((_bool(True),) if critical else ()), _octets(value))


def make_certificate(
    subject_key: RSAKey,
    common_name: str,
    issuer_key: RSAKey | None = None,
    issuer_name: str | None = None,
    *,
    ca: bool = False,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    days: int = 30,
) -> bytes:
    """A DER certificate; self-signed when issuer_key is None."""
    if issuer_key is None:
        issuer_key, issuer_name = subject_key, common_name
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    extensions = [
        _extension("2.5.29.19", _seq(_bool(True)) if ca else _seq(), critical=True),
        # keyUsage: CA = digitalSignature|keyCertSign|cRLSign, leaf = digitalSignature|keyEncipherment
        _extension("2.5.29.15", _bits(b"\x86", 1) if ca else _bits(b"\xa0", 5), critical=True),
        _extension("2.5.29.14", _octets(subject_key.key_id())),
    ]
    if issuer_key is not subject_key or not ca:
        extensions.append(_extension("2.5.29.35", _seq(_tlv(0x80, issuer_key.key_id()))))
    usages = [oid for flag, oid in ((server, "1.3.6.1.5.5.7.3.1"), (client, "1.3.6.1.5.5.7.3.2")) if flag]
    if usages:
        extensions.append(_extension("2.5.29.37", _seq(*(_oid(u) for u in usages))))
    alt_names = [_tlv(0x82, name.encode("ascii")) for name in dns_names]
    alt_names += [_tlv(0x87, ipaddress.ip_address(ip).packed) for ip in ip_addresses]
    if alt_names:
        extensions.append(_extension("2.5.29.17", _seq(*alt_names)))
    tbs = _seq(
        _explicit(0, _int(2)),  # v3
        _int(secrets.randbits(63) | 1),
        _SHA256_RSA,
        _name(issuer_name or common_name),
        _seq(_time(now - datetime.timedelta(hours=1)), _time(now + datetime.timedelta(days=days))),
        _name(common_name),
        subject_key.public_key_info(),
        _explicit(3, _seq(*extensions)),
    )
    return _seq(tbs, _SHA256_RSA, _bits(issuer_key.sign_sha256(tbs)))


def certificate_pem(der: bytes) -> bytes:
    return _pem("CERTIFICATE", der)


# --------------------------------------------------------------------------- a ready-made PKI


@dataclass(frozen=True)
class PKI:
    directory: str
    ca_cert: str
    wrong_ca_cert: str
    server_cert: str
    server_key: str
    other_cert: str
    other_key: str
    client_cert: str
    client_key: str
    rogue_client_cert: str  # key: client_key; issuer: the wrong CA
    client_common_name: str = "nsq-test-client"


_pki: PKI | None = None
_pki_lock = threading.Lock()
#: how long a process of a test run waits for another (live) one that makes the run's PKI, before
#: making its own; well under the tests' 60 s timeout (making it takes a couple of seconds)
SHARED_PKI_WAIT = 20.0


def make_pki(directory: str | None = None) -> PKI:
    """The test CA and certificates, in ``directory`` when one is given (made there, every time).

    Without one: made once per test run (in the run dir every pytest-xdist worker shares, by the
    first process that asks; the others wait for it), or once per process outside a test run."""
    global _pki
    with _pki_lock:
        if directory is not None:
            return _generate(directory)
        if _pki is not None and os.path.isdir(_pki.directory):
            return _pki
        pki = _run_pki()
        if pki is None:
            directory = tempfile.mkdtemp(prefix="nsq-test-pki-")
            atexit.register(shutil.rmtree, directory, True)
            pki = _generate(directory)
        _pki = pki
        return pki


def _run_pki() -> PKI | None:
    """The test run's PKI in <run dir>/pki: made by whichever process of the run holds the
    flock on <run dir>/pki.lock first (into a temp dir renamed into place when complete); the
    kernel releases the lock when its holder dies, so a waiter then takes it and makes the PKI
    itself. None outside a test run, or when the lock was not had within SHARED_PKI_WAIT."""
    try:
        from .ports import run_dir  # (the run dir's own module; the directory goes with the run)
    except ImportError:  # (run as a script)
        return None
    shared = run_dir()
    if shared is None:
        return None
    final = os.path.join(shared, "pki")
    if os.path.isdir(final):
        return _paths(final)
    fd = os.open(final + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        deadline = time.monotonic() + SHARED_PKI_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # another process makes it
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)
        if not os.path.isdir(final):  # (else made while we waited)
            partial = tempfile.mkdtemp(prefix="pki-", dir=shared)
            _generate(partial)
            os.rename(partial, final)
    finally:
        os.close(fd)  # (releases the lock)
    return _paths(final)


def _paths(directory: str) -> PKI:
    j = lambda name: os.path.join(directory, name)  # noqa: E731
    return PKI(
        directory=directory,
        ca_cert=j("ca.pem"),
        wrong_ca_cert=j("wrong-ca.pem"),
        server_cert=j("server.pem"),
        server_key=j("server.key"),
        other_cert=j("other.pem"),
        other_key=j("other.key"),
        client_cert=j("client.pem"),
        client_key=j("client.key"),
        rogue_client_cert=j("rogue-client.pem"),
    )


def _generate(directory: str) -> PKI:
    """Make the keys and certificates and write them into directory."""
    os.makedirs(directory, exist_ok=True)

    # Three keys (pure-Python RSA generation is the slow part, ~0.5 s each):
    # the leaf certificates share one, which changes nothing for the tests.
    ca_key, wrong_ca_key, leaf_key = (RSAKey.generate() for _ in range(3))
    server_key = client_key = leaf_key
    files: dict[str, bytes] = {
        "ca.pem": certificate_pem(make_certificate(ca_key, "nsqfast test CA", ca=True, days=60)),
        "wrong-ca.pem": certificate_pem(make_certificate(wrong_ca_key, "nsqfast test CA", ca=True, days=60)),
        "server.pem": certificate_pem(
            make_certificate(
                server_key, "localhost", ca_key, "nsqfast test CA",
                dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True,
            )
        ),
        "server.key": server_key.private_pem(),
        "other.pem": certificate_pem(
            make_certificate(server_key, "other.invalid", ca_key, "nsqfast test CA", dns_names=("other.invalid",), server=True)
        ),
        "other.key": server_key.private_pem(),
        "client.pem": certificate_pem(
            make_certificate(client_key, "nsq-test-client", ca_key, "nsqfast test CA", client=True)
        ),
        "client.key": client_key.private_pem(),
        # a client certificate that nsqd must refuse: signed by the unrelated CA
        "rogue-client.pem": certificate_pem(
            make_certificate(client_key, "rogue-client", wrong_ca_key, "nsqfast test CA", client=True)
        ),
    }
    for name, data in files.items():
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        if name.endswith(".key"):
            os.chmod(path, 0o600)
    return _paths(directory)


if __name__ == "__main__":  # python tests/support/certs.py [dir]: write a PKI and print where
    import sys

    print(make_pki(sys.argv[1] if len(sys.argv) > 1 else None))
