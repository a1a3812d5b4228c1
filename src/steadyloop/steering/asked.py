"""What a request asks of the tool results an answer is held to; sans I/O.

``grounding.py`` holds an answer to every entry of a listing unless the request asks for something else: a
count (a number answers it), a pick among the entries (the ones picked answer it), or what the listing only
helps answer (how to do something, yes or no, where, why, when). Each is read here from the request's own
words, in English and in the languages the bundled model is most often asked in after it (Spanish, French,
German, Portuguese, Italian). Asked "Was ist in diesem Ordner?", the English reader took "Was" for "was"
(a yes-or-no question) and held the answer to nothing, and 4 of 10 answers left entries out; asked
"¿Cuántos archivos hay en la carpeta docs?" it read no count, and the answer was held to the whole listing
and came back as the listing, with no number.
"""

from __future__ import annotations

import re

__all__ = [
    "COUNT_ASKED",
    "LINES_ASKED",
    "NOT_CONTENTS_ASKED",
    "PART_ASKED",
    "PICK_ASKED",
    "REFERS_BACK",
    "in_latin_letters",
]

# A request for a count is answered by a number, not by the names: held to the listing, a count asked for
# was sent back for leaving the names out and came back with them and no count. "Nombre de" is left out:
# in Spanish it is a name ("el nombre del archivo").
COUNT_ASKED = re.compile(
    r"\bhow many\b|\bnumber of\b|\bcount\b"
    r"|\bcu[aá]nt[oa]s\b|\bn[uú]mero de\b|\bcantidad de\b"  # Spanish
    r"|\bcombien\b"  # French
    r"|\bwie ?viele\b|\banzahl\b"  # German
    r"|\bquant[oa]s\b|\bn[uú]mero de\b"  # Portuguese
    r"|\bquant[ie]\b|\bnumero di\b",  # Italian
    re.IGNORECASE,
)
# A count of a part picked by a condition the check cannot weigh ("How many files have more than 100
# lines?", "how many lines start with #"): held to the whole, a right answer would be sent back.
PART_ASKED = re.compile(
    r"\b(?:how many|number of)\s+(?:(?!(?:do|does|did|is|are|was|were|in|of|on|at|for)\b)[\w.-]+\s+){1,3}?"
    r"(?:that|which|whose|with|without|ha(?:ve|s)|"
    r"contain\w*|start\w*|begin\w*|end\w*|match\w*|mention\w*|named|called|"
    r"(?:are|is)\s+(?:over|under|above|below|at|more|less|fewer|larger|bigger|smaller|longer|shorter|"
    r"older|newer)|over|under|above|below|larger|bigger|smaller|longer|shorter|more|less|fewer)\b",
    re.IGNORECASE,
)
# A count of lines ("How many lines does poem.txt have?", "the number of non-empty lines"), held to the
# result's lines; not a count of other things that speaks of lines ("How many files have 100 lines?").
LINES_ASKED = re.compile(
    r"\b(?:how many|number of|count(?: the| all)?)\s+(?:[\w-]+\s+){0,2}?lines\b", re.IGNORECASE
)
# German's "what is" and "what are", which the English "was" would read as a yes-or-no question.
_GERMAN_WHAT = r"was(?=\s+(?:ist|sind|enth[aä]lt|gibt|liegt|liegen|befindet|steht|stehen)\b)"
# A request a listing helps answer but does not answer: how to do something, yes or no ("Is there a
# Dockerfile?", "Does docs hold any images?"), where, why or when. Held to naming every entry, "How do I run
# the tests of this project?" came out as the 47 entries of tests/.
NOT_CONTENTS_ASKED = re.compile(
    r"\W*(?:(?:can|could|would|will) you (?:please )?(?:tell|show|explain to) me )?"
    rf"(?!{_GERMAN_WHAT})"
    r"(?:how|why|where|when|is|are|does|do|did|has|have|was|were"
    r"|c[oó]mo|por ?qu[eé]|d[oó]nde|cu[aá]ndo"  # Spanish, and Portuguese's "como", "por que"
    r"|comment|pourquoi|o[uù]|quand|est-ce que"  # French
    r"|wie|warum|wieso|wo|wann|ist|sind|gibt es"  # German
    r"|onde|quando"  # Portuguese
    r"|come|perch[eé]|dove)\b",  # Italian
    re.IGNORECASE,
)
# A request that picks among entries ("Which of them is the largest?", "the newest file") is answered by the
# ones it picks: held to the whole listing, "Which of them is the largest?" came back as every entry. In the
# other languages, only the superlatives: their "which" ("quel", "cuál", "welche") asks for contents as often
# ("Quels fichiers sont dans docs ?").
PICK_ASKED = re.compile(
    r"\b(?:largest|biggest|smallest|newest|oldest|longest|shortest|latest|earliest|heaviest|lightest)\b"
    r"|\b(?:most|least) recent\b|\bwhich (?:one|of)\b|\bwhich (?:\w+ ){1,2}(?:is|was|has|holds)\b"
    r"|\bthe (?:most|fewest|least)\b"
    r"|\bm[aá]s (?:grande|pequeñ[oa]|larg[oa]|cort[oa]|reciente|nuev[oa]|antigu[oa]|l[ií]neas|archivos)\b"
    r"|\b(?:el|la) (?:mayor|menor)\b|\bmenos (?:l[ií]neas|archivos)\b"  # Spanish
    r"|\b(?:le|la|les) (?:plus|moins)\b|\b(?:plus|moins) de (?:lignes|fichiers)\b"  # French
    r"|\b(?:gr[öo](?:ß|ss)te|kleinste|l[äa]ngste|k[üu]rzeste|neueste|[äa]lteste|meisten|wenigsten)\w*"
    r"|\b(?:o|a|os|as) (?:maior|menor)(?:es)?\b|\b(?:mais|menos) (?:linhas|arquivos)\b"  # Portuguese
    r"|\b(?:il|la|i|le) (?:pi[uù]|meno)\b|\b(?:pi[uù]|meno) (?:righe|file)\b"  # Italian
    r"|\bpi[uù] (?:grande|piccol[oa]|lung[oa]|cort[oa]|recente)\b",
    re.IGNORECASE,
)
# A count question about what an earlier request's tool returned: "How many files are in that list?",
# "how many of them are folders?". Not "are there" ("How many planets are there?" after a listing asks
# nothing of it), nor a bare "that" ("files that start with d" counts a part).
REFERS_BACK = re.compile(
    r"\b(?:that|the|this|those|these)\s+(?:list|listing|folder|directory|results?|output)\b"
    r"|\b(?:of|in)\s+(?:them|those|these|it)\b|\blisted\b",
    re.IGNORECASE,
)


def in_latin_letters(request: str) -> bool:
    """Whether most of the request's letters are Latin: a request in another script ("使用摄氏度", use
    Celsius) speaks of values it shares no word with."""
    letters = [c for c in request if c.isalpha()]
    return sum(c.isascii() or "\u00c0" <= c <= "\u024f" for c in letters) * 2 >= len(letters)
