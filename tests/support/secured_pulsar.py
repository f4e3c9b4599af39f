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

``authorizing_broker(config)`` starts another one, secured the same way but
configured as the official client's own test broker
(pulsar-client-python's ``tests/test-conf/standalone-ssl.conf`` and its CI
script): authorization on, an anonymous role (``ANONYMOUS_ROLE``, the role of
a connection whose method names no provider and of an HTTP request whose
credentials are refused), the superusers ``localhost``, ``superUser`` and
``admin``, the basic login ``OFFICIAL_TESTS_USER`` / ``OFFICIAL_TESTS_PASSWORD``
(user ``admin``: a superuser) besides ours, and the namespace
``PRIVATE_NAMESPACE`` on which only the role ``TOKEN_PRINCIPAL`` may produce
and consume (tests/pulsar/test_official_auth_anonymous.py). Its caller kills
it (``secured.broker.kill()``).
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
# the official client's test broker (authorizing_broker)
ANONYMOUS_ROLE = "anonymous"
OFFICIAL_TESTS_USER = "admin"
OFFICIAL_TESTS_PASSWORD = "123456"
TOKEN_PRINCIPAL = "token-principal"
PRIVATE_NAMESPACE = "private/auth"

__all__ = ["CA_NAME", "SUPERUSER", "BASIC_USER", "BASIC_PASSWORD", "XDIST_GROUP", "ANONYMOUS_ROLE",
           "OFFICIAL_TESTS_USER", "OFFICIAL_TESTS_PASSWORD", "TOKEN_PRINCIPAL", "PRIVATE_NAMESPACE", "Secured",
           "make_jwt", "pkcs8_pem", "apr1_hash", "secured_broker", "authorizing_broker"]


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


def _start(config: pytest.Config, authorizing: bool = False) -> Secured:
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
        "htpasswd": "".join("%s:%s\n" % (user, apr1_hash(password, secrets.token_hex(4)))
                            for user, password in _basic_logins(authorizing)).encode(),
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
        **(_AUTHORIZING if authorizing else {}),
    }, admin_headers={"Authorization": "Bearer " + superuser_token})
    config.add_cleanup(broker.kill)  # (its data goes with it: no graceful stop needed)
    broker.start()
    if authorizing:
        _grant_as_the_official_tests(broker)
    return Secured(broker, tls_port, secret, path("ca.pem"), path("wrong-ca.pem"), path("client.pem"),
                   path("client.key"))


# what the official client's test broker adds (its standalone-ssl.conf)
_AUTHORIZING = {
    "authorizationEnabled": "true",
    "anonymousUserRole": ANONYMOUS_ROLE,
    "superUserRoles": "localhost,superUser," + SUPERUSER,
}


def _basic_logins(authorizing: bool) -> list[tuple[str, str]]:
    logins = [(BASIC_USER, BASIC_PASSWORD)]
    if authorizing:
        logins.append((OFFICIAL_TESTS_USER, OFFICIAL_TESTS_PASSWORD))
    return logins


def _grant_as_the_official_tests(broker: PulsarBroker) -> None:
    """The tenant and namespace the official client's CI script creates for its authentication tests:
    tenant ``private`` without admin roles, namespace ``private/auth`` where only TOKEN_PRINCIPAL
    produces and consumes (superusers may do anything; the anonymous role nothing)."""
    broker.admin("PUT", "/admin/v2/tenants/private", {"adminRoles": [], "allowedClusters": ["standalone"]})
    broker.admin("PUT", "/admin/v2/namespaces/" + PRIVATE_NAMESPACE, {
        "auth_policies": {"namespace_auth": {TOKEN_PRINCIPAL: ["produce", "consume"]}},
        "replication_clusters": ["standalone"],
    })


def authorizing_broker(config: pytest.Config) -> Secured:
    """A new broker configured as the official client's test broker (see the module's text); the
    caller kills it (``secured.broker.kill()``), the session's end does otherwise."""
    return _start(config, authorizing=True)


def secured_broker(request: pytest.FixtureRequest) -> Secured:
    """The secured broker of this test process, started by the first caller."""
    config = request.config
    secured = config.stash.get(_KEY, None)
    if secured is None:
        secured = config.stash[_KEY] = _start(config)
    return secured
