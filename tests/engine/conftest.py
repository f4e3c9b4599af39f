"""The engine's primitives tests run on the asyncio backend too (msgengine.aio): a test whose
``backend`` parameter is "asyncio" runs, whole, in a task of the asyncio backend on a fresh event
loop (``asyncio.run`` of ``run_sync(test)``), which is where that backend's blocking-style calls
are allowed; the test body is the same as for gevent and threads."""
from __future__ import annotations

import asyncio
import inspect

import pytest

#: the longest an asyncio-backend test may take as a whole
ASYNCIO_TEST_SECONDS = 60.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    callspec = getattr(pyfuncitem, "callspec", None)
    if callspec is None or callspec.params.get("backend") != "asyncio":
        return None
    from msgengine.aio import run_sync

    names = inspect.signature(pyfuncitem.obj).parameters
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    async def run():
        await asyncio.wait_for(run_sync(pyfuncitem.obj, **kwargs), ASYNCIO_TEST_SECONDS)

    asyncio.run(run())
    return True
