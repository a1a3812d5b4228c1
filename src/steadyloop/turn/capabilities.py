"""What an endpoint, and one model on it, turned out not to support: latches kept for the process.

Two levels, because one API key reaches every model a provider offers. Facts about the server (strict
tool schemas, usage in the stream) latch on the endpoint; facts about a model (a reasoning effort it
refuses, the token-limit spelling it wants, a temperature that is not ours to pick, structured output,
assistant prefill, extra-body fields it refuses) latch on (endpoint, model), so gpt-4o refusing an effort
never stops gpt-5 being asked to reason. Latches only ever turn things off; they come back on when the
caller says so (``reset_capabilities``, ``expire_capabilities``). Two model latches turn off an assumption
rather than a field: that replies start as answer (a model whose template opens a thinking block in the
prompt shows otherwise), and that the server takes tools natively (vLLM without a tool parser does not:
the tools are then described in the prompt and calls recovered from text).

What a provider is known to refuse can be set before its first request (``seed_capabilities``, which the
provider presets use): a prior is the same latch a refusal would have set, held until the endpoint is
first met, and forgotten like any other by ``reset_capabilities``, after which a real refusal teaches it
again. What a model family is documented to refuse (``wire.model_quirks``: OpenAI's reasoning models pick
their own temperature) is latched the same way when the model is first met, on any endpoint.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..wire.endpoints import Endpoint, endpoint_id, endpoint_key
from ..wire.model_quirks import ModelQuirk, quirk_for

__all__ = [
    "EFFORT_LADDER",
    "SNAPSHOT_VERSION",
    "EndpointCapabilities",
    "LatchPriors",
    "ModelCapabilities",
    "capabilities_for",
    "effort_for",
    "expire_capabilities",
    "export_capabilities",
    "import_capabilities",
    "model_capabilities_for",
    "reset_capabilities",
    "seed_capabilities",
]

#: Reasoning-effort rungs from cheapest to dearest; refusals walk it upward only.
EFFORT_LADDER: tuple[str, ...] = ("none", "minimal", "low", "medium", "high")

#: Bumped when the snapshot's meaning changes; a snapshot of another version is ignored.
SNAPSHOT_VERSION = 1


@dataclass(slots=True)
class ModelCapabilities:
    """What one model on one endpoint refused.

    Attributes:
        legacy_token_limit: the reply ceiling is spelled ``max_tokens`` (``False``: ``max_completion_tokens``).
        chosen_temperature: ``temperature`` is ours to send.
        structured_output: ``response_format`` with a JSON schema is accepted.
        assistant_prefill: a trailing assistant message is continued rather than answered afresh.
        takes_effort: ``reasoning_effort`` is accepted at all.
        refused_efforts: effort rungs the model refused.
        supported_efforts: the rungs the server listed as supported, when it listed them.
        refused_fields: fields refused and dropped: extra-body fields the caller named droppable, and the
            sampling, metadata and thinking-budget fields a run sends (``request_body.NEGOTIABLE_FIELDS``).
        answer_first: replies start as answer; ``False`` once a reply closed a thinking block it never
            opened (the template opens it in the prompt), so later replies are read as reasoning until
            their closing tag.
        native_tools: the server takes ``tools`` in the request; ``False`` describes them in the prompt
            and reads calls back from the text.
        tool_routing: a step may be asked as a decision held to a schema (``steering/routing.py``); off once
            the endpoint showed it does not hold the model to one.
        tool_gate: a routed step may first ask the tool gate (``steering/tool_gate.py``); off once a gate reply
            held no choice.
    """

    legacy_token_limit: bool = True
    chosen_temperature: bool = True
    structured_output: bool = True
    assistant_prefill: bool = True
    takes_effort: bool = True
    answer_first: bool = True
    native_tools: bool = True
    refused_efforts: set[str] = field(default_factory=set)
    supported_efforts: tuple[str, ...] = ()
    refused_fields: set[str] = field(default_factory=set)
    tool_routing: bool = True
    tool_gate: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "legacy_token_limit": self.legacy_token_limit,
            "chosen_temperature": self.chosen_temperature,
            "structured_output": self.structured_output,
            "assistant_prefill": self.assistant_prefill,
            "takes_effort": self.takes_effort,
            "answer_first": self.answer_first,
            "native_tools": self.native_tools,
            "refused_efforts": sorted(self.refused_efforts),
            "supported_efforts": list(self.supported_efforts),
            "refused_fields": sorted(self.refused_fields),
            "tool_routing": self.tool_routing,
            "tool_gate": self.tool_gate,
        }

    def merge(self, raw: Mapping[str, Any]) -> None:
        """Take the refusals of a stored snapshot; only ever latches off."""
        # legacy_token_limit False is itself a refusal (of max_tokens), so it merges the same way.
        for name in _MODEL_FLAGS:
            if raw.get(name) is False:
                setattr(self, name, False)
        self.refused_efforts |= {str(x) for x in raw.get("refused_efforts") or () if isinstance(x, str)}
        self.refused_fields |= {str(x) for x in raw.get("refused_fields") or () if isinstance(x, str)}
        supported = tuple(str(x) for x in raw.get("supported_efforts") or () if isinstance(x, str))
        if supported and not self.supported_efforts:
            self.supported_efforts = supported


_MODEL_FLAGS = (
    "legacy_token_limit",
    "chosen_temperature",
    "structured_output",
    "assistant_prefill",
    "takes_effort",
    "answer_first",
    "native_tools",
    "tool_routing",
    "tool_gate",
)
_MODEL_LISTS = ("refused_efforts", "supported_efforts", "refused_fields")


@dataclass(frozen=True, slots=True)
class LatchPriors:
    """What an endpoint is known to refuse before it has refused anything: latches set in advance.

    Attributes:
        usage_in_stream: ``False``: ``stream_options`` is refused.
        strict_schemas: ``False``: tool schemas go relaxed.
        legacy_token_limit: ``False``: every model wants ``max_completion_tokens``.
        refused_fields: fields every model on the endpoint refuses (``prompt_cache_key``, ``top_k``, ...).
    """

    usage_in_stream: bool = True
    strict_schemas: bool = True
    legacy_token_limit: bool = True
    refused_fields: frozenset[str] = frozenset()

    def apply(self, model: ModelCapabilities) -> None:
        """Set the model-level priors on a model met for the first time."""
        if not self.legacy_token_limit:
            model.legacy_token_limit = False
        model.refused_fields |= self.refused_fields


@dataclass(slots=True)
class EndpointCapabilities:
    """What one endpoint refused, with its models' refusals under it.

    Attributes:
        strict_schemas: tool schemas are sent as sanitised; ``False`` sends them relaxed.
        usage_in_stream: ``stream_options.include_usage`` is accepted.
        first_met: when this endpoint was first met (epoch seconds), for expiry.
        models: per-model latches, under the name the endpoint knows the model by.
        priors: what every model met here starts with (see ``seed_capabilities``).
    """

    strict_schemas: bool = True
    usage_in_stream: bool = True
    first_met: float = field(default_factory=time.time)
    models: dict[str, ModelCapabilities] = field(default_factory=dict)
    priors: LatchPriors | None = None

    def model(self, name: str | None) -> ModelCapabilities:
        """The latches of one model (created on first use); ``None`` reads as a model nobody named."""
        key = name or ""
        found = self.models.get(key)
        if found is None:
            found = self.models[key] = ModelCapabilities()
            if self.priors is not None:
                self.priors.apply(found)
            _apply_quirk(found, quirk_for(name))
        return found


def _apply_quirk(model: ModelCapabilities, quirk: ModelQuirk | None) -> None:
    """Latch what the model's family is documented to refuse (``wire.model_quirks``), as a refusal would."""
    if quirk is None:
        return
    if not quirk.chosen_temperature:
        model.chosen_temperature = False
    if quirk.completion_tokens:
        model.legacy_token_limit = False
    model.refused_fields |= quirk.refused_fields


_by_key: dict[str, EndpointCapabilities] = {}
_ids: dict[str, str] = {}  # endpoint_id -> endpoint_key, so a snapshot can be matched without keys


def capabilities_for(endpoint: Endpoint) -> EndpointCapabilities:
    """The latches of an endpoint (created on first use)."""
    key = endpoint_key(endpoint)
    found = _by_key.get(key)
    if found is None:
        found = _by_key[key] = EndpointCapabilities()
        _ids[endpoint_id(endpoint)] = key
        priors = _priors.pop(key, None)
        if priors is not None:
            found.priors = priors
            found.strict_schemas = priors.strict_schemas
            found.usage_in_stream = priors.usage_in_stream
        pending = _pending.pop(endpoint_id(endpoint), None)
        if pending is not None:
            _merge_endpoint(found, pending)
    return found


_priors: dict[str, LatchPriors] = {}  # endpoint_key -> priors waiting for the endpoint to be met


def seed_capabilities(endpoint: Endpoint, priors: LatchPriors) -> bool:
    """Set what ``endpoint`` is known to refuse before its first request.

    Priors take effect when the endpoint is first met; an endpoint already met keeps what it learned.
    They are latches like any other: exported, merged with refusals, and forgotten by
    ``reset_capabilities``.

    Returns:
        whether they will take effect (``False`` for an endpoint already met).
    """
    key = endpoint_key(endpoint)
    if key in _by_key:
        return False
    _priors[key] = priors
    return True


def model_capabilities_for(endpoint: Endpoint, model: str | None) -> ModelCapabilities:
    """The latches of one model on an endpoint."""
    return capabilities_for(endpoint).model(model)


def effort_for(model: ModelCapabilities | None, asked: str | None) -> str:
    """The reasoning effort to send, given what this model has refused.

    Returns ``""`` (send nothing) for a model that takes no effort, for ``"off"`` and for an absent
    setting. A refused rung is answered by the cheapest supported rung above it: upward only, because
    answering a refused ``high`` with ``medium`` would quietly reason less than asked.
    """
    if not asked or asked == "off":
        return ""
    if model is None:
        return asked
    if not model.takes_effort:
        return ""
    if asked not in model.refused_efforts:
        return asked
    if asked not in EFFORT_LADDER:
        return asked  # not ours to move: the refusal goes back to the caller
    above = EFFORT_LADDER[EFFORT_LADDER.index(asked) + 1 :]
    if model.supported_efforts:
        for rung in above:
            if rung in model.supported_efforts and rung not in model.refused_efforts:
                return rung
        for rung in model.supported_efforts:  # a listed value off our ladder (e.g. "xhigh")
            if rung not in EFFORT_LADDER and rung not in model.refused_efforts:
                return rung
        return asked
    for rung in above:
        if rung not in model.refused_efforts:
            return rung
    return asked


# -- kept across restarts ---------------------------------------------------------------------------

_pending: dict[str, Mapping[str, Any]] = {}  # imported for endpoints not met yet in this process


def export_capabilities() -> dict[str, Any]:
    """Every latch as a JSON-safe snapshot; endpoints are named by ``endpoint_id``, never by key."""
    endpoints: dict[str, Any] = {}
    for eid, key in _ids.items():
        caps = _by_key.get(key)
        if caps is None:
            continue
        endpoints[eid] = {
            "strict_schemas": caps.strict_schemas,
            "usage_in_stream": caps.usage_in_stream,
            "first_met": caps.first_met,
            "models": {name: m.to_json() for name, m in sorted(caps.models.items())},
        }
    for eid, raw in _pending.items():
        endpoints.setdefault(eid, dict(raw))
    return {"version": SNAPSHOT_VERSION, "saved_at": time.time(), "endpoints": endpoints}


def _merge_endpoint(caps: EndpointCapabilities, raw: Mapping[str, Any]) -> None:
    if raw.get("strict_schemas") is False:
        caps.strict_schemas = False
    if raw.get("usage_in_stream") is False:
        caps.usage_in_stream = False
    met = _met(raw, None)
    # An imported latch keeps its real age; a snapshot without one reads as met now.
    if met is not None and met < caps.first_met:
        caps.first_met = met
    models = raw.get("models")
    if isinstance(models, Mapping):
        for name, value in models.items():
            if isinstance(name, str) and isinstance(value, Mapping):
                caps.model(name).merge(value)


def import_capabilities(snapshot: Mapping[str, Any] | None) -> bool:
    """Merge a stored snapshot into the latches (only latching off, keeping the older age).

    The whole snapshot is checked before anything is merged, so a corrupted one changes nothing.

    Returns:
        ``False`` when the snapshot is of another version (or not a snapshot) and was ignored.

    Raises:
        InvalidInput: a snapshot of this version with a field of the wrong type; the message names it.
    """
    if not isinstance(snapshot, Mapping) or snapshot.get("version") != SNAPSHOT_VERSION:
        return False
    endpoints = snapshot.get("endpoints")
    if not isinstance(endpoints, Mapping):
        raise InvalidInput(f"capability snapshot: endpoints must be an object, got {_shown(endpoints)}")
    saved = snapshot.get("saved_at")
    if saved is not None and _number(saved) is None:
        raise InvalidInput(f"capability snapshot: saved_at must be a number, got {_shown(saved)}")
    for eid, raw in endpoints.items():
        _check_endpoint(eid, raw)
    for eid, raw in endpoints.items():
        key = _ids.get(eid)
        if key is not None and key in _by_key:
            _merge_endpoint(_by_key[key], raw)
        else:
            earlier = _pending.get(eid)
            if earlier is None:
                _pending[eid] = raw
            else:
                holder = EndpointCapabilities(first_met=_met(earlier, time.time()) or time.time())
                _merge_endpoint(holder, earlier)
                _merge_endpoint(holder, raw)
                _pending[eid] = {
                    "strict_schemas": holder.strict_schemas,
                    "usage_in_stream": holder.usage_in_stream,
                    "first_met": holder.first_met,
                    "models": {n: m.to_json() for n, m in holder.models.items()},
                }
    return True


def _check_endpoint(eid: object, raw: object) -> None:
    """Raise ``InvalidInput`` naming the first field of one endpoint's entry that has the wrong type."""
    if not isinstance(eid, str):
        raise InvalidInput(f"capability snapshot: an endpoint id must be text, got {_shown(eid)}")
    where = f"capability snapshot: endpoints[{eid[:16]!r}]"
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where} must be an object, got {_shown(raw)}")
    for name in ("strict_schemas", "usage_in_stream"):
        if name in raw and not isinstance(raw[name], bool):
            raise InvalidInput(f"{where}.{name} must be true or false, got {_shown(raw[name])}")
    if "first_met" in raw and (_number(raw["first_met"]) is None or raw["first_met"] < 0):
        raise InvalidInput(f"{where}.first_met must be a time in seconds, got {_shown(raw['first_met'])}")
    models = raw.get("models", {})
    if not isinstance(models, Mapping):
        raise InvalidInput(f"{where}.models must be an object, got {_shown(models)}")
    for name, model in models.items():
        if not isinstance(name, str):
            raise InvalidInput(f"{where}.models has a name that is not text: {_shown(name)}")
        at = f"{where}.models[{name[:40]!r}]"
        if not isinstance(model, Mapping):
            raise InvalidInput(f"{at} must be an object, got {_shown(model)}")
        for flag in _MODEL_FLAGS:
            if flag in model and not isinstance(model[flag], bool):
                raise InvalidInput(f"{at}.{flag} must be true or false, got {_shown(model[flag])}")
        for listed in _MODEL_LISTS:
            values = model.get(listed, [])
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise InvalidInput(f"{at}.{listed} must be a list of text, got {_shown(values)}")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _met(raw: Mapping[str, Any], default: float | None) -> float | None:
    met = _number(raw.get("first_met"))
    return met if met is not None else default


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def reset_capabilities(endpoint: Endpoint | None = None) -> bool:
    """Forget what an endpoint refused (every endpoint when none is given).

    Returns:
        whether there was anything to forget.
    """
    if endpoint is None:
        had = bool(_by_key or _pending or _priors)
        _by_key.clear()
        _ids.clear()
        _pending.clear()
        _priors.clear()
        return had
    key = endpoint_key(endpoint)
    eid = endpoint_id(endpoint)
    had = _by_key.pop(key, None) is not None
    had = _priors.pop(key, None) is not None or had
    _ids.pop(eid, None)
    return _pending.pop(eid, None) is not None or had


def expire_capabilities(max_age_s: float) -> int:
    """Forget every endpoint first met more than ``max_age_s`` ago; returns how many.

    Nothing is probed: the next request simply carries the field again, and a server that still refuses
    it refuses it once more.
    """
    cutoff = time.time() - max_age_s
    old = [key for key, caps in _by_key.items() if caps.first_met < cutoff]
    for key in old:
        del _by_key[key]
    for eid in [eid for eid, key in _ids.items() if key in old]:
        del _ids[eid]
    stale = [eid for eid, raw in _pending.items() if (_met(raw, time.time()) or 0.0) < cutoff]
    for eid in stale:
        del _pending[eid]
    return len(old) + len(stale)
