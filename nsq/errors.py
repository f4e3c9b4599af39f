"""The library's exceptions: one root (nsq.Error, as in pynsq), pynsq's own
classes kept, and the server's E_* codes mapped through one table to classes
that know whether nsqd closes the connection after sending them.

The engine's debugging errors (``HubThreadError``, ``HubStateError``) are
msgengine's and are re-exported here; settings the engine refuses are
translated into ``ConfigError`` by ``nsq.config``."""
from __future__ import annotations

import builtins

from msgengine.errors import HubStateError, HubThreadError  # noqa: F401 - re-exported


class Error(Exception):
    """Root of every exception this library raises on purpose."""


class ProtocolError(Error):
    """The peer sent bytes that are not valid NSQ framing."""


class SendError(Error):
    """A command could not be sent (pynsq's class, same attributes)."""

    def __init__(self, msg: object, error: BaseException | None = None) -> None:
        super().__init__(msg, error)
        self.msg = msg
        self.error = error

    def __str__(self) -> str:
        return "SendError: %s (%s)" % (self.msg, self.error)

    __repr__ = __str__


class ConnectionClosedError(Error, ConnectionError):
    """The connection closed before the command was answered."""


class PartialPublishError(Error):
    """``Writer.pub_many`` could not publish everything: ``published``
    messages from the start are known to be in nsqd (later ones may be too:
    retrying from there can publish some twice); ``error`` is the first
    failure (also the ``__cause__``)."""

    def __init__(self, msg: str, published: int, error: BaseException) -> None:
        super().__init__(msg)
        self.published = published
        self.error = error


class IntegrityError(Error):
    """Kept from pynsq; raised when a message's own data is inconsistent."""


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - deliberately shadows the builtin here
    """No answer came within the allotted time."""


class PublishInCallbackError(Error, RuntimeError):
    """A blocking publish (no callback) from inside a publish callback, off the
    program's loop: the callback runs on the task that reads nsqd's answers, so the
    publish would wait for an answer only that task can read. Pass a callback."""


class InvalidArgumentError(Error, ValueError):
    """A caller passed a value the protocol cannot carry (name, count, delay...)."""


class InvalidBodyError(InvalidArgumentError, TypeError):
    """A message body that is not bytes."""


class MessageTooLargeError(InvalidArgumentError):
    """A message larger than the configured maximum."""


class ConfigError(InvalidArgumentError):
    """Conflicting or invalid connection settings (snappy and deflate, ...)."""


class ReadOnlyAttributeError(Error, AttributeError):
    """An attribute that pynsq kept as a plain one is worked out here (a
    client's connections, RDY counts, loop): assigning it raises this, an
    ``AttributeError`` whose message names the supported way to do it."""

    @classmethod
    def on_assignment(cls, obj: object, name: str, instead: str) -> ReadOnlyAttributeError:
        """The error for ``obj.name = ...``; ``instead`` says what to do."""
        return cls("%s.%s cannot be assigned in nsqfast: %s" % (type(obj).__name__, name, instead), name=name, obj=obj)


class ForkedError(ConnectionClosedError):
    """A client made before os.fork() was used in the child in a way that cannot work there."""


class FeatureNegotiationError(Error):
    """The server does not offer a feature the client asked for (TLS, compression)."""


class ServerError(Error):
    """An E_* error frame from nsqd.

    ``code`` is the E_* token, ``message`` the text after it, ``fatal`` tells
    whether nsqd closes the connection after sending it.
    """

    code = "E_UNKNOWN"
    fatal = True

    def __init__(self, message: str = "", code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__("%s %s" % (self.code, message) if message else self.code)


class InvalidError(ServerError):
    code = "E_INVALID"


class BadBodyError(ServerError):
    code = "E_BAD_BODY"


class BadTopicError(ServerError):
    code = "E_BAD_TOPIC"


class BadChannelError(ServerError):
    code = "E_BAD_CHANNEL"


class BadMessageError(ServerError):
    code = "E_BAD_MESSAGE"


class PubFailedError(ServerError):
    code = "E_PUB_FAILED"


class MPubFailedError(ServerError):
    code = "E_MPUB_FAILED"


class DPubFailedError(ServerError):
    code = "E_DPUB_FAILED"


class FinFailedError(ServerError):
    code = "E_FIN_FAILED"
    fatal = False


class ReqFailedError(ServerError):
    code = "E_REQ_FAILED"
    fatal = False


class TouchFailedError(ServerError):
    code = "E_TOUCH_FAILED"
    fatal = False


class AuthError(ServerError):
    """Base of the authentication and authorisation errors."""


class AuthFailedError(AuthError):
    code = "E_AUTH_FAILED"


class UnauthorizedError(AuthError):
    code = "E_UNAUTHORIZED"


class AuthFirstError(AuthError):
    code = "E_AUTH_FIRST"


class AuthDisabledError(AuthError):
    code = "E_AUTH_DISABLED"


SERVER_ERRORS: dict[str, type[ServerError]] = {
    cls.code: cls
    for cls in (
        InvalidError,
        BadBodyError,
        BadTopicError,
        BadChannelError,
        BadMessageError,
        PubFailedError,
        MPubFailedError,
        DPubFailedError,
        FinFailedError,
        ReqFailedError,
        TouchFailedError,
        AuthFailedError,
        UnauthorizedError,
        AuthFirstError,
        AuthDisabledError,
    )
}


def server_error(payload: bytes) -> ServerError:
    """Build the exception for an error frame's payload (b'E_CODE text')."""
    text = bytes(payload).decode("utf-8", "replace")
    code, _, message = text.partition(" ")
    cls = SERVER_ERRORS.get(code)
    if cls is None:
        return ServerError(message, code=code or "E_UNKNOWN")
    return cls(message)
