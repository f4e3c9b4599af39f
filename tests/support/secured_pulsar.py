"""A Pulsar standalone broker secured every way the clients support, shared by
tests/pulsar/test_security.py and tests/pulsar/test_official_auth.py.

- TLS on brokerServicePortTls with a certificate from a test CA made here
  (tests/support/certs.py), naming only the DNS name ``localhost`` (so
  ``127.0.0.1`` is a host name mismatch);
- authentication by token (HS256 JWTs signed here with hmac; the broker's
  tokenSecretKey is the same secret), by TLS client certificate, and basic
  (AuthenticationProviderBasic: user ``BASIC_USER`` with ``BASIC_PASSWORD``,
  an Apache ``$apr1$`` MD5 hash computed here with hashlib);
- authenticationRefreshCheckSeconds is 1, so a token with an ``exp`` soon is
  challenged (AUTH_CHALLENGE) within seconds of expiring.

``secured_broker(request)`` starts it once per test process (both modules
carry the same xdist_group, so one worker runs them against one JVM) and
kills it when the session ends (or, under pytest-xdist, when the worker
exits: the harness's atexit net and PDEATHSIG; its certificates go then too).
"""
from __future__ import annotations

import atexit
import base64
import functools
import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass

import pytest

from tests.support.certs import RSAKey, certificate_pem, make_certificate
from tests.support.ports import free_port
from tests.support.pulsar_broker import PulsarBroker, require_pulsar_lib

CA_NAME = "pulsarfast test CA"
SUPERUSER = "admin"
BASIC_USER = "basic-user"
BASIC_PASSWORD = "basic-secret-password"
XDIST_GROUP = "pulsar_security"

__all__ = ["CA_NAME", "SUPERUSER", "BASIC_USER", "BASIC_PASSWORD", "XDIST_GROUP", "Secured", "make_jwt",
           "pkcs8_pem", "apr1_hash", "secured_broker"]


# --------------------------------------------------------------------------- tokens, keys, hashes


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(secret: bytes, subject: str, expires_at: float | None = None) -> str:
    """An HS256 JWT for ``subject`` (the broker's role), signed with secret."""
    claims: dict = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    signing_input = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + _b64url(
        json.dumps(claims).encode())
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + _b64url(signature)


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def pkcs8_pem(pkcs1_pem: bytes) -> bytes:
    """An RSA key as PKCS#8 (BEGIN PRIVATE KEY), the form the broker's tlsKeyFilePath wants."""
    pkcs1 = base64.b64decode(b"".join(line for line in pkcs1_pem.splitlines() if not line.startswith(b"-----")))
    rsa_algorithm = bytes.fromhex("300d06092a864886f70d0101010500")  # SEQ { rsaEncryption, NULL }
    body = b"\x02\x01\x00" + rsa_algorithm + b"\x04" + _der_length(len(pkcs1)) + pkcs1
    text = base64.b64encode(b"\x30" + _der_length(len(body)) + body).decode()
    lines = [text[i:i + 64] for i in range(0, len(text), 64)]
    return ("-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n").encode()


_CRYPT64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _crypt64(value: int, count: int) -> str:
    out = []
    for _ in range(count):
        out.append(_CRYPT64[value & 0x3F])
        value >>= 6
    return "".join(out)


def apr1_hash(password: str, salt: str) -> str:
    """Apache's ``$apr1$`` MD5-crypt of password (what ``openssl passwd -apr1 -salt`` prints):
    the hash format the broker's AuthenticationProviderBasic checks besides DES crypt."""
    magic = b"$apr1$"
    pw, sl = password.encode(), salt.encode()[:8]
    alternate = hashlib.md5(pw + sl + pw).digest()
    ctx = pw + magic + sl
    for i in range(len(pw), 0, -16):
        ctx += alternate[:min(i, 16)]
    i = len(pw)
    while i:
        ctx += b"\0" if i & 1 else pw[:1]
        i >>= 1
    digest = hashlib.md5(ctx).digest()
    for round_ in range(1000):
        step = pw if round_ & 1 else digest
        if round_ % 3:
            step += sl
        if round_ % 7:
            step += pw
        step += digest if round_ & 1 else pw
        digest = hashlib.md5(step).digest()
    d = digest
    encoded = "".join(_crypt64((d[a] << 16) | (d[b] << 8) | d[c], 4)
                      for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)))
    encoded += _crypt64(d[11], 2)
    return "$apr1$%s$%s" % (sl.decode(), encoded)


# --------------------------------------------------------------------------- the broker


@dataclass
class Secured:
    broker: PulsarBroker
    tls_port: int
    secret: bytes
    ca: str
    wrong_ca: str
    client_cert: str
    client_key: str

    @property
    def plain_url(self) -> str:
        return self.broker.service_url

    @property
    def tls_url(self) -> str:  # by address: the certificate does not name it
        return "pulsar+ssl://127.0.0.1:%d" % self.tls_port

    @property
    def tls_name_url(self) -> str:  # by the name in the certificate
        return "pulsar+ssl://localhost:%d" % self.tls_port

    def token(self, subject: str = "user", expires_at: float | None = None) -> str:
        return make_jwt(self.secret, subject, expires_at)


_KEY = pytest.StashKey[Secured]()


def _start(config: pytest.Config) -> Secured:
    require_pulsar_lib()
    directory = tempfile.mkdtemp(prefix="pulsarfast-security-")
    remove = functools.partial(shutil.rmtree, directory, ignore_errors=True)
    config.add_cleanup(remove)
    atexit.register(remove)  # (a pytest-xdist worker may end without running the config's cleanups)
    ca_key, leaf_key, wrong_ca_key = (RSAKey.generate() for _ in range(3))
    files = {
        "ca.pem": certificate_pem(make_certificate(ca_key, CA_NAME, ca=True)),
        "wrong-ca.pem": certificate_pem(make_certificate(wrong_ca_key, CA_NAME, ca=True)),
        "broker.pem": certificate_pem(make_certificate(leaf_key, "localhost", ca_key, CA_NAME,
                                                       dns_names=("localhost",), server=True)),
        "broker.key": pkcs8_pem(leaf_key.private_pem()),
        "client.pem": certificate_pem(make_certificate(leaf_key, "tls-client", ca_key, CA_NAME, client=True)),
        "client.key": leaf_key.private_pem(),
        "htpasswd": ("%s:%s\n" % (BASIC_USER, apr1_hash(BASIC_PASSWORD, secrets.token_hex(4)))).encode(),
    }
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    path = functools.partial(os.path.join, directory)
    secret = secrets.token_bytes(32)
    superuser_token = make_jwt(secret, SUPERUSER)
    tls_port = free_port()
    broker = PulsarBroker(config={
        "brokerServicePortTls": tls_port,
        "tlsCertificateFilePath": path("broker.pem"),
        "tlsKeyFilePath": path("broker.key"),
        "tlsTrustCertsFilePath": path("ca.pem"),
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                                   "org.apache.pulsar.broker.authentication.AuthenticationProviderTls,"
                                   "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
        "tokenSecretKey": "data:;base64," + base64.b64encode(secret).decode(),
        "basicAuthConf": path("htpasswd"),
        "authenticationRefreshCheckSeconds": "1",
        "superUserRoles": SUPERUSER,
        # the standalone's own client (it creates the cluster and the namespaces) signs in too
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": "token:" + superuser_token,
    }, admin_headers={"Authorization": "Bearer " + superuser_token})
    config.add_cleanup(broker.kill)  # (its data goes with it: no graceful stop needed)
    broker.start()
    return Secured(broker, tls_port, secret, path("ca.pem"), path("wrong-ca.pem"), path("client.pem"),
                   path("client.key"))


def secured_broker(request: pytest.FixtureRequest) -> Secured:
    """The secured broker of this test process, started by the first caller."""
    config = request.config
    secured = config.stash.get(_KEY, None)
    if secured is None:
        secured = config.stash[_KEY] = _start(config)
    return secured
