"""What crosses the wire, bytes to objects and back: the frame codec (``codec`` picks the
compiled ``_codec`` or its pure-Python twin ``_codec_py``), the protobuf messages (``proto``),
one connection's protocol without I/O (``sansio``), ``Message`` and ``MessageId`` (``message``),
batched entries and chunked messages (``messagebatch``, ``chunks``), what is done to a payload
(``compression``; end-to-end encryption, ``crypto``, with its names in ``cryptokeys``), and the
partition a key goes to (``hashing``). It imports ``base`` only.
"""
