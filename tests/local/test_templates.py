"""The bundled chat templates: what the model reads after a tool result."""

from __future__ import annotations

from importlib import resources

import jinja2
import pytest

CALL = {"id": "a", "type": "function", "function": {"name": "list_dir", "arguments": {"path": "."}}}
TOOLS = [{"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object"}}}]


def render(name: str, messages: list[dict[str, object]]) -> str:
    text = resources.files("steadyloop.local").joinpath("templates", name).read_text()
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    return env.from_string(text).render(messages=messages, tools=TOOLS, add_generation_prompt=True)


@pytest.mark.parametrize("name", ["qwen2.5-coder-jsonblock.jinja", "qwen2.5-coder-jsonblock-think.jinja"])
def test_a_tool_result_restates_the_question_it_answers(name: str) -> None:
    # Told only to "answer my question", the 0.5B model described the tool's output instead of giving it.
    prompt = render(
        name,
        [
            {"role": "user", "content": "What is in this folder?"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "a", "content": "a.txt\nb/"},
            {"role": "assistant", "content": "a.txt and b/."},
            {"role": "user", "content": "And in b?"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "a", "content": "c.txt"},
        ],
    )
    restated = "Now answer my question from this, in plain words, without JSON: "
    assert f"The tool returned: a.txt\nb/\n{restated}What is in this folder?<|im_end|>" in prompt
    assert f"The tool returned: c.txt\n{restated}And in b?<|im_end|>" in prompt
