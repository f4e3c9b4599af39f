"""Pulsar's payload compressions: compress and decompress one payload (a
message's, or a whole batch's) by ``CompressionType``, in the formats the
official clients write and read:

    LZ4     the raw LZ4 block format, without a size prefix (``lz4.block``)
    ZLib    a zlib stream (deflate with the zlib header and Adler-32 trailer)
    ZSTD    one standard zstd frame (level 3, as the official clients)
    SNAPPY  the raw snappy block format (not the framed stream format)

The receiver knows the uncompressed size from the metadata
(``uncompressed_size``), which LZ4's block format needs and every type is
checked against: a payload that does not decompress to exactly that many
bytes raises ``ProtocolError`` (the consumer refuses such a message like a
corrupt one). ``ZLib`` needs only the standard library, ``SNAPPY``
python-snappy (a dependency of the package); ``LZ4`` and ``ZSTD`` need the
``lz4`` and ``zstandard`` packages, imported the first time a codec of that
type is asked for, so that ``import pulsarfast`` stays cheap. A missing one
raises ``InvalidConfiguration`` for a producer (at ``create_producer``) and
``ProtocolError`` for a received payload, each naming the package to install.
"""
from __future__ import annotations

import importlib
import zlib
from typing import Any, Callable

from pulsarfast.base.enums import CompressionType
from pulsarfast.base.results import InvalidConfiguration, ProtocolError

__all__ = ["Codec", "codec_for", "compress", "decompress"]

#: the zstd level the official clients use
ZSTD_LEVEL = 3

#: per type: (display name, module to import, pip package providing it)
_LIBRARIES = {
    CompressionType.LZ4: ("LZ4", "lz4.block", "lz4"),
    CompressionType.ZLib: ("ZLib", "zlib", None),
    CompressionType.ZSTD: ("ZSTD", "zstandard", "zstandard"),
    CompressionType.SNAPPY: ("SNAPPY", "snappy", "python-snappy"),
}


class MissingLibrary(ImportError):
    """The package a compression type needs is not installed."""


class Codec:
    """One compression type: ``compress(data) -> bytes`` and
    ``decompress(data, uncompressed_size) -> bytes`` (the latter raising
    ``ProtocolError`` for a payload that does not decompress to exactly
    uncompressed_size bytes)."""

    __slots__ = ("type", "name", "compress", "_decompress")

    def __init__(self, compression_type: CompressionType, name: str, compress: Callable[[Any], bytes],
                 decompress: Callable[[Any, int], bytes]) -> None:
        self.type = compression_type
        self.name = name
        self.compress = compress
        self._decompress = decompress

    def __repr__(self) -> str:
        return "<Codec %s>" % self.name

    def decompress(self, data: Any, uncompressed_size: int) -> bytes:
        try:
            out = self._decompress(data, uncompressed_size)
        except ProtocolError:
            raise
        except Exception as exc:  # each library has its own errors for corrupt input
            raise ProtocolError("%s payload of %d bytes does not decompress: %s" % (
                self.name, len(data), str(exc) or type(exc).__name__)) from exc
        if len(out) != uncompressed_size:
            raise ProtocolError("%s payload decompresses to %d bytes, its metadata says %d" % (
                self.name, len(out), uncompressed_size))
        return out


# -- the codecs (each built from its module once imported) -----------------------------------


def _lz4_codec(block: Any) -> Codec:
    def compress_lz4(data: Any) -> bytes:
        return block.compress(data, store_size=False)

    def decompress_lz4(data: Any, size: int) -> bytes:
        return block.decompress(data, uncompressed_size=size)

    return Codec(CompressionType.LZ4, "LZ4", compress_lz4, decompress_lz4)


def _zlib_codec(module: Any) -> Codec:
    def decompress_zlib(data: Any, size: int) -> bytes:
        stream = module.decompressobj()
        # (max_length 0 would mean "no limit": one byte more than expected shows a payload too long)
        out = stream.decompress(data, size + 1)
        if not stream.eof or stream.unused_data:
            raise ProtocolError("ZLib payload of %d bytes is not one complete zlib stream of %d bytes"
                                % (len(data), size))
        return out

    return Codec(CompressionType.ZLib, "ZLib", module.compress, decompress_zlib)


def _zstd_codec(zstandard: Any) -> Codec:
    # A zstd context must not be used by two threads at once, and making one per call costs ten
    # times the compression of a small message: each call borrows one from a pool (list.pop and
    # list.append are atomic), so there are as many as calls ever ran at once.
    compressors: list[Any] = []
    decompressors: list[Any] = []

    def compress_zstd(data: Any) -> bytes:
        try:
            compressor = compressors.pop()
        except IndexError:
            compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        try:
            return compressor.compress(data)
        finally:
            compressors.append(compressor)

    def decompress_zstd(data: Any, size: int) -> bytes:
        declared = zstandard.frame_content_size(data)
        if declared >= 0 and declared != size:  # (checked before any buffer of that size is made)
            raise ProtocolError("ZSTD frame says %d bytes, the metadata says %d" % (declared, size))
        try:
            decompressor = decompressors.pop()
        except IndexError:
            decompressor = zstandard.ZstdDecompressor()
        # (a frame without its content size is read into at most size bytes, or one for size 0)
        out = decompressor.decompress(data, max_output_size=max(size, 1))
        decompressors.append(decompressor)  # (not after an error: a context that failed is dropped)
        return out

    return Codec(CompressionType.ZSTD, "ZSTD", compress_zstd, decompress_zstd)


def _snappy_codec(snappy: Any) -> Codec:
    def decompress_snappy(data: Any, size: int) -> bytes:
        declared = _snappy_length(data)  # (checked before any buffer of that size is made)
        if declared != size:
            raise ProtocolError("SNAPPY block says %d bytes, the metadata says %d" % (declared, size))
        return snappy.uncompress(data)

    return Codec(CompressionType.SNAPPY, "SNAPPY", snappy.compress, decompress_snappy)


def _snappy_length(data: Any) -> int:
    """The uncompressed length a raw snappy block starts with (a varint of at most 5 bytes)."""
    view = memoryview(data).cast("B")
    value = shift = 0
    for index in range(min(5, len(view))):
        byte = view[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ProtocolError("SNAPPY payload of %d bytes does not start with its length" % len(view))


_BUILDERS = {
    CompressionType.LZ4: _lz4_codec,
    CompressionType.ZLib: _zlib_codec,
    CompressionType.ZSTD: _zstd_codec,
    CompressionType.SNAPPY: _snappy_codec,
}
_codecs: dict[int, Codec] = {}


def _load(compression_type: CompressionType) -> Codec:
    codec = _codecs.get(compression_type)
    if codec is not None:
        return codec
    name, module_name, package = _LIBRARIES[compression_type]
    try:
        module = zlib if module_name == "zlib" else importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingLibrary("%s compression needs the %s package (pip install %s)" % (name, package, package)) from exc
    codec = _codecs[compression_type] = _BUILDERS[compression_type](module)
    return codec


def _known_type(value: Any) -> CompressionType | None:
    try:
        return CompressionType(int(value))
    except (TypeError, ValueError):
        return None


def codec_for(compression_type: Any) -> Codec | None:
    """The codec a producer with this compression_type uses (None for NONE).
    Raises ValueError for something that is not a CompressionType and
    InvalidConfiguration when the type's library is not installed."""
    if isinstance(compression_type, bool) or not isinstance(compression_type, int):
        raise ValueError("Argument compression_type is expected to be a CompressionType, not %r" % (compression_type,))
    known = _known_type(compression_type)
    if known is None:
        raise ValueError("compression_type %d is not a CompressionType" % compression_type)
    if known == CompressionType.NONE:
        return None
    try:
        return _load(known)
    except MissingLibrary as exc:
        raise InvalidConfiguration(str(exc)) from exc


def compress(compression_type: Any, data: Any) -> bytes:
    """data compressed as compression_type says (NONE: data as bytes)."""
    codec = codec_for(compression_type)
    return bytes(data) if codec is None else codec.compress(data)


def decompress(compression_type: int, data: Any, uncompressed_size: int) -> bytes:
    """A received payload decompressed; ProtocolError when the type is
    unknown, its library is missing, or the payload does not decompress to
    exactly uncompressed_size bytes."""
    known = _known_type(compression_type)
    if known is None:
        raise ProtocolError("unknown compression type %r" % (compression_type,))
    if known == CompressionType.NONE:
        return bytes(data)
    try:
        codec = _load(known)
    except MissingLibrary as exc:
        raise ProtocolError("cannot read a compressed payload: %s" % exc) from exc
    return codec.decompress(data, uncompressed_size)
