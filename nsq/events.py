"""pynsq's event hooks: on(name, callback), off(name, callback), trigger(name, **kw),
and the event names its users attach to (also importable as ``nsq.event``)."""
from __future__ import annotations

from typing import Any, Callable

CONNECT = "connect"
CLOSE = "close"
DATA = "data"
ERROR = "error"
IDENTIFY = "identify"
IDENTIFY_RESPONSE = "identify_response"
AUTH = "auth"
AUTH_RESPONSE = "auth_response"
HEARTBEAT = "heartbeat"
MESSAGE = "message"
RESPONSE = "response"
READY = "ready"
BACKOFF = "backoff"
RESUME = "resume"
CONTINUE = "continue"
FINISH = "finish"
REQUEUE = "requeue"
TOUCH = "touch"


class DuplicateListenerError(Exception):
    """Kept from pynsq's event module."""


class InvalidListenerError(Exception):
    """Kept from pynsq's event module."""


class EventedMixin:
    """Named callback lists; callbacks get keyword arguments (conn=..., data=...)."""

    _callbacks: dict[str, list[Callable[..., Any]]]

    def on(self, name: str, callback: Callable[..., Any]) -> None:
        if not callable(callback):
            raise TypeError("callback must be callable")
        callbacks = self.__dict__.setdefault("_callbacks", {})
        callbacks.setdefault(name, []).append(callback)

    def off(self, name: str, callback: Callable[..., Any]) -> None:
        callbacks = self.__dict__.get("_callbacks", {}).get(name, [])
        if callback in callbacks:
            callbacks.remove(callback)

    def has_listeners(self, name: str) -> bool:
        return bool(self.__dict__.get("_callbacks", {}).get(name))

    def trigger(self, name: str, *args: Any, **kwargs: Any) -> None:
        for callback in list(self.__dict__.get("_callbacks", {}).get(name, ())):
            callback(*args, **kwargs)
