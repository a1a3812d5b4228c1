"""Which language a request or an answer is written in, from its short common words; sans I/O.

Asked "¿Qué dice el README de este proyecto?", the 1.5B model read the README (in English) and answered in
English, even with a system prompt that asked for the user's language. The grounding check
(``grounding.py``) sends such an answer back once to be written in the request's language. The languages
are English and the five the bundled model is most often asked in after it, as ``asked.py`` reads them:
Spanish, French, German, Portuguese and Italian.

A language is read only where its words clearly outnumber every other's: a short answer ("The file is
`httpx/_api.py`."), a listing, or a mix reads as none, and none is never a gap. Linear in the text.
"""

from __future__ import annotations

import re

__all__ = ["LANGUAGES", "declines", "language_of", "names_a_language", "without_preface", "wrong_language"]

ENGLISH = "English"

# Words each language uses often and the others seldom; words two of them share ("de", "la", "que", "do") are
# left out, or given to neither.
_WORD_LISTS: dict[str, str] = {
    ENGLISH: (
        "the is are were what which how does did of and this that these those with from for it its "
        "you your can there has have many where why file files folder says say show tell me"
    ),
    "Spanish": (
        "el los las del qué cuál cuáles cómo cuántos cuántas dónde por están es son hay y pero eso esto "
        "este esta estos archivo archivos carpeta carpetas directorio proyecto puedes puedo muestra dime "
        "lee sobre aquí tiene tienes contiene ningún ninguna nada también muy"
    ),
    "French": (
        "le les des du est et une dans quel quelle quels quelles ce cette avec pour sur dit fichier "
        "fichiers dossier projet combien où comment pourquoi qu'est c'est"
    ),
    "German": (
        "der die das und ist ein eine nicht wie welche welcher welches steht mit für auf im den dem "
        "datei dateien ordner projekt zeige gibt sind wo warum"
    ),
    "Portuguese": (
        "o os da dos das não é um uma com diz arquivo arquivos pasta projeto quantos quantas onde "
        "qual quais estão em na isso"
    ),
    "Italian": (
        "il gli della dello degli delle che è per cosa cartella progetto quanti quante dove non ci anche "
        "però quale quali sono nel nella questo questa"
    ),
}
_WORDS = {language: frozenset(words.split()) for language, words in _WORD_LISTS.items()}
#: The languages :func:`language_of` reads.
LANGUAGES = tuple(_WORDS)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_LEAST = 2  # words of a language for the text to be read as in it
_PREFACE_CHARS = 120  # a line about the answer is short
# The request names a language: "Translate the README into English" is answered in English.
_LANGUAGE_NAMED = re.compile(
    r"\b(?:english|ingl[eé]s|anglais|englisch|inglese"
    r"|spanish|espa[nñ]ol|espagnol|spanisch|spagnolo|espanhol"
    r"|french|franc[eé]s|fran[cç]ais|franz[oö]sisch|francese"
    r"|german|alem[aã]n|alem[aã]o|allemand|deutsch|tedesco"
    r"|portuguese|portugu[eé]s|portugais|portugiesisch|portoghese"
    r"|italian|italiano|italien|italienisch"
    r"|translat\w*|traduc\w*|tradu[zç]\w*|[üu]bersetz\w*|tradur\w*)\b",
    re.IGNORECASE,
)


def language_of(text: str) -> str | None:
    """The language ``text`` is written in, of :data:`LANGUAGES`; ``None`` when no language's common words
    clearly outnumber every other's."""
    counts = dict.fromkeys(_WORDS, 0)
    if "¿" in text or "¡" in text:
        counts["Spanish"] += 2
    for match in _WORD.finditer(text):
        word = match.group(0).lower()
        for language, words in _WORDS.items():
            if word in words:
                counts[language] += 1
    ranked = sorted(counts.items(), key=lambda item: item[1], reverse=True)
    (first, most), (_, next_most) = ranked[0], ranked[1]
    return first if most >= _LEAST and most >= 2 * next_most + 1 else None


# An answer that declines ("I'm sorry, but I can't help with that"), in the six languages: sent back to be
# written in Spanish, "There are no files or folders in this directory." came back as "Lo siento, pero no
# puedo ayudar con eso." (sorry, I can't help with that).
_DECLINES = re.compile(
    r"\b(?:i\s+(?:can't|cannot|can\s+not|am\s+unable\s+to)|i'm\s+(?:sorry|unable)"
    r"|lo\s+siento|no\s+puedo|je\s+ne\s+peux\s+pas|d[ée]sol[ée]|ich\s+kann\s+nicht|es\s+tut\s+mir\s+leid"
    r"|n[ãa]o\s+posso|desculp|non\s+posso|mi\s+dispiace)",
    re.IGNORECASE,
)


def declines(answer: str) -> bool:
    """Whether ``answer`` declines to answer, in any of :data:`LANGUAGES`."""
    return _DECLINES.search(answer) is not None


def without_preface(answer: str) -> str:
    """``answer`` without an opening line about itself that names a language and ends with a colon ("Bien
    sûr, je vais répéter mon réponse en français :", "¡Claro! Aquí tienes la respuesta en español:"), as
    an answer rewritten in another language opens; as it is when nothing follows that line."""
    first, newline, rest = answer.lstrip().partition("\n")
    if not newline or not rest.strip() or not first.rstrip().endswith(":") or len(first) > _PREFACE_CHARS:
        return answer
    return rest.lstrip("\n") if _LANGUAGE_NAMED.search(first) else answer


def names_a_language(request: str) -> bool:
    """Whether ``request`` names a language or asks for a translation: the answer's language is then the
    one it asks for, not the one it is written in."""
    return _LANGUAGE_NAMED.search(request) is not None


def wrong_language(request: str, answer: str) -> str | None:
    """The request's language when ``answer`` is written in another one, both read clearly; ``None``
    otherwise, and for a request that names a language (:func:`names_a_language`)."""
    asked = language_of(request)
    if asked is None or names_a_language(request):
        return None
    written = language_of(answer)
    return asked if written is not None and written != asked else None
