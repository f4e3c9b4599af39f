"""Where received messages go: stdout, one message per line, either the raw
body (followed by a newline) or a JSON object per line. A JSON body is text
when it is valid UTF-8 and base64 otherwise; ``body_encoding`` says which.
Each message is flushed at once, so a pipe or terminal sees it as it
arrives; a closed stdout raises ``BrokenPipeError`` for the command to end on."""
from __future__ import annotations

import base64
import json
import sys
from typing import Any, BinaryIO


def body_fields(body: bytes) -> dict[str, str]:
    """{"body": ..., "body_encoding": "utf-8" | "base64"} for a message body."""
    try:
        return {"body": body.decode("utf-8"), "body_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "body_encoding": "base64"}


class MessageWriter:
    """Writes messages to a binary stream (stdout by default)."""

    def __init__(self, as_json: bool, stream: BinaryIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream if stream is not None else sys.stdout.buffer

    def write(self, body: bytes, fields: dict[str, Any]) -> None:
        """One message: its body, or (with JSON) fields followed by the body's."""
        if self.as_json:
            record = dict(fields)
            record.update(body_fields(body))
            data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        else:
            data = body + b"\n"
        self.stream.write(data)
        self.stream.flush()
