"""An application's unit test: it builds nsq.Message by hand and calls its handler (no server)."""
import nsq

from common import report


def handler(message):
    if message.body == b"bad":
        message.requeue(backoff=False)
        return
    message.touch()
    message.finish()


events = []
good = nsq.Message(b"0123456789abcdef", b"good", 0, 1)
bad = nsq.Message(b"0123456789abcdeg", b"bad", 0, 1)
for message in (good, bad):
    for name in ("finish", "requeue", "touch"):
        message.on(name, lambda name=name, **kwargs: events.append(name))
    handler(message)
report(events=events, responded=[good.has_responded(), bad.has_responded()])
