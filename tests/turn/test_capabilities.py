"""Capability latches kept for the life of the process: effort_for, snapshots, reset, expiry."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.reset import reset_all
from steadyloop.turn.capabilities import (
    SNAPSHOT_VERSION,
    ModelCapabilities,
    capabilities_for,
    effort_for,
    expire_capabilities,
    export_capabilities,
    import_capabilities,
    model_capabilities_for,
    reset_capabilities,
)
from steadyloop.wire.endpoints import Endpoint, endpoint_id

LOCAL = Endpoint("http://127.0.0.1:8080/v1")
CLOUD = Endpoint("https://api.example.com/v1", api_key="sk-secret-key")


def test_effort_for_sends_nothing_for_off_absent_or_a_model_that_takes_none() -> None:
    assert effort_for(None, None) == "" and effort_for(None, "off") == "" and effort_for(None, "low") == "low"
    assert effort_for(ModelCapabilities(takes_effort=False), "high") == ""


def test_effort_for_walks_upward_only_and_prefers_listed_rungs() -> None:
    walked = ModelCapabilities(refused_efforts={"none", "minimal"})
    assert effort_for(walked, "none") == "low" and effort_for(walked, "minimal") == "low"
    listed = ModelCapabilities(refused_efforts={"none"}, supported_efforts=("medium", "high"))
    assert effort_for(listed, "none") == "medium"
    assert effort_for(ModelCapabilities(refused_efforts={"high"}), "high") == "high"  # nowhere upward to go
    assert effort_for(ModelCapabilities(refused_efforts={"xhigh"}), "xhigh") == "xhigh"  # not ours to move


def test_one_models_refusal_never_speaks_for_another() -> None:
    model_capabilities_for(CLOUD, "gpt-4o").refused_efforts.add("low")
    assert model_capabilities_for(CLOUD, "gpt-5").refused_efforts == set()
    assert model_capabilities_for(LOCAL, "gpt-4o").refused_efforts == set()


def _latch_some() -> None:
    capabilities_for(LOCAL).strict_schemas = False
    qwen = model_capabilities_for(LOCAL, "qwen")
    qwen.assistant_prefill = False
    qwen.refused_fields.add("min_p")
    model_capabilities_for(CLOUD, "cloud-model").legacy_token_limit = False


def test_a_snapshot_is_json_safe_names_endpoints_by_digest_and_carries_no_key() -> None:
    _latch_some()
    snapshot = export_capabilities()
    text = json.dumps(snapshot)
    assert "sk-secret-key" not in text and "api.example.com" not in text
    assert snapshot["version"] == SNAPSHOT_VERSION
    assert set(snapshot["endpoints"]) == {endpoint_id(LOCAL), endpoint_id(CLOUD)}


def test_importing_restores_the_latches_after_a_restart_and_keeps_their_age() -> None:
    _latch_some()
    capabilities_for(LOCAL).first_met = time.time() - 3600
    snapshot = json.loads(json.dumps(export_capabilities()))
    reset_all()
    assert import_capabilities(snapshot)
    assert capabilities_for(LOCAL).strict_schemas is False
    assert capabilities_for(LOCAL).first_met < time.time() - 3000
    qwen = model_capabilities_for(LOCAL, "qwen")
    assert qwen.assistant_prefill is False and qwen.refused_fields == {"min_p"}
    assert model_capabilities_for(CLOUD, "cloud-model").legacy_token_limit is False


def test_importing_only_latches_off_and_ignores_another_version() -> None:
    _latch_some()
    snapshot = export_capabilities()
    on = json.loads(json.dumps(snapshot))
    on["endpoints"][endpoint_id(LOCAL)]["strict_schemas"] = True
    assert import_capabilities(on)
    assert capabilities_for(LOCAL).strict_schemas is False
    assert not import_capabilities({**snapshot, "version": SNAPSHOT_VERSION + 1})
    assert not import_capabilities({"nonsense": 1})


def test_reset_one_endpoint_or_all() -> None:
    _latch_some()
    assert reset_capabilities(LOCAL) is True
    assert capabilities_for(LOCAL).strict_schemas is True
    assert (
        model_capabilities_for(CLOUD, "cloud-model").legacy_token_limit is False
    )  # the other endpoint keeps its own
    assert reset_capabilities(Endpoint("http://never.met/v1")) is False
    assert reset_capabilities() is True
    assert model_capabilities_for(CLOUD, "cloud-model").legacy_token_limit is True


def test_expire_drops_endpoints_first_met_too_long_ago() -> None:
    _latch_some()
    capabilities_for(LOCAL).first_met = time.time() - 7200
    assert expire_capabilities(3600) == 1
    assert capabilities_for(LOCAL).strict_schemas is True
    assert model_capabilities_for(CLOUD, "cloud-model").legacy_token_limit is False


def test_reset_all_drops_every_cache_and_latch() -> None:
    _latch_some()
    reset_all()
    assert export_capabilities()["endpoints"] == {}


def _snapshot_with(change: str, value: object) -> dict[str, object]:
    _latch_some()
    snapshot: dict[str, Any] = json.loads(json.dumps(export_capabilities()))
    reset_all()
    entry = snapshot["endpoints"][endpoint_id(LOCAL)]
    if change.startswith("model."):
        entry["models"]["qwen"][change.removeprefix("model.")] = value
    elif change == "endpoint":
        snapshot["endpoints"][endpoint_id(LOCAL)] = value
    elif change == "endpoints":
        snapshot["endpoints"] = value
    else:
        entry[change] = value
    return snapshot


@pytest.mark.parametrize(
    ("change", "value", "named"),
    [
        ("first_met", "yesterday", "first_met"),
        ("first_met", float("nan"), "first_met"),
        ("first_met", -5, "first_met"),
        ("strict_schemas", "no", "strict_schemas"),
        ("models", [1, 2], "models"),
        ("model.refused_efforts", "high", "refused_efforts"),
        ("model.refused_fields", [1], "refused_fields"),
        ("model.takes_effort", 0, "takes_effort"),
        ("model.answer_first", "false", "answer_first"),
        ("endpoint", 7, "must be an object"),
        ("endpoints", [], "endpoints"),
    ],
)
def test_a_corrupted_snapshot_is_refused_naming_the_field_and_changes_nothing(
    change: str, value: object, named: str
) -> None:
    snapshot = _snapshot_with(change, value)
    with pytest.raises(InvalidInput, match=named):
        import_capabilities(snapshot)
    assert capabilities_for(LOCAL).strict_schemas is True
    assert expire_capabilities(3600) == 0  # nothing pending that could raise later


def test_a_valid_snapshot_still_expires_by_its_age() -> None:
    _latch_some()
    capabilities_for(LOCAL).first_met = time.time() - 7200
    snapshot = json.loads(json.dumps(export_capabilities()))
    reset_all()
    assert import_capabilities(snapshot)
    assert expire_capabilities(3600) == 1


def test_the_new_latches_travel_in_a_snapshot() -> None:
    model = model_capabilities_for(LOCAL, "qwen3")
    model.answer_first = False
    model.native_tools = False
    snapshot = json.loads(json.dumps(export_capabilities()))
    reset_all()
    assert import_capabilities(snapshot)
    restored = model_capabilities_for(LOCAL, "qwen3")
    assert restored.answer_first is False and restored.native_tools is False


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
    max_leaves=15,
)
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "strict_schemas": _JSON,
        "usage_in_stream": _JSON,
        "first_met": _JSON | st.floats(0, 2e9),
        "models": _JSON
        | st.dictionaries(
            st.text(max_size=5),
            st.fixed_dictionaries(
                {},
                optional={
                    "takes_effort": _JSON,
                    "answer_first": st.booleans(),
                    "refused_efforts": st.lists(st.text(max_size=5)) | _JSON,
                    "native_tools": _JSON,
                },
            ),
            max_size=2,
        ),
    },
)


@given(st.dictionaries(st.text(max_size=8), _ENTRY | _JSON, max_size=3) | _JSON)
def test_any_snapshot_is_merged_or_refused_with_invalid_input_and_nothing_raises_later(
    endpoints: Any,
) -> None:
    reset_all()
    try:
        accepted = import_capabilities({"version": SNAPSHOT_VERSION, "endpoints": endpoints})
    except InvalidInput as error:
        assert "capability snapshot" in str(error)
    else:
        assert accepted is True
    export_capabilities()
    expire_capabilities(0)
    expire_capabilities(10**9)
