"""Gemini on Vertex AI: a base URL that names a project, location and publisher is used as given (no API
version added) and its key, an OAuth access token, goes as a bearer; the Gemini API's shape is unchanged.

The stream is the recorded Vertex AI answer of tests/data/providers/gemini/05-vertex-text.sse, asked at the
path it was recorded from (``/v1beta1/projects/pydantic-ai/locations/global/publishers/google/models/
gemini-3-flash-preview:streamGenerateContent?alt=sse``; source in the README there).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.testing.provider_streams import sse_reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.gemini_content import gemini_auth, gemini_url, is_vertex

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
