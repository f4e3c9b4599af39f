"""Key pairs for the end-to-end encryption tests, in PEM files as `openssl genrsa` and
`openssl rsa -pubout` write them (the files `CryptoKeyReader(public, private)` of either client
reads). Needs the `cryptography` package (requirements-dev.txt)."""
from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["write_pem_pair", "rsa_pem_pair"]


def write_pem_pair(directory, name: str, private_key) -> tuple[str, str]:
    """The PEM files of private_key's pair in directory (a pathlib.Path): (public path, private path)."""
    public = directory / (name + ".pub.pem")
    private = directory / (name + ".pem")
    public.write_bytes(private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    private.write_bytes(private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    return str(public), str(private)


def rsa_pem_pair(directory, name: str) -> tuple[str, str]:
    """A new RSA-2048 pair's PEM files in directory: (public path, private path)."""
    return write_pem_pair(directory, name, rsa.generate_private_key(public_exponent=65537, key_size=2048))
