"""What Reader and Writer share: address parsing, and the registry of live
clients that nsq.run() starts, waits on and closes."""
from __future__ import annotations

import inspect
from typing import Any

from msgengine.runtime import ProcessLock

from nsq.config import InvalidKeywordArgumentError  # noqa: F401 - re-exported (its old home)
from nsq.errors import ConfigError


def address_list(addresses: Any, what: str) -> list[str]:
    """Any iterable of addresses (a map object too) or a single string, as a list."""
    if addresses is None:
        return []
    if isinstance(addresses, (str, bytes)):
        addresses = [addresses]
    result = []
    for address in addresses:
        if isinstance(address, bytes):
            address = address.decode()
        if not isinstance(address, str) or not address:
            raise ConfigError("%s must hold address strings, not %r" % (what, address))
        result.append(address)
    return result


def split_host_port(address: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError("nsqd address %r is not host:port" % (address,))
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


# Every Reader and Writer lives here from construction until it closes, as
# pynsq's live in the IOLoop: a client nobody keeps a reference to still runs.
_live_clients: set[Any] = set()
_live_lock = ProcessLock()  # taken from any OS thread, so never a greenlet lock
_running = [0]  # how many nsq.run() calls are running now


def register(client: Any) -> None:
    with _live_lock:
        _live_clients.add(client)


def unregister(client: Any) -> None:
    """A client that has closed leaves the registry (and may be collected)."""
    with _live_lock:
        _live_clients.discard(client)


def live_clients() -> list[Any]:
    with _live_lock:
        clients = list(_live_clients)
    return [c for c in clients if not c.is_closed()]


def running() -> bool:
    """True while nsq.run() runs (a client made now starts at once)."""
    return _running[0] > 0


def run_started() -> None:
    with _live_lock:
        _running[0] += 1


def run_ended() -> None:
    with _live_lock:
        _running[0] -= 1


_interrupts: list[BaseException] = []
_interrupt_listener: list[Any] = [None]


def report_interrupt(exc: BaseException) -> None:
    """A handler raised KeyboardInterrupt or SystemExit: nsq.run() raises it."""
    with _live_lock:
        _interrupts.append(exc)
        listener = _interrupt_listener[0]
    if listener is not None:
        listener()


def on_interrupt(listener: Any) -> None:
    """Call listener() (from any thread) when a handler's interrupt is reported; None to stop."""
    with _live_lock:
        _interrupt_listener[0] = listener


def interrupted() -> bool:
    with _live_lock:
        return bool(_interrupts)


def raise_interrupt() -> None:
    """Raise the first reported interrupt, once."""
    with _live_lock:
        pending = _interrupts[:1]
        _interrupts.clear()
    if pending:
        raise pending[0]


class ClientMeta(type):
    """Calls a new client's ``after_construction()`` once every ``__init__``
    in its class chain has returned, so that a subclass's own attributes
    exist before the client starts (pynsq gets this by starting on the
    IOLoop's next turn). The classes keep the signature of their ``__init__``
    (``inspect.signature``, ``help()``), not this ``__call__``'s."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        instance = super().__call__(*args, **kwargs)
        instance.after_construction()
        return instance

    @property
    def __signature__(cls) -> inspect.Signature:
        init = inspect.signature(cls.__init__)  # type: ignore[misc]  # (the class's own, wanted here)
        return init.replace(parameters=list(init.parameters.values())[1:])  # without self
