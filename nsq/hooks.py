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
    """on() with a callback already listening to that event (as pynsq raises)."""


class CallbackNotCallableError(TypeError, AssertionError):
    """on() with something not callable (pynsq asserts; a TypeError too)."""


class InvalidListenerError(Exception):
    """off() with a callback that is not listening to that event (as pynsq raises)."""


class EventedMixin:
    """Named callback lists; callbacks get keyword arguments (conn=..., data=...).

    Kept in a ``_callbacks`` attribute made on the first on(); a class with
    ``__slots__`` (Message) names that slot."""

    __slots__ = ()

    def on(self, name: str, callback: Callable[..., Any]) -> None:
        """Call callback(**kwargs) at each trigger of name; once per callback
        (DuplicateListenerError otherwise, as in pynsq)."""
        if not callable(callback):
            raise CallbackNotCallableError("callback is not callable")
        callbacks: dict[str, list[Callable[..., Any]]] | None = getattr(self, "_callbacks", None)
        if callbacks is None:
            callbacks = {}
            setattr(self, "_callbacks", callbacks)  # (a slot of the class, or its __dict__)
        listeners = callbacks.setdefault(name, [])
        if callback in listeners:
            raise DuplicateListenerError("%r already listens to %r" % (callback, name))
        listeners.append(callback)

    def off(self, name: str, callback: Callable[..., Any]) -> None:
        """Stop calling callback at name (InvalidListenerError if it was not, as in pynsq)."""
        callbacks = (getattr(self, "_callbacks", None) or {}).get(name, [])
        if callback not in callbacks:
            raise InvalidListenerError("%r does not listen to %r" % (callback, name))
        callbacks.remove(callback)

    def has_listeners(self, name: str) -> bool:
        return bool((getattr(self, "_callbacks", None) or {}).get(name))

    def trigger(self, name: str, *args: Any, **kwargs: Any) -> None:
        for callback in list((getattr(self, "_callbacks", None) or {}).get(name, ())):
            callback(*args, **kwargs)
