"""Gemini on Vertex AI: a base URL that names a project, location and publisher is used as given (no API
version added) and its key, an OAuth access token, goes as a bearer; the Gemini API's shape is unchanged.

The stream is the recorded Vertex AI answer of tests/data/providers/gemini/05-vertex-text.sse, asked at the
path it was recorded from (``/v1beta1/projects/pydantic-ai/locations/global/publishers/google/models/
gemini-3-flash-preview:streamGenerateContent?alt=sse``; source in the README there).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.sizing import TokenCount, count_tokens
from steadyloop.testing.provider_streams import sse_reply
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.gemini.provider import gemini_auth, gemini_url, is_vertex

from .provider_doubles import DATA

VERTEX = "/v1beta1/projects/pydantic-ai/locations/global/publishers/google"
MODEL = "gemini-3-flash-preview"


async def test_a_vertex_turn_goes_to_the_publisher_path_with_a_bearer_token() -> None:
    recorded = (DATA / "gemini" / "05-vertex-text.sse").read_bytes()
    chunks = [json.loads(line[6:]) for line in recorded.decode().split("\r\n") if line.startswith("data: ")]
    said = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    async with ScriptedServer(sse_reply(recorded)) as server:
        endpoint = Endpoint(server.base_url.removesuffix("/v1") + VERTEX, "ya29.token", api="gemini")
        turn = await sl.run_turn(endpoint, {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        (call,) = [r for r in server.requests if r.path.endswith(":streamGenerateContent")]
    assert turn.content == said and said
    assert call.path == f"{VERTEX}/models/{MODEL}:streamGenerateContent" and call.query == "alt=sse"
    assert call.header("authorization") == "Bearer ya29.token"
    assert call.header("x-goog-api-key") is None
    for other in server.requests:  # the count and any listing carry the same credential
        assert other.header("x-goog-api-key") is None


def test_the_gemini_api_shape_is_unchanged() -> None:
    api = Endpoint("https://generativelanguage.googleapis.com", "AIza-key", api="gemini")
    assert gemini_url(api.base_url, "gemini-2.5-flash", "streamGenerateContent") == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    )
    assert gemini_auth(api) == {"x-goog-api-key": "AIza-key"}
    regional = (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google"
    )
    assert is_vertex(regional) and is_vertex(regional + "/")
    assert gemini_url(regional, "gemini-2.5-pro", "countTokens") == (
        f"{regional}/models/gemini-2.5-pro:countTokens"
    )
    assert not is_vertex("https://aiplatform.googleapis.com/v1/projects/p/locations/l")  # no publisher
    assert gemini_auth(Endpoint(regional, None, api="gemini")) == {}


@given(st.text(max_size=120), st.text(max_size=40))
def test_any_base_url_and_model_make_a_url(base: str, model: str) -> None:
    url = gemini_url(base, model, "streamGenerateContent")
    assert url.endswith(":streamGenerateContent")
    assert isinstance(is_vertex(base), bool)


# What each countTokens takes at the top of its body, as the APIs document it:
# - the Gemini API (https://ai.google.dev/api/tokens#method:-models.counttokens): ``contents`` or a whole
#   ``generateContentRequest`` (which names its ``model``), never both;
# - Vertex AI (https://cloud.google.com/vertex-ai/generative-ai/docs/reference/rest/v1beta1/
#   projects.locations.publishers.models/countTokens): ``model``, ``instances``, ``contents``, ``tools``,
#   ``systemInstruction`` and ``generationConfig``, side by side; no ``generateContentRequest``.
# Like the real endpoints, the double refuses a field it does not define with 400 INVALID_ARGUMENT.
GEMINI_API_COUNT = {"contents", "generateContentRequest"}
VERTEX_COUNT = {"model", "instances", "contents", "tools", "systemInstruction", "generationConfig"}


def count_double(fields: set[str], total: int) -> Callable[[RecordedRequest], ScriptedReply]:
    def answer(request: RecordedRequest) -> ScriptedReply:
        body = request.json if isinstance(request.json, dict) else {}
        unknown = sorted(set(body) - fields)
        if unknown or not body or {"contents", "generateContentRequest"} <= set(body):
            name = unknown[0] if unknown else "contents"
            message = f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
            return Reply.json(
                {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, status=400
            )
        inner = body.get("generateContentRequest")
        if inner is not None and not str(inner.get("model", "")).startswith("models/"):
            return Reply.json({"error": {"code": 400, "message": "model is required"}}, status=400)
        return Reply.json({"totalTokens": total})

    return answer


COUNTED_BODY = {
    "model": MODEL,
    "messages": [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_capital",
                "description": "The capital of a country.",
                "parameters": {"type": "object", "properties": {"country": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": "auto",
    "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
}


@pytest.mark.parametrize("vertex", [True, False], ids=["vertex", "gemini-api"])
async def test_count_tokens_sends_the_body_each_api_documents(vertex: bool) -> None:
    async with ScriptedServer() as server:
        server.count_tokens = count_double(VERTEX_COUNT if vertex else GEMINI_API_COUNT, 57)
        base = server.base_url.removesuffix("/v1") + (VERTEX if vertex else "/v1beta")
        endpoint = Endpoint(base, "ya29.token" if vertex else "AIza-key", api="gemini")
        counted = await count_tokens(endpoint, MODEL, COUNTED_BODY)
        (request,) = [r for r in server.requests if r.path.endswith(":countTokens")]
    assert counted == TokenCount(57, "gemini:countTokens")
    assert request.path.endswith(f"/models/{MODEL}:countTokens")
    sent = request.json if vertex else request.json["generateContentRequest"]
    # System instruction and tools are counted on both APIs.
    assert sent["systemInstruction"] == {"parts": [{"text": "Answer briefly."}]}
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "get_capital"
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "What is the capital of France?"}]}]
    if vertex:
        assert set(sent) <= VERTEX_COUNT
        assert request.header("authorization") == "Bearer ya29.token"
    else:
        assert sent["model"] == f"models/{MODEL}"
        assert request.header("x-goog-api-key") == "AIza-key"
