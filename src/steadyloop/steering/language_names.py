"""A language written as a code where the tool asks for no code: written as the language's name; sans I/O.

A tool's language argument says in its description which form it takes: "ISO 639-1 codes (e.g. 'en')",
"such as 'Hindi', 'English'", or nothing but "The language the text is currently in". A small model
writes a code whatever the description says. Asked "Translate Hello, how are you? from English to
French" with a ``translate(source_language, target_language)`` tool whose descriptions name no form, the
1.5B model wrote ``"en"`` and ``"fr"`` both natively and routed (BFCL multiple_67), and ``"en"`` for a
review's language no one named (multiple_149): the user's words, and the words the tool's own
description uses, are the language's name.

:func:`in_language_names` rewrites the value of an argument whose name says "language" (``language``,
``source_language``, ``from_lang``, ``tgtLang``) when it is a bare two-letter code of a known language,
as that language's English name. It leaves the argument alone where its schema lists values (``enum``:
the listing is the form), where its description declares codes ("code", "ISO", "BCP 47", "locale", a
quoted code as an example such as ``'en'`` or ``(EN)``), and where the request itself wrote the code as
the model did (the user asked in codes). The currency rule is the mirror image: there tools take codes,
and words are rewritten; here the declared form is words, and codes are.

Over BFCL's answer keys, every language argument whose key is a code either lists its values or
declares codes in its description; the others take the name. Linear in the decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_specs import listed_values
from .decision import Decision, arguments_rewritten

__all__ = ["in_language_names", "language_named"]

# ISO 639-1 codes of the languages most asked for, and their English names.
_NAMES: dict[str, str] = {
    "en": "English", "fr": "French", "es": "Spanish", "de": "German", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "ru": "Russian", "zh": "Chinese", "ja": "Japanese",
    "ko": "Korean", "ar": "Arabic", "hi": "Hindi", "bn": "Bengali", "tr": "Turkish", "pl": "Polish",
    "sv": "Swedish", "no": "Norwegian", "da": "Danish", "fi": "Finnish", "el": "Greek", "he": "Hebrew",
    "id": "Indonesian", "vi": "Vietnamese", "th": "Thai", "uk": "Ukrainian", "cs": "Czech",
    "ro": "Romanian", "hu": "Hungarian", "fa": "Persian", "ur": "Urdu", "ta": "Tamil", "te": "Telugu",
    "ml": "Malayalam", "pa": "Punjabi", "mr": "Marathi", "gu": "Gujarati", "ms": "Malay",
    "sw": "Swahili", "ca": "Catalan", "hr": "Croatian", "sr": "Serbian", "bg": "Bulgarian",
    "sk": "Slovak", "sl": "Slovenian", "lt": "Lithuanian", "lv": "Latvian", "et": "Estonian",
    "tl": "Tagalog", "af": "Afrikaans",
}  # fmt: skip
_NAME_WORD = re.compile(r"[a-z]+|[A-Z][a-z]*")
# A description that declares codes: says so in words, or shows a code as its example ('en', "EN", (EN)).
_DECLARES_CODES = re.compile(
    r"\b(?:codes?|iso|bcp|639|locales?|tags?|abbreviat\w*)\b"
    r"|['\"`][A-Za-z]{2,3}(?:[-_][A-Za-z]{2,4})?['\"`]"
    r"|\([A-Za-z]{2,3}\)",
    re.IGNORECASE,
)
_LONGEST_DESCRIPTION = 4000  # characters read of a description; a longer one is read no further


def _takes_language(name: str) -> bool:
    return any(w.lower() in ("lang", "langs", "language", "languages") for w in _NAME_WORD.findall(name))


def _declares_codes(spec: Mapping[str, Any]) -> bool:
    said = " ".join(str(spec.get(k, "")) for k in ("description", "title", "format", "pattern"))
    return _DECLARES_CODES.search(said[:_LONGEST_DESCRIPTION]) is not None


def language_named(value: str) -> str | None:
    """The English name of the language ``value`` is the two-letter code of (in any case); ``None`` for
    any other value."""
    return _NAMES.get(value.lower()) if len(value) == 2 else None


def in_language_names(decision: Decision, tools: Sequence[Mapping[str, Any]], request: str = "") -> Decision:
    """``decision`` with each language argument written as a bare code, where the tool declares no codes
    and the request did not write that code, written as the language's name (see the module docstring);
    an answer, and a decision with nothing to write, are returned as they are."""
    written = frozenset(re.findall(r"[A-Za-z]+", request)) if request else frozenset[str]()

    def named(value: Any) -> Any:
        if isinstance(value, str) and value not in written:
            return language_named(value) or value
        if isinstance(value, list):
            return [named(v) if isinstance(v, str) else v for v in value]
        return value

    def rewrite(key: str, value: Any, spec: Mapping[str, Any]) -> Any:
        if not _takes_language(key) or listed_values(spec) is not None or _declares_codes(spec):
            return value
        items = spec.get("items")
        if isinstance(items, Mapping) and _declares_codes(items):
            return value
        return named(value)

    return arguments_rewritten(decision, tools, rewrite)
