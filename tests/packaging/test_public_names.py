"""No public name moved: each public module of nsq and pulsarfast (the official ``pulsar`` paths,
pynsq's, and our own: ``pulsarfast.client``, ``.metrics``, ``.cli``, ``.spark``, ...) still has every
public name it had before pulsarfast's machinery went into folders (public_names.json, recorded
from that tree by the script that moved it: every attribute not starting with "_", plus
``__version__``, but internal modules and other libraries' classes and functions).

A name removed on purpose since then comes off the list with it."""
from __future__ import annotations

import importlib
import json
import pathlib

import pytest

RECORDED: dict[str, list[str]] = json.loads(pathlib.Path(__file__).with_name("public_names.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_every_recorded_public_name_is_still_there(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name is not None and missing.name.split(".")[0] not in ("nsq", "pulsarfast", "msgengine"):
            pytest.skip("%s needs %s, not installed here (an optional extra)" % (name, missing.name))
        raise
    assert [attribute for attribute in RECORDED[name] if not hasattr(module, attribute)] == []


def test_the_record_holds_the_official_surface():
    assert {"Client", "Producer", "Consumer", "Reader", "Message", "MessageId", "Timeout", "schema",
            "exceptions", "tableview", "__version__"} <= set(RECORDED["pulsarfast"])
    assert {"Client", "ClientConfiguration", "MessageBuilder", "TopicRegex"} <= set(RECORDED["pulsarfast._pulsar"])
    assert {"Reader", "Writer", "run", "Message", "Error"} <= set(RECORDED["nsq"])
    assert {"EventedMixin", "CONNECT"} <= set(RECORDED["nsq.event"])
