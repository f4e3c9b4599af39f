"""Partition-key hashing: which partition a keyed message goes to.

This module owns the hash functions a producer uses to route a message that
carries a ``partition_key`` on a partitioned topic, so that pulsarfast picks
the same partition as the official ``pulsar-client`` Python package (which
routes inside its bundled C++ library).

Facts this module reproduces (verified against pulsar-client 3.13.0 / C++
library 4.2.0 on a real broker; see tests/pulsar/data/pulsar_key_partitions.json):

* The key is hashed as its UTF-8 bytes; the partition is
  ``hash(key) % partitions`` where ``hash`` is already non-negative (masked to
  31 bits). Both routing modes (``RoundRobinDistribution`` and
  ``UseSinglePartition``) use the key hash when a key is present; without a key
  they round-robin / stick to one partition instead.
* The official Python client exposes no ``hashing_scheme`` option; it always
  uses the C++ default, ``BoostHash``. The C++ library also offers
  ``JavaStringHash`` and ``Murmur3_32Hash``.
* The Python wrapper only sets the key when it is truthy, so
  ``partition_key=""`` behaves as "no key" (not hashed). Callers should treat
  an empty key the same way; these functions still accept ``""``.
* ``JavaStringHash`` here is the C++ client's variant: ``31*h + byte`` over
  the UTF-8 bytes taken as *signed* chars. It equals Java's
  ``String.hashCode() & 0x7fffffff`` only for ASCII keys; the Java client
  hashes UTF-16 code units, so non-ASCII keys can land elsewhere there.
* ``BoostHash`` is ``boost::hash<std::string>`` of Boost >= 1.84 on a 64-bit
  platform (the mulx-based byte hash, seed 0), masked to 31 bits. Older
  Boost releases hash differently; builds of the official client against
  them would route differently.
"""

__all__ = [
    "HASHING_SCHEMES",
    "DEFAULT_HASHING_SCHEME",
    "java_string_hash",
    "murmur3_32_hash",
    "boost_hash",
    "partition_for_key",
]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_POS31 = 0x7FFFFFFF


def _key_bytes(key):
    if isinstance(key, str):
        return key.encode("utf-8", "surrogatepass")
    return bytes(key)


# --- JavaStringHash (C++ client flavour) -----------------------------------

def java_string_hash(key: str) -> int:
    """``h = 31*h + c`` over the UTF-8 bytes as signed chars, 32-bit, & 0x7fffffff."""
    h = 0
    for b in _key_bytes(key):
        if b >= 0x80:
            b -= 0x100
        h = (h * 31 + b) & _M32
    return h & _POS31


# --- Murmur3 x86 32-bit, seed 0 ----------------------------------------------

def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k):
    k = (k * 0xCC9E2D51) & _M32
    k = _rotl32(k, 15)
    return (k * 0x1B873593) & _M32


def murmur3_32_hash(key: str) -> int:
    """MurmurHash3 (x86, 32-bit, seed 0) of the UTF-8 bytes, & 0x7fffffff."""
    data = _key_bytes(key)
    n = len(data)
    h = 0
    full = n - (n % 4)
    for i in range(0, full, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        h ^= _mix_k1(k)
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & _M32
    k = 0
    tail = data[full:]
    for j in range(len(tail) - 1, -1, -1):
        k = (k << 8) | tail[j]
    h ^= _mix_k1(k)
    h ^= n & _M32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h & _POS31


# --- BoostHash: boost::hash<std::string>, Boost >= 1.84, 64-bit size_t ------

_BQ = 0x9E3779B97F4A7C15
_BK = 0xDF442D22CE4859B9


def _mulx(a, b):
    """64x64 -> 128-bit product, folded: low half XOR high half."""
    p = (a & _M64) * (b & _M64)
    return (p ^ (p >> 64)) & _M64


def _boost_hash64(data, seed=0):
    n = len(data)
    w = _mulx(seed + _BQ, _BK)
    h = w ^ n
    pos = 0
    rest = n
    while rest >= 8:
        v = int.from_bytes(data[pos:pos + 8], "little")
        w = (w + _BQ) & _M64
        h ^= _mulx(v + w, _BK)
        pos += 8
        rest -= 8
    # Final 0..7 bytes. 4..7: two (possibly overlapping) little-endian 32-bit
    # reads, the last one shifted up by (rest - 4) bytes. 1..3: bytes at
    # offsets 0, rest//2 and (rest-1)&2 OR-ed into byte lanes 0..2.
    if rest >= 4:
        lo = int.from_bytes(data[pos:pos + 4], "little")
        hi = int.from_bytes(data[pos + rest - 4:pos + rest], "little")
        v = (hi << ((rest - 4) * 8)) | lo
    elif rest >= 1:
        a = (rest - 1) & 2
        b = rest >> 1
        v = (data[pos + a] << (a * 8)) | (data[pos + b] << (b * 8)) | data[pos]
    else:
        v = 0
    w = (w + _BQ) & _M64
    h ^= _mulx(v + w, _BK)
    return _mulx(h + w, _BK)


def boost_hash(key: str) -> int:
    """``boost::hash<std::string>`` (Boost >= 1.84, 64-bit) of the UTF-8 bytes, & 0x7fffffff."""
    return _boost_hash64(_key_bytes(key)) & _POS31


# --- routing -------------------------------------------------------------------

HASHING_SCHEMES = {
    "BoostHash": boost_hash,
    "JavaStringHash": java_string_hash,
    "Murmur3_32Hash": murmur3_32_hash,
}

#: What the official Python client uses (it has no option to change it).
DEFAULT_HASHING_SCHEME = "BoostHash"


def partition_for_key(key: str, partitions: int, scheme: str = DEFAULT_HASHING_SCHEME) -> int:
    """Partition index (0-based) for a message with ``partition_key=key``.

    ``scheme`` is a HashingScheme member name: "BoostHash", "JavaStringHash"
    or "Murmur3_32Hash". A topic with one partition (or a non-partitioned
    topic, ``partitions <= 1``) always yields 0.
    """
    try:
        fn = HASHING_SCHEMES[scheme]
    except KeyError:
        raise ValueError("unknown hashing scheme %r (expected one of %s)"
                         % (scheme, ", ".join(sorted(HASHING_SCHEMES)))) from None
    if partitions <= 1:
        return 0
    return fn(key) % partitions
