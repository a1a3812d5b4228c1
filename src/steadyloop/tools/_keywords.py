"""Choosing tools from a catalogue by the words of a request (internal; public through ``tools.loading``).

Tools are ranked by BM25 over their name, label and one-line description. Plain word overlap would not do:
a catalogue is full of words every tool uses ("list", "get", "file"), and counting them hands the top of
the ranking to whichever tool has the longest description. BM25's inverse document frequency weighs a word
by how few tools use it, and its length normalisation stops long descriptions from winning by bulk.

English function words are dropped outright rather than left to the IDF: twenty one-line descriptions are
few enough that "for" appears in just one of them, and would then score as the most distinctive word in the
request.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loading import CatalogEntry

__all__ = ["KeywordSelection", "preselect_by_keywords", "terms"]

# BM25's usual constants: term frequency saturates quickly, and length counts for three quarters.
_K1 = 1.2
_B = 0.75

_FUNCTION_WORDS = """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each either else etc ever every few for
    from further had has have having he her here hers herself him himself his how i if in into is it its
    itself just let lets me might mine more most must my myself neither no nor not now of off on once only
    or other our ours ourselves out over own per please same shall she should so some such than that the
    their theirs them themselves then there these they this those though through thus to too under until
    up upon us very via was we were what whatever when where whether which while who whom whose why will
    with within without would yet you your yours yourself yourselves
"""
_STOP_WORDS = frozenset(_FUNCTION_WORDS.split())

_CHUNK = re.compile(r"[^\W_]+")
# Splits camelCase and PascalCase, keeping acronyms whole: "getHTTPResponse" -> get, HTTP, Response.
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _stem(word: str) -> str:
    """A plural folded to its singular, roughly: enough that "files" finds "file" and "branches" "branch"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The index terms of a text: words split at ``_``, ``-`` and case changes, lower-cased and folded to
    the singular, function words and single letters dropped."""
    words: list[str] = []
    for chunk in _CHUNK.findall(text):
        pieces = _CAMEL.findall(chunk) if chunk.isascii() else [chunk]
        for piece in pieces or [chunk]:
            word = piece.lower()
            if len(word) > 1 and word not in _STOP_WORDS:
                words.append(_stem(word))
    return words


@dataclass(frozen=True)
class KeywordSelection:
    """What the words of a request chose.

    Attributes:
        names: the tools kept, best first.
        confident: whether to act on ``names`` without asking a model.
        scores: the BM25 score of every tool that matched anything.
    """

    names: list[str]
    confident: bool
    scores: Mapping[str, float] = field(default_factory=dict)


def preselect_by_keywords(
    catalog: Sequence[CatalogEntry],
    request: str,
    *,
    limit: int = 5,
    min_score: float = 0.4,
    dropoff: float = 0.5,
    distinctive: float = 0.15,
) -> KeywordSelection:
    """Rank the catalogue against a request with BM25 and keep the tools that stand out.

    At most ``limit`` tools are kept, none scoring below ``min_score`` times the best. The selection is
    confident only when both hold: the best tool matched a distinctive word (one used by at most
    ``distinctive`` of the catalogue, so its IDF is well above a shared word's), and the best tool left out
    scores below ``dropoff`` times the weakest one kept, so the line was not drawn arbitrarily between
    near-equals. Matching nothing is not confident: the words cannot tell a request that needs no tools
    from one whose words the catalogue does not use.

    Args:
        catalog: the tools to choose from.
        request: what the user asked.
        limit: the most tools to keep.
        min_score: the least score a kept tool may have, as a share of the best score.
        dropoff: how far below the weakest kept tool the best excluded one must score.
        distinctive: the largest share of the catalogue a word may appear in and still count as
            distinctive.
    """
    query = list(dict.fromkeys(terms(request)))
    # The name says most about a tool, so its words count twice.
    documents = [
        [*terms(entry.name), *terms(entry.name), *terms(entry.label or ""), *terms(entry.description)]
        for entry in catalog
    ]
    count = len(documents)
    if not query or not count:
        return KeywordSelection([], False)
    frequencies = [Counter(document) for document in documents]
    average = sum(len(document) for document in documents) / count or 1.0
    document_frequency = Counter(term for frequency in frequencies for term in frequency)
    idf = {term: math.log(1 + (count - df + 0.5) / (df + 0.5)) for term, df in document_frequency.items()}
    distinct_df = max(1.0, distinctive * count)

    scored: list[tuple[float, int, set[str]]] = []
    for index, (frequency, document) in enumerate(zip(frequencies, documents, strict=True)):
        norm = _K1 * (1 - _B + _B * len(document) / average)
        matched = {term for term in query if frequency[term]}
        score = sum(idf[term] * frequency[term] * (_K1 + 1) / (frequency[term] + norm) for term in matched)
        if score > 0:
            scored.append((score, index, matched))
    if not scored:
        return KeywordSelection([], False)
    # Ties keep catalogue order, so the same request always gives the same answer.
    scored.sort(key=lambda item: (-item[0], item[1]))
    best = scored[0][0]
    kept = [item for item in scored[:limit] if item[0] >= min_score * best]
    left_out = scored[len(kept)] if len(kept) < len(scored) else None
    scores = {catalog[index].name: round(score, 4) for score, index, _ in scored}

    top_terms = scored[0][2]
    sharp = any(document_frequency[term] <= distinct_df for term in top_terms)
    clear = left_out is None or left_out[0] < dropoff * kept[-1][0]
    names = [catalog[index].name for _, index, _ in kept]
    return KeywordSelection(names, sharp and clear, scores)
