"""One broker-side life of a producer or consumer on one connection: the
object the client's supervisor keeps (``msgengine.supervisor``). It closes
once, when the broker closes the producer or consumer, when the connection
dies, or when the client closes it; its close listeners (the supervisor's,
which then re-creates the producer or consumer) are each called once, even
when one is added while the reading task is closing it."""
from __future__ import annotations

import logging
from typing import Any, Callable

from pulsarfast.base.results import AlreadyClosed, PulsarException

logger = logging.getLogger(__name__)


class SessionLink:
    """The close mechanics shared by producer and consumer links; a subclass
    says how it detaches from its connection and owner (``_detach``) and
    which command closes it on the broker (``_close_command``)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._listeners: list[Callable[[Any], None]] = []
        self.closed = False

    def on_closed(self, reason: BaseException) -> None:
        """The connection says the broker closed it, or the connection died."""
        self.close_link(reason)

    def add_close_listener(self, listener: Callable[[Any], None]) -> None:
        self._listeners.append(listener)
        if self.closed:  # (closed meanwhile, perhaps by the reading task: call it, once)
            self._call(listener)

    def _call(self, listener: Callable[[Any], None]) -> None:
        try:
            self._listeners.remove(listener)
        except ValueError:
            return  # called already
        try:
            listener(self)
        except Exception:
            logger.exception("%s close listener raised", type(self).__name__)

    def close_link(self, reason: BaseException | None = None) -> None:
        """Closed here (the broker knows already, or never will): detach and tell the listeners."""
        if self.closed:
            return
        self.closed = True
        self._detach(reason)
        for listener in list(self._listeners):
            self._call(listener)

    def close(self) -> None:
        """Close this life, on the broker too (without waiting for its answer)."""
        if not self.closed and not self.conn.is_closed():
            try:
                self.conn.send_command(self._close_command(self.conn.protocol.new_request_id()))
            except PulsarException:
                pass
        self.close_link(AlreadyClosed("closed"))

    def _detach(self, reason: BaseException | None) -> None:
        raise NotImplementedError

    def _close_command(self, request_id: int) -> bytes:
        raise NotImplementedError
