"""A language written as a code, where the tool declares no codes, goes to the tool as the language's name:
"Translate Hello from English to French" is ``English`` to ``French``, whatever codes the routed decision
wrote; a tool that asks for ISO codes, or lists its values, gets what the decision wrote.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool gets the names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.steering.language_names import in_language_names, language_named
from steadyloop.tools.definition import tool

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import decided_then_answered, one_tool


@pytest.mark.parametrize(
    ("value", "name"),
    [("en", "English"), ("FR", "French"), ("zh", "Chinese"), ("xx", None), ("eng", None), ("", None)],
)
def test_a_two_letter_code_of_a_known_language_has_its_name(value: str, name: str | None) -> None:
    assert language_named(value) == name


TRANSLATE = one_tool(
    "translate",
    {
        "text": {"type": "string"},
        "source_language": {"type": "string", "description": "The language the text is currently in."},
        "tgtLang": {"type": "string"},
        "languages": {"type": "array", "items": {"type": "string"}},
        "iso_language": {"type": "string", "description": "The language, as an ISO 639-1 code."},
        "example_language": {"type": "string", "description": "The language, such as 'en' or 'hi'."},
        "shown_lang": {"type": "string", "description": "One of English (EN), Spanish (ES)."},
        "listed_language": {"type": "string", "enum": ["en", "fr"]},
        "coded_langs": {"type": "array", "items": {"type": "string", "description": "A BCP 47 tag."}},
        "country": {"type": "string"},
    },
)


def test_only_codes_of_language_arguments_that_declare_no_codes_are_written_as_names() -> None:
    decided = Decision(
        "translate",
        {
            "text": "en",  # not a language argument
            "source_language": "en",
            "tgtLang": "FR",
            "languages": ["de", "xx", 3],
            "iso_language": "en",  # the description asks for codes
            "example_language": "en",  # its example is a code
            "shown_lang": "EN",
            "listed_language": "en",  # held to listed values: their form is the tool's
            "coded_langs": ["en"],
            "country": "fr",
        },
        (("translate", {"source_language": "French"}), ("other", {"language": "es"})),
    )
    written = in_language_names(decided, TRANSLATE, "Translate 'Hello' from English to French.")
    assert written.arguments == {
        "text": "en",
        "source_language": "English",
        "tgtLang": "French",
        "languages": ["German", "xx", 3],
        "iso_language": "en",
        "example_language": "en",
        "shown_lang": "EN",
        "listed_language": "en",
        "coded_langs": ["en"],
        "country": "fr",
    }
    # another tool's language argument has no schema here, so no codes are declared for it
    assert written.more == (("translate", {"source_language": "French"}), ("other", {"language": "Spanish"}))
    named = Decision("translate", {"source_language": "English"})
    assert in_language_names(named, TRANSLATE) is named
    answer = Decision(ANSWER, {})
    assert in_language_names(answer, TRANSLATE) is answer


def test_a_code_the_request_wrote_is_left_as_the_user_wrote_it() -> None:
    decided = Decision("translate", {"source_language": "en", "tgtLang": "de"})
    written = in_language_names(decided, TRANSLATE, "Translate this from en to de, please")
    assert written is decided
    # "EN" in the request is not the model's "en": the case differs, and "en" alone is a word elsewhere
    assert in_language_names(decided, TRANSLATE, "EN text").arguments["source_language"] == "English"


@given(
    st.dictionaries(
        st.sampled_from(["source_language", "tgtLang", "languages", "text", "lang"]) | st.text(max_size=20),
        st.one_of(st.text(max_size=50), st.integers(), st.floats(), st.lists(st.text(max_size=5))),
    ),
    st.text(max_size=200),
)
def test_writing_names_is_total(arguments: dict[str, Any], request: str) -> None:
    written = in_language_names(Decision("translate", arguments), TRANSLATE, request).arguments
    assert written.keys() == arguments.keys()


def test_writing_names_is_linear() -> None:
    def languages(n: int) -> Decision:
        return in_language_names(Decision("translate", {"languages": ["en"] * n}), TRANSLATE, "en " * n)

    assert growth(languages, 5_000) < LINEAR_BOUND
    long_description = one_tool(
        "translate", {"language": {"type": "string", "description": "the language " * 5_000}}
    )
    assert in_language_names(Decision("translate", {"language": "en"}), long_description).arguments == {
        "language": "English"
    }


asked: list[tuple[str, str]] = []


@tool
def translate(text: str, source_language: str, target_language: str) -> str:
    """Translate text from one language to another."""
    asked.append((source_language, target_language))
    return "Bonjour, comment allez-vous ?"


async def test_a_routed_step_sends_the_tool_the_languages_names() -> None:
    asked.clear()
    call = [
        {
            "name": "translate",
            "arguments": {"text": "Hello, how are you?", "source_language": "en", "target_language": "fr"},
        }
    ]
    await decided_then_answered(
        call, "Translate Hello, how are you? from English to French.", [translate], "Bonjour !"
    )
    assert asked == [("English", "French")]
