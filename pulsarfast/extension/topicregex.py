"""``TopicRegex`` (the official extension's ``_pulsar.TopicRegex``): a topic
pattern's text, kept as given (not compiled, so not checked, until it is
subscribed to), with its read-only ``pattern``.

``_pulsar.Client(...).subscribe(TopicRegex(text), ...)`` is the pattern
subscription of ``re.compile(text)`` (``compiled()``).
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["TopicRegex"]


class TopicRegex:
    """``TopicRegex(pattern)``: pattern is a str (bytes are taken as UTF-8, as there)."""

    __slots__ = ("_pattern",)

    def __init__(self, pattern: Any) -> None:
        if isinstance(pattern, bytes):
            pattern = pattern.decode("utf-8")
        if not isinstance(pattern, str):
            raise TypeError("__init__(): incompatible constructor arguments: %r is not a str" % (pattern,))
        self._pattern = pattern

    @property
    def pattern(self) -> str:
        return self._pattern

    def compiled(self) -> re.Pattern:
        """The pattern, compiled (re.error when it is not a valid regular expression)."""
        return re.compile(self._pattern)

    def __repr__(self) -> str:
        return "TopicRegex(%r)" % self._pattern
