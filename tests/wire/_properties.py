"""What the property tests of the provider wires share: JSON of any shape, chat bodies of any keys, and a
stream reader fed whatever comes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from hypothesis import strategies as st

from steadyloop.errors import EndpointError

# The keys of a chat body every wire reads; each wire's test adds the settings of its own.
CHAT_KEYS = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "temperature",
    "reasoning_effort",
    "stop",
    "response_format",
)


def json_values(max_leaves: int) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars (NaN and infinities among the floats), lists and objects, nested."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=max_leaves,
    )


def chat_bodies(own_keys: Iterable[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Chat bodies holding any of the common keys and ``own_keys``, each with any of ``values``."""
    return st.dictionaries(st.sampled_from([*CHAT_KEYS, *own_keys]), values)


class StreamReader(Protocol):
    def feed(self, item: Any) -> object: ...

    def chat_usage(self) -> object: ...


def read_through(reader: StreamReader, items: Iterable[Any]) -> None:
    """Feed ``items`` to ``reader`` until it refuses one with an ``EndpointError`` (the typed end of a
    stream it cannot read), then ask it for the usage it read."""
    for item in items:
        try:
            reader.feed(item)
        except EndpointError:
            return
    reader.chat_usage()
