"""Why pulsarfast writes its protobuf messages by hand: the hot commands
encoded and decoded by pulsarfast.wire.proto, by the wire codec's hot paths and by
the ``protobuf`` package (upb), from the same field numbers, on this machine.

Run: python benchmarks/pulsar_proto_choice.py  (needs `pip install protobuf`)

Measured, per message:

- encoding CommandSend + MessageMetadata (what a producer does per send):
  the serialized command and metadata alone (proto.py against upb), then the
  whole payload frame. For the frame rows the comparison is like for like: on
  the upb side the frame is built by wrapping upb's two serialized messages
  with ``codec.encode_payload`` (size prefixes, magic, crc32c, metadata size,
  64-byte payload), which is exactly what ``encode_send_frame`` returns, and
  the two frames are checked to be byte-identical;
- decoding a BaseCommand holding a CommandMessage plus its MessageMetadata
  (what a consumer does per received frame). The upb side parses both
  messages and reads the entry id and the properties; the hot path
  (``decode_message``) returns every field the consumer uses (ids, producer
  name, sequence id, times, properties, keys, batch size, compression...) as
  one tuple, so it does more work than the upb row it is compared with.

The hot-path rows come twice: the compiled codec (``pulsarfast.wire._codec``) and
its pure-Python twin (``pulsarfast.wire._codec_py``, whose crc32c is a Python loop).
"""
from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pulsarfast.wire import codec, proto  # noqa: E402


def protobuf_classes():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="bench_pulsar.proto", package="bench", syntax="proto2")

    def message(name, fields):
        m = file.message_type.add(name=name)
        for number, field_name, kind, label, type_name in fields:
            f = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                f.type_name = ".bench." + type_name

    OPT, REQ, REP = F.LABEL_OPTIONAL, F.LABEL_REQUIRED, F.LABEL_REPEATED
    message("KeyValue", [(1, "key", F.TYPE_STRING, REQ, None), (2, "value", F.TYPE_STRING, REQ, None)])
    message("MessageIdData", [(1, "ledgerId", F.TYPE_UINT64, REQ, None), (2, "entryId", F.TYPE_UINT64, REQ, None),
                              (3, "partition", F.TYPE_INT32, OPT, None), (4, "batch_index", F.TYPE_INT32, OPT, None)])
    message("MessageMetadata", [
        (1, "producer_name", F.TYPE_STRING, REQ, None), (2, "sequence_id", F.TYPE_UINT64, REQ, None),
        (3, "publish_time", F.TYPE_UINT64, REQ, None), (4, "properties", F.TYPE_MESSAGE, REP, "KeyValue"),
        (6, "partition_key", F.TYPE_STRING, OPT, None), (11, "num_messages_in_batch", F.TYPE_INT32, OPT, None),
        (12, "event_time", F.TYPE_UINT64, OPT, None)])
    message("CommandSend", [(1, "producer_id", F.TYPE_UINT64, REQ, None), (2, "sequence_id", F.TYPE_UINT64, REQ, None),
                            (3, "num_messages", F.TYPE_INT32, OPT, None)])
    message("CommandMessage", [(1, "consumer_id", F.TYPE_UINT64, REQ, None),
                               (2, "message_id", F.TYPE_MESSAGE, REQ, "MessageIdData"),
                               (3, "redelivery_count", F.TYPE_UINT32, OPT, None)])
    message("BaseCommand", [(1, "type", F.TYPE_INT32, REQ, None), (6, "send", F.TYPE_MESSAGE, OPT, "CommandSend"),
                            (9, "message", F.TYPE_MESSAGE, OPT, "CommandMessage")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName("bench." + name))  # noqa: E731
    return get("BaseCommand"), get("MessageMetadata")


def _per_call(call, number: int) -> float:
    """The best of 5 runs of number calls, in µs per call."""
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def main() -> None:
    BaseCommand, MessageMetadata = protobuf_classes()
    props = {"trace": "abc123"}
    props_bytes = [(k.encode(), v.encode()) for k, v in props.items()]
    payload = b"p" * 64
    encode_payload = codec.encode_payload  # the compiled one when it is built

    def ours_encode():
        proto.send(7, 123456)
        proto.message_metadata("standalone-0-1", 123456, 1700000000000, properties=props)

    def upb_messages():
        command = BaseCommand(type=proto.SEND)
        command.send.producer_id = 7
        command.send.sequence_id = 123456
        meta = MessageMetadata(producer_name="standalone-0-1", sequence_id=123456, publish_time=1700000000000)
        for key, value in props.items():
            meta.properties.add(key=key, value=value)
        return command.SerializeToString(), meta.SerializeToString()

    def theirs_encode():
        upb_messages()

    def ours_encode_frame():
        return encode_payload(proto.send(7, 123456),
                              proto.message_metadata("standalone-0-1", 123456, 1700000000000, properties=props), payload)

    def theirs_encode_frame():
        command, meta = upb_messages()
        return encode_payload(command, meta, payload)

    def hot_encode(impl):
        encode_send_frame = impl.encode_send_frame
        return lambda: encode_send_frame(7, 123456, b"standalone-0-1", 1700000000000, payload, props_bytes)

    command_bytes = proto.base_command(proto.MESSAGE, proto.f_uint(1, 3) + proto.f_bytes(2, proto.message_id_data(812, 4411))
                                       + proto.f_uint(3, 0))
    metadata_bytes = proto.message_metadata("standalone-0-1", 123456, 1700000000000, properties=props)

    def ours_decode():
        _kind, record = proto.decode_command(command_bytes)
        meta = proto.decode(proto.MESSAGE_METADATA, metadata_bytes)
        return record.message_id.entryId, {kv.key: kv.value for kv in meta.properties}

    def theirs_decode():
        command = BaseCommand.FromString(command_bytes)
        meta = MessageMetadata.FromString(metadata_bytes)
        return command.message.message_id.entryId, {kv.key: kv.value for kv in meta.properties}

    def hot_decode(impl):
        decode_message = impl.decode_message
        return lambda: decode_message(command_bytes, metadata_bytes)

    impls = [("compiled", codec.compiled_impl), ("pure", codec.python_impl)]
    impls = [(name, impl) for name, impl in impls if impl is not None]
    assert ours_decode() == theirs_decode()
    assert ours_encode_frame() == theirs_encode_frame()
    for _name, impl in impls:
        assert hot_encode(impl)() == theirs_encode_frame()
        result = hot_decode(impl)()
        assert (result[2], result[9]) == theirs_decode() and result[18] is False

    upb_encode = _per_call(theirs_encode, 20000)
    upb_frame = _per_call(theirs_encode_frame, 20000)
    upb_decode = _per_call(theirs_decode, 20000)
    rows = [
        ("encode SEND + metadata (proto.py; no frame)", _per_call(ours_encode, 20000), upb_encode),
        ("encode SEND frame (proto.py + encode_payload)", _per_call(ours_encode_frame, 20000), upb_frame),
    ]
    calls = {"compiled": 20000, "pure": 2000}
    for name, impl in impls:
        rows.append(("encode SEND frame (%s hot path)" % name, _per_call(hot_encode(impl), calls[name]), upb_frame))
    rows.append(("decode MESSAGE + metadata (proto.py)", _per_call(ours_decode, 20000), upb_decode))
    for name, impl in impls:
        rows.append(("decode MESSAGE + metadata (%s hot path)" % name, _per_call(hot_decode(impl), calls[name]),
                     upb_decode))

    print("field reader / encode_payload:", codec.IMPLEMENTATION)
    print("| per message | pulsarfast | protobuf (%s) | upb time / ours |" % _protobuf_kind())
    print("|---|---:|---:|---:|")
    for label, ours, theirs in rows:
        print("| %s | %.2f µs | %.2f µs | %.2fx |" % (label, ours, theirs, theirs / ours))


def _protobuf_kind() -> str:
    from google.protobuf.internal import api_implementation
    import google.protobuf
    return "%s, %s" % (google.protobuf.__version__, api_implementation.Type())


if __name__ == "__main__":
    main()
