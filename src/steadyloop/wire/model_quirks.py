"""What a model family is documented to refuse, as data: latched before its first request.

A model that refuses a field costs one refused request the first time each process sends it, before
negotiation latches the field off. Where a family's refusal is documented, or reported the same way over
and over, it is a prior: the model's latches start with the field off, on whichever endpoint serves the
model, exactly the latch the refusal would have set. It is a latch, not a rule: a caller who knows better
turns it back on (``model_capabilities_for(endpoint, "o4-mini").chosen_temperature = True``); it comes
back with the model's latches after ``reset_capabilities``, as it would in a new process.

Each entry says where its facts come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MODEL_QUIRKS", "ModelQuirk", "quirk_for"]


@dataclass(frozen=True, slots=True)
class ModelQuirk:
    """What the models whose names match ``pattern`` refuse.

    Attributes:
        pattern: the model names it covers (searched, case ignored; a router's ``openai/`` prefix allowed).
        chosen_temperature: ``False``: the model picks its own temperature and refuses one.
        completion_tokens: the reply ceiling must be spelled ``max_completion_tokens``.
        refused_fields: other request fields the model refuses.
        source: where the refusal is documented or reported.
    """

    pattern: re.Pattern[str]
    chosen_temperature: bool = True
    completion_tokens: bool = False
    refused_fields: frozenset[str] = frozenset()
    source: str = ""


def _names(regex: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:[\w.-]+/)?(?:{regex})$", re.IGNORECASE)


# Sampling controls OpenAI's reasoning models refuse besides temperature.
_REASONING_SAMPLING = frozenset(
    {"top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs"}
)

#: The families steadyloop knows the refusals of, first match wins.
MODEL_QUIRKS: tuple[ModelQuirk, ...] = (
    # OpenAI's o-series: "Unsupported parameter: 'temperature' is not supported with this model."
    # (openai/openai-python#2104, o3-mini), "Unsupported value: 'temperature' does not support 0 with
    # this model. Only the default (1) value is supported." (tests/data/error_bodies/openai.json); no
    # temperature, top_p, penalties or logprobs, and max_completion_tokens only (the parameter table of
    # community.openai.com/t/developer-role-not-accepted-for-o1-o1-mini-o3-mini/1110750).
    ModelQuirk(
        _names(r"o[134](?:-[\w.-]+)?"),
        chosen_temperature=False,
        completion_tokens=True,
        refused_fields=_REASONING_SAMPLING,
        source="openai/openai-python#2104; community.openai.com/t/1110750",
    ),
    # GPT-5 reasoning models, the same refusals (gpt-5-nano refusing temperature 0.1, BerriAI/litellm#33738
    # in tests/data/error_bodies/proxies.json; "Unsupported parameter: top_p" for 5.2 to 5.4,
    # ChatGPTNextWeb/NextChat#6774). The -chat variants are chat models and take sampling controls.
    ModelQuirk(
        _names(r"gpt-5(?:\.\d+)?(?:-(?!chat)[\w.-]+)?"),
        chosen_temperature=False,
        completion_tokens=True,
        refused_fields=_REASONING_SAMPLING,
        source="BerriAI/litellm#33738; ChatGPTNextWeb/NextChat#6774",
    ),
)


def quirk_for(model: str | None) -> ModelQuirk | None:
    """The documented refusals of ``model``'s family, or ``None`` when steadyloop knows of none."""
    if not model:
        return None
    for quirk in MODEL_QUIRKS:
        if quirk.pattern.search(model.strip()):
            return quirk
    return None
