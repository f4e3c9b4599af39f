"""What a Spark data source of ours does with what Spark hands it: its options,
strings under case-insensitive keys, which ``OptionReader`` turns into checked
Python values (raising the data source's own error class, with a message that
names the option); the columns a user schema picks (``pick_columns``); and the
check that pyspark is there (``require_pyspark``). Shared by ``nsq.spark`` and
``pulsarfast.spark``, each of which names its format and its error. Nothing
here imports pyspark.
"""
from __future__ import annotations

import re
from typing import Any, ClassVar, Mapping, Sequence

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_SPLIT = re.compile(r"[,\s]+")


class OptionReader:
    """Typed values from Spark's option map (a case-insensitive dict of strings).

    Subclasses set ``error`` (raised for a missing or bad value) and
    ``source`` (the format's name, in the messages)."""

    error: ClassVar[type[Exception]] = ValueError
    source: ClassVar[str] = "data source"

    def __init__(self, options: Mapping[str, Any] | None) -> None:
        # Spark passes a CaseInsensitiveDict; a plain dict (tests, direct use) is made case-insensitive here too.
        self._raw = {str(k).lower(): v for k, v in dict(options or {}).items()}

    def __contains__(self, name: str) -> bool:
        value = self._raw.get(name.lower())
        return value is not None and str(value).strip() != ""

    def names(self) -> list[str]:
        """Every option name given (lower case)."""
        return list(self._raw)

    def raw(self, name: str) -> Any:
        return self._raw.get(name.lower())

    def get_str(self, name: str, default: str | None = None) -> str | None:
        value = self._raw.get(name.lower())
        if value is None:
            return default
        value = str(value).strip()
        return value if value else default

    def required(self, name: str, what: str) -> str:
        value = self.get_str(name)
        if value is None:
            raise self.error("the %s data source needs option %r (%s)" % (self.source, name, what))
        return value

    def get_int(self, name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
        text = self.get_str(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise self.error("option %r must be an integer, not %r" % (name, text)) from None
        if value < minimum or (maximum is not None and value > maximum):
            bounds = ">= %d" % minimum if maximum is None else "from %d to %d" % (minimum, maximum)
            raise self.error("option %r must be %s, not %d" % (name, bounds, value))
        return value

    def get_bool(self, name: str, default: bool) -> bool:
        text = self.get_str(name)
        if text is None:
            return default
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self.error("option %r must be true or false, not %r" % (name, text))

    def get_list(self, name: str) -> list[str]:
        """Comma- or space-separated values (a Python list is accepted too)."""
        value = self._raw.get(name.lower())
        if value is None:
            return []
        if isinstance(value, (list, tuple)):
            items = [str(v).strip() for v in value]
        else:
            items = _SPLIT.split(str(value).strip())
        return [item for item in items if item]


def pick_columns(schema: Any, types: Mapping[str, Any], error: type[Exception], source: str) -> list[tuple[str, str]]:
    """(name as given, source column) pairs to produce: every column when schema is None, else
    the user schema's fields (a pyspark StructType), each one of the source's own columns (types:
    name -> Spark type), in any order and letter case."""
    if schema is None:
        return [(name, name) for name in types]
    names = []
    for f in schema.fields:
        expected = types.get(f.name.lower())
        if expected is None:
            raise error("the %s source has no column %r; its columns are %s" % (source, f.name, ", ".join(types)))
        if f.dataType != expected:
            raise error("the %s source's column %r is %s, not %s"
                        % (source, f.name, expected.simpleString(), f.dataType.simpleString()))
        names.append((f.name, f.name.lower()))
    return names


def require_pyspark(package: str, modules: Sequence[str] = ("pyarrow", "pyspark.sql.datasource")) -> None:
    """ImportError naming the extra to install when pyspark (4.2+) or pyarrow is missing."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("%s needs pyspark>=4.2 and pyarrow: pip install 'nsqfast[spark]' (%s)"
                              % (package, exc)) from exc
