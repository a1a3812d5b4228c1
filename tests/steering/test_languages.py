"""An answer held to its tool results is also held to the language the user wrote in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice
from steadyloop.loop import run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.grounding import AnswerGaps, answer_gaps, correction
from steadyloop.steering.languages import (
    LANGUAGES,
    declines,
    language_of,
    names_a_language,
    without_preface,
    wrong_language,
)
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import text
from .test_routing import ROUTED, get_weather, list_files, run_listing, shown_text


@pytest.mark.parametrize(
    ("written", "language"),
    [
        ("What does the README of this project say?", "English"),
        ("The README file of the project states that Click is a Python package.", "English"),
        ("¿Qué dice el README de este proyecto?", "Spanish"),
        ("¿Cuántos archivos hay en la carpeta docs?", "Spanish"),
        ("El README dice que Click es un paquete de Python para crear interfaces.", "Spanish"),
        ("Que dit le README ?", "French"),
        ("Combien de fichiers dans docs ?", "French"),
        ("Le README dit que Click est un paquet Python pour créer des interfaces.", "French"),
        ("Was steht in der README?", "German"),
        ("Was ist in diesem Ordner?", "German"),
        ("Die README sagt, dass Click ein Python-Paket ist, mit dem man Kommandozeilen baut.", "German"),
        ("O que diz o README deste projeto?", "Portuguese"),
        ("Quantos arquivos tem a pasta docs?", "Portuguese"),
        ("Cosa dice il README di questo progetto?", "Italian"),
        ("Quanti file ci sono nella cartella docs?", "Italian"),
        # too little to tell, or no words at all
        ("Hola", None),
        ("README.md\nsetup.py\ndocs/", None),
        ("使用摄氏度", None),
        ("", None),
    ],
)
def test_the_language_a_text_is_written_in(written: str, language: str | None) -> None:
    assert language_of(written) == language


@pytest.mark.parametrize(
    ("request_text", "answer", "gap"),
    [
        (
            "¿Qué dice el README de este proyecto?",
            "The README says that Click is a package for CLIs.",
            "Spanish",
        ),
        ("¿Qué dice el README de este proyecto?", "El README dice que Click es un paquete para CLIs.", None),
        ("Was steht in der README?", "The README says that the project is a web framework.", "German"),
        # an answer too short to read, a request in English, or one that asks for a language
        ("¿Qué dice el README de este proyecto?", "`httpx/_api.py`", None),
        ("What does the README of this project say?", "El README dice que Click es un paquete.", "English"),
        ("Traduce el README de este proyecto al inglés.", "The README says that Click is a package.", None),
        ("¿Qué dice el README en inglés?", "The README says that Click is a package for CLIs.", None),
    ],
)
def test_an_answer_in_another_language_than_the_request_is_a_gap(
    request_text: str, answer: str, gap: str | None
) -> None:
    assert wrong_language(request_text, answer) == gap
    results = ["Click is a Python package for creating command line interfaces."]
    assert answer_gaps(answer, results, request_text).language == gap


def test_an_answer_whose_language_is_all_it_missed_is_asked_to_be_written_again_in_it() -> None:
    told = correction(AnswerGaps(language="Spanish"))
    assert "Write your answer above in Spanish" in told
    assert "tool results" not in told  # told to answer again from them, the model translated the whole file
    both = correction(AnswerGaps(missing=("setup.py",), language="Spanish"))
    assert "setup.py" in both and both.endswith("Write it in Spanish.")
    assert AnswerGaps(language="Spanish").size == 1


def test_a_request_that_names_a_language_or_asks_for_a_translation() -> None:
    assert names_a_language("Translate the README into French")
    assert names_a_language("¿Puedes traducir esto?")
    assert names_a_language("Antworte auf Deutsch")
    assert not names_a_language("¿Qué dice el README?")


@given(st.text(max_size=400), st.text(max_size=400))
def test_reading_any_text_is_total(request_text: str, answer: str) -> None:
    assert language_of(answer) in (None, *LANGUAGES)
    assert wrong_language(request_text, answer) in (None, *LANGUAGES)


def test_reading_is_linear() -> None:
    assert growth(lambda n: language_of("el the der il o le " * n + "¿"), 2_000) < LINEAR_BOUND
    assert growth(lambda n: wrong_language("¿Qué dice " * n, "the file " * n), 2_000) < LINEAR_BOUND


ENGLISH = "The folder holds docs/, README.md and pyproject.toml."
SPANISH = "La carpeta tiene docs/, README.md y pyproject.toml."


async def _listed_in_english_then(rewrite: str) -> tuple[Any, list[Event], list[dict[str, Any]]]:
    """A Spanish request for a folder's contents, answered in English first and then with ``rewrite``."""
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(ENGLISH),
        text(rewrite),
    ) as server:
        return await run_listing(server, "¿Qué hay en esta carpeta?", (list_files,))


async def test_an_answer_in_english_to_a_spanish_request_is_asked_again_and_shown_in_spanish() -> None:
    """End to end through the loop: the held answer came back in English; it is sent back once, and
    only the Spanish one is shown."""
    english, spanish = ENGLISH, SPANISH
    result, events, bodies = await _listed_in_english_then(spanish)
    assert result.turn.content == spanish
    assert shown_text(events) == spanish
    said, told = bodies[3]["messages"][-2:]
    assert said == {"role": "assistant", "content": english}
    assert told["role"] == "user" and "Spanish" in told["content"]
    grounding = [e for e in events if isinstance(e, Notice) and e.name == "grounding"]
    assert len(grounding) == 1 and "Spanish" in grounding[0].text


async def test_an_answer_in_the_request_language_is_asked_once() -> None:
    spanish = "La carpeta tiene docs/, README.md y pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(spanish),
    ) as server:
        result, _events, bodies = await run_listing(server, "¿Qué hay en esta carpeta?", (list_files,))
    assert result.turn.content == spanish and len(bodies) == 3
    # Told the request's language before it writes, at the end of the last result: the cached prompt is
    # its prefix
    told = bodies[2]["messages"][-1]
    assert told["role"] == "tool"
    assert told["content"].endswith("\n\n(The user wrote in Spanish: answer in Spanish.)")
    assert result.messages[-1].content == spanish  # the note went to the server only, not into the history
    assert not any("The user wrote in" in str(m.content) for m in result.messages)


@pytest.mark.parametrize(
    ("request_text", "system"),
    [
        ("What is in this folder?", None),  # English: nothing to tell
        ("¿Qué hay en esta carpeta? Contesta en inglés.", None),  # the request names the language
        ("¿Qué hay en esta carpeta?", "Always answer in English."),  # so does the host
        ("docs?", None),  # too little to tell
    ],
)
async def test_an_answer_is_told_no_language_where_the_request_or_host_chose_or_none_is_clear(
    request_text: str, system: str | None
) -> None:
    answer = "The folder holds docs/, README.md and pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(answer),
    ) as server:
        await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content=request_text)],
            system=system,
            tools=[list_files],
            policy=ROUTED,
        )
        sent = server.chat_requests[2].json
    assert sent is not None
    last = sent["messages"][-1]
    assert last["role"] == "tool" and "The user wrote in" not in last["content"]


async def test_a_host_that_names_the_answers_language_is_not_overruled() -> None:
    """The system prompt asks for English: an English answer to a Spanish request stands, asked once."""
    english = "The folder holds docs/, README.md and pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(english),
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="¿Qué hay en esta carpeta?")],
            system="Always answer in English.",
            tools=[list_files],
            policy=ROUTED,
        )
        asked = len(server.chat_requests)
    assert result.turn.content == english and asked == 3


async def test_sent_back_for_its_language_an_answer_that_comes_back_declining_is_not_taken() -> None:
    """Sent back to be written in Spanish, the 1.5B model's "There are no files or folders in this
    directory." came back as "Lo siento, pero no puedo ayudar con eso." (sorry, I can't help)."""
    english = "It is 18C in Oslo, and the sky is clear for the rest of the day."
    async with ScriptedServer(
        text('{"name": "get_weather", "arguments": {"city": "Oslo"}}'),
        text('{"name": "answer"}'),
        text(english),
        text("Lo siento, pero no puedo ayudar con eso."),
    ) as server:
        result, events, bodies = await run_listing(server, "¿Qué tiempo hace en Oslo?", (get_weather,))
    assert len(bodies) == 4 and result.turn.content == english and shown_text(events) == english


@pytest.mark.parametrize(
    ("answer", "declined"),
    [
        ("Lo siento, pero no puedo ayudar con eso.", True),
        ("I'm sorry, but I can't assist with that request.", True),
        ("Je ne peux pas vous aider.", True),
        ("Es tut mir leid, das kann ich nicht.", True),
        ("En esta carpeta no hay ningún archivo.", False),
        ("The folder holds docs/ and README.md.", False),
    ],
)
def test_an_answer_that_declines_is_read_in_six_languages(answer: str, declined: bool) -> None:
    assert declines(answer) is declined


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (
            "Bien sûr, je vais répéter mon réponse en français :\nLe README décrit Click.",
            "Le README décrit Click.",
        ),
        ("¡Claro! Aquí tienes la respuesta en español:\n\nHay un archivo.", "Hay un archivo."),
        ("Hay un archivo:\n- notes.txt", "Hay un archivo:\n- notes.txt"),  # names no language
        ("Respuesta en español:", "Respuesta en español:"),  # nothing after it
    ],
)
def test_a_rewritten_answer_loses_its_line_about_itself(answer: str, shown: str) -> None:
    assert without_preface(answer) == shown


async def test_an_answer_rewritten_in_the_request_language_is_shown_without_its_preface() -> None:
    result, events, _bodies = await _listed_in_english_then(
        f"¡Claro! Aquí tienes la respuesta en español:\n\n{SPANISH}"
    )
    assert result.turn.content == SPANISH and shown_text(events) == SPANISH


@given(st.text(max_size=400))
def test_dropping_a_preface_is_total(answer: str) -> None:
    assert without_preface(answer) in answer
