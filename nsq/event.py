"""pynsq's ``nsq.event`` module: the event names and the EventedMixin, as
``from nsq import event`` expects them (they live in nsq.hooks)."""
from __future__ import annotations

from nsq.hooks import (  # noqa: F401
    AUTH,
    AUTH_RESPONSE,
    BACKOFF,
    CLOSE,
    CONNECT,
    CONTINUE,
    DATA,
    ERROR,
    FINISH,
    HEARTBEAT,
    IDENTIFY,
    IDENTIFY_RESPONSE,
    MESSAGE,
    READY,
    REQUEUE,
    RESPONSE,
    RESUME,
    TOUCH,
    DuplicateListenerError,
    EventedMixin,
    InvalidListenerError,
)
