"""The public methods of pulsarfast's classes have the official client's signatures: the same
parameter names, in the same order, with the same defaults (so keyword calls and positional calls
written for the official client mean the same here). Server-less: only signatures are compared.

Known differences, each for a reason: constructors the client calls (``Producer``, ``Consumer``,
``Reader``, ``Message``: users never make them), ``MessageId``'s two extra trailing parameters
(batch size and topic, both optional). A ``schema`` default (a ``BytesSchema()`` instance in both)
is compared by its class's name (the official instance is of the official class).
``TableView`` is compared too (its constructor is the official wrapper's). Keyword-only parameters after the official ones are
pulsarfast's additions (``backend=``, ...)."""
from __future__ import annotations

import enum
import inspect

import pytest

import pulsarfast
from tests.support.pulsar_helpers import needs_official, official

CLASSES = ["Client", "Producer", "Consumer", "Reader", "Message", "MessageId", "ConsumerDeadLetterPolicy",
           "ConsumerKeySharedPolicy", "ConsumerBatchReceivePolicy", "AutoClusterFailover", "ServiceInfo",
           "ServiceInfoProvider", "AuthenticationBasic", "AuthenticationOauth2", "AuthenticationToken",
           "AuthenticationTLS", "Authentication", "ConsoleLogger", "FileLogger", "CryptoKeyReader",
           "DeadLetterPolicyBuilder", "TableView"]
NOT_COMPARED = {("Producer", "__init__"), ("Consumer", "__init__"), ("Reader", "__init__"), ("Message", "__init__")}
SCHEMA_DEFAULTS = {"schema"}


def _default(parameter: inspect.Parameter):
    """A parameter's default as compared: an enum member by its class name, member name and value (the
    official enums are the C extension's classes), a schema by its class's name."""
    default = parameter.default
    if default is inspect.Parameter.empty:
        return "<required>"
    if parameter.name in SCHEMA_DEFAULTS:
        return ("schema", type(default).__name__)
    if isinstance(default, enum.Enum) or (hasattr(default, "name") and hasattr(default, "__int__")
                                          and not isinstance(default, int)):
        return (type(default).__name__, default.name, int(default))
    return default


def _parameters(function) -> list:
    """(name, default) of each parameter a caller may pass positionally or by keyword (pulsarfast's
    keyword-only additions left out)."""
    return [(p.name, _default(p)) for p in inspect.signature(function).parameters.values()
            if p.kind is not p.KEYWORD_ONLY]


@needs_official
@pytest.mark.parametrize("class_name", CLASSES)
def test_public_methods_have_the_official_signatures(class_name):
    theirs, ours = getattr(official, class_name), getattr(pulsarfast, class_name)
    different = {}
    for name in dir(theirs):
        if (name.startswith("_") and name != "__init__") or (class_name, name) in NOT_COMPARED:
            continue
        official_method = getattr(theirs, name)
        if not callable(official_method) or inspect.isclass(official_method):
            continue
        try:
            expected = _parameters(official_method)
        except ValueError:  # (a method of the C extension, without a Python signature)
            continue
        if not hasattr(ours, name):
            different[name] = "missing"
            continue
        got = _parameters(getattr(ours, name))
        if class_name == "MessageId" and name == "__init__":
            got = got[:len(expected)]  # (pulsarfast's trailing batch_size and topic)
        if got != expected:
            different[name] = (expected, got)
    assert different == {}
