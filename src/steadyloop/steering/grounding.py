"""Whether an answer written from tool results says what they said: every entry of a listing, the count a
count question asked for, and no path that none of them named.

A small model that read a listing often answers with most of it, with a count and no names, or with every
entry and a folder that does not exist (``docs/steering.md`` has the measurements). The answer to a
routed step after tool results is checked here before it is shown (``routing.py``): the entries a listing
result holds that the answer leaves out, and the path-like words of the answer (``tests/cli/``,
``setup.py``) that no tool result and not the request itself holds. A gap is sent back once, as a short
correction, and the answer asked again; one still short of a listing after that gives way to the listing
itself.

A count asked for ("how many ...") is held to the one result it was read from, when that result says how
many things it holds: a whole listing (no note with a number, as one saying it was cut short) or a JSON
array, of any tool. The answer's numbers must include one of its counts (every entry; or only the files,
or only the folders, of a listing that marks folders with a trailing slash); an answer that states other
numbers is sent back. An answer with no number at all is let pass: "only README.md" answers "how many"
too. A count of lines ("How many lines does poem.txt have?") is held to the one result's lines, any
result of any tool (all of them, those not blank, or a number the result states itself), and there an
answer must state one: "There are 10 lines" for 5, or the lines restated with no count, is sent back.

A listing's entries (what a listing is, and what it counts: ``result_counts.py``) are checked only when
every result of the request is a listing, so an answer that read a file after listing a folder is not
held to the listing, and only when the request neither counts nor picks among them ("Which of them is the
largest?", "the newest file" is answered by the ones it picks). A pick of the largest, smallest, longest
or shortest file is held to the one whole listing's sizes or lines; a count the answer states unasked
("There are 11 files and folders") to the one whole listing's counts. None of that is held when the
request writes out a path none of the calls was made on: the results are of another place.

All of it is sans I/O: :func:`answer_gaps` reads, :func:`correction` writes the message.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .asked import COUNT_ASKED, LINES_ASKED, NOT_CONTENTS_ASKED, PART_ASKED, PICK_ASKED, REFERS_BACK
from .chat import chat_text
from .file_asked import unnamed_files
from .folder_said import FolderCountsSaid
from .languages import wrong_language
from .picks import names_entry, wrong_pick
from .result_counts import (
    FILE_KINDS,
    FOLDER_WORD,
    NUMBER_WORDS,
    QUOTES,
    asked_kind,
    counts_held,
    folder_counts,
    folder_holds,
    line_counts,
    listed_entries,
    listing_counts,
    stated_numbers,
    whole_listing,
)

__all__ = [
    "AnswerGaps",
    "all_failed",
    "answer_gaps",
    "calls_written",
    "correction",
    "counted_earlier",
    "elsewhere",
    "path_words",
    "tools_spoken_of",
    "without_tool_talk",
]

# A path-like word: one or more "name/" parts (with a name after the last or not), or a name ending in a
# file extension (a dot, then a letter and up to seven letters or digits).
_PATH_WORD = re.compile(
    r"(?<![\w./@:-])(?:[\w.-]+/)+[\w.-]*|(?<![\w./@:-])[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/@])"
)
_NOT_PATHS = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
_SHOWN_IN_CORRECTION = 12  # entries named in a correction, at most
# A listing of more entries than this is not held to an answer naming each (the command's listing shows at
# most 500): no answer names them all, and looking for each in the answer would grow with both.
_MOST_HELD = 500
# A tool's failure as the loop writes it for the model (``tools/_call.py``): its exception's name first.
_FAILED = re.compile(r"[A-Z]\w*(?:Error|Exception)\b")
# An answer that opens by handing on the tool's output: "The tool returned: # Deploying ...". Asked what
# port docs/deploy.md mentions, the 1.5B model answered so in 4 runs of 4, and sent back saying so, again.
_TOOL_TALK = re.compile(
    r"[ \t]*the tool(?:'s (?:result|output)| (?:call )?(?:returned|gave|output|produced))[ \t]*:[ \t]*\n?",
    re.IGNORECASE,
)
# An answer that opens by saying what the tool did, in a sentence of its own ("The tool returned 3
# entries: ..."); followed by a colon, it hands on the output (``_TOOL_TALK``), and only that is dropped.
_TOOL_SPOKEN = re.compile(
    r"\W*the tool(?:'s (?:result|output)| (?:call )?(?:returned|gave|output|produced))\b", re.IGNORECASE
)
# A tool's name that is no word: snake_case, dotted, or camelCase.
_CODE_NAME = re.compile(r"\w+[_.]\w+(?:[_.]\w+)*|[a-z]+[A-Z]\w*")
# A call written out as JSON, OpenAI's or the decision's shape: {"name": "read_file", "arguments": ...}.
_CALL_WRITTEN = re.compile(r'\{\s*"name"\s*:\s*"([\w.-]{1,64})"\s*,\s*"(?:arguments|parameters)"\s*:')
# A figure an answer gives: a number or a version ("8043", "3.8", "2.1.0").
_FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?![\w])")
# A count an answer states of a listing's entries: "11 files and folders", "9 entries", "3 Python files",
# "two .md files"; not "2 other files" or "the 2 largest files", which count a part: a word between the
# number and "files" must name a kind (``FILE_KINDS``, or an extension the listing holds).
_COUNT_STATED = re.compile(
    r"(?<![\w.,])(?:(\d{1,3}(?:,\d{3})+|\d+)|(" + "|".join(NUMBER_WORDS) + r"))\s+"
    r"(?:([A-Za-z]+|\.[a-z0-9]{1,8})\s+(?=files?\b))?"
    r"(?:files?|folders?|subfolders?|director(?:y|ies)|entries|entry|items?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class AnswerGaps:
    """What an answer misses of its tool results.

    Attributes:
        missing: entries of the listing results the answer does not name.
        invented: path-like words of the answer that no tool result (and not the request) holds; and,
            where every tool failed, the numbers and versions it gives that none holds.
        count: what the result a count was asked of holds ("7 entries: 5 files and 2 folders"), when the
            answer's numbers include none of its counts.
        pick: the file a listing's sizes or lines pick ("core.py, with 3,104 lines"), or the folder its
            counts pick ("server/, with 45 files"), when the request asked for the largest, smallest,
            longest or shortest, or the folder with the most or fewest files, and the answer names another
            (``picks.py``).
        stated: what a listing holds ("9 entries: 7 files and 2 folders"), when no count was asked and
            the answer states one of its entries that it does not hold ("There are 11 files and folders").
        tools: the declared tools the answer speaks of to the user, who cannot use them: those whose
            calls it writes out as JSON (``{"name": "read_file", "arguments": ...}``, a step it wanted),
            and those it names where no result and not the request does ("use the list_dir function").
        unnamed: the files a search found, when the request asked for a file and the answer names none
            (``file_asked.py``).
        language: the language the request is written in, when the answer is written in another
            (``languages.py``).
    """

    missing: tuple[str, ...] = ()
    invented: tuple[str, ...] = ()
    count: str | None = None
    pick: str | None = None
    stated: str | None = None
    tools: tuple[str, ...] = ()
    unnamed: tuple[str, ...] = ()
    language: str | None = None

    def __bool__(self) -> bool:
        return self.size > 0

    @property
    def size(self) -> int:
        """How many gaps: an answer with fewer is the better of two."""
        singles = (self.count, self.pick, self.stated, self.language)
        listed = len(self.missing) + len(self.invented) + len(self.tools) + bool(self.unnamed)
        return listed + sum(gap is not None for gap in singles)


def count_gaps(answer: str, result: str, request: str) -> AnswerGaps:
    """What ``answer`` misses of the one earlier ``result`` a count ``request`` refers back to: only the
    count (see :func:`counted_earlier`)."""
    return AnswerGaps(count=_wrong_count(answer, [result], request) if answer.strip() else None)


def counted_earlier(messages: Sequence[Any]) -> tuple[str, str] | None:
    """The request and the one tool result it counts, for a count question that refers back to what an
    earlier request's tool returned ("List the files in docs." then "How many files are in that list?");
    ``None`` when the last request is no such question, a tool ran for it already, or the request before
    it got other than one result that says how many things it holds.

    The model answers such a question from the conversation, and a small one miscounts there as it does
    after a fresh listing ("There are 8 files in the list." for 7).
    """
    users = [i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"]
    if len(users) < 2:
        return None
    request = chat_text(messages[users[-1]].get("content"))
    after = [m for m in messages[users[-1] + 1 :] if isinstance(m, Mapping)]
    if any(m.get("role") == "tool" for m in after) or not COUNT_ASKED.search(request):
        return None
    if not REFERS_BACK.search(request):
        return None
    before = messages[users[-2] + 1 : users[-1]]
    results = [
        chat_text(m.get("content")) for m in before if isinstance(m, Mapping) and m.get("role") == "tool"
    ]
    if len(results) != 1 or counts_held(results[0]) is None:
        return None
    return request, results[0]


def _wrong_count(answer: str, results: Sequence[str], request: str) -> str | None:
    if len(results) != 1 or not COUNT_ASKED.search(request) or PART_ASKED.search(request):
        return None
    if LINES_ASKED.search(request):
        # Asked how many lines one result holds, the 1.5B model said "10 lines" for a poem of 5, and
        # restated the lines of another with no count: an answer that states no number says none.
        counts, said = line_counts(results[0])
        return None if stated_numbers(answer) & counts else said
    held = counts_held(results[0], request, files_only=not FOLDER_WORD.search(answer))
    if held is None:
        return None
    counts, said = held
    stated = stated_numbers(answer)
    if stated & _named_folders_counts(results[0], request):
        # Asked how many files tests/cli holds, a model that listed tests/ reads it off cli/'s entry.
        return None
    return said if stated and not stated & counts else None


def _named_folders_counts(listing: str, request: str) -> set[int]:
    """What each listed folder the request names holds directly, of the kind it asks for (files, folders,
    or either and both): a listing says so of each (``- cli/ (folder: 22 files)``). A count of one kind
    of file ("How many Python files") is no folder's: its files are of every kind."""
    kind = asked_kind(request)
    if kind not in (None, "files", "folders"):
        return set()
    found: set[int] = set()
    for name, held in folder_counts(listing).items():
        if names_entry(request, name):
            found |= {folder_holds(held, k) for k in ((kind,) if kind else ("files", "folders", "entries"))}
    return found


def path_words(text: str) -> list[str]:
    """The path-like words of ``text``, in order, without quotes, a leading ``./`` or a sentence's full stop."""
    found: list[str] = []
    for match in _PATH_WORD.finditer(text):
        word = match.group(0).strip(QUOTES).removeprefix("./").rstrip(".,;:")
        if word.rstrip("/") and word.rstrip("/").lower() not in _NOT_PATHS and "://" not in word:
            found.append(word)
    return found


def _grounded(word: str, sources: Sequence[str]) -> bool:
    """Whether ``word`` is in one of ``sources`` (lower-cased, as the caller gives them)."""
    bare = word.rstrip("/").lower()
    if any(bare in source for source in sources):
        return True
    # "src/steadyloop/" after a listing that showed "src/" and one of "src" that showed "steadyloop/":
    # each part was named by some result.
    parts = [p for p in bare.split("/") if p]
    return len(parts) > 1 and all(any(p in source for source in sources) for p in parts)


def answer_gaps(
    answer: str,
    results: Sequence[str],
    request: str = "",
    called: Collection[str] | None = None,
    tools: Collection[str] = (),
    languages: bool = True,
) -> AnswerGaps:
    """What ``answer`` misses of the tool ``results`` it was written from (``request``: what the user asked,
    whose own words are no invention; ``tools``: the names of the tools declared, whose calls written out
    as JSON are no answer; ``languages``: whether an answer in another language than the request's is a
    gap, which it is not where the host's system prompt names a language).

    ``called``: the string arguments of the calls the results came from. When given, and the request writes
    out a path (``src/steadyloop/cli``) none of them is, the results are of some other place: the answer is
    held to no listing, count or pick of theirs, only to naming nothing no result holds.

    Returns:
        The gaps; empty (false) when there are none, or no results to hold the answer to.
    """
    if not results or not answer.strip():
        return AnswerGaps()
    # What a tool was called on is no invention either: asked which file defines a function, the 1.5B
    # model read src/click/decorators.py and named it, and the read's text does not hold its own path.
    sources = [s.lower() for s in (*results, request, *(called or ()))]
    invented = list(dict.fromkeys(w for w in path_words(answer) if not _grounded(w, sources)))
    if all_failed(results):
        # Every tool failed: a number or version the answer gives came from nowhere. Told requirements.txt
        # was not there, the 1.5B model answered "The project requires Python 3.8 or higher."
        invented += [n for n in dict.fromkeys(_FIGURE.findall(answer)) if not any(n in s for s in sources)]
    spoken = tools_spoken_of(answer, tools, sources)
    if called is not None and elsewhere(request, called):
        # Asked how many Python files src/steadyloop/cli holds, the 1.5B model listed src/steadyloop, and
        # held to that listing, its answer was "corrected" to the wrong folder's count.
        language = wrong_language(request, answer) if languages else None
        return AnswerGaps(invented=tuple(invented), tools=spoken, language=language)
    listings = [listed_entries(r) for r in results]
    missing: list[str] = []
    whole = not (
        COUNT_ASKED.search(request) or PICK_ASKED.search(request) or NOT_CONTENTS_ASKED.match(request)
    )
    if whole and all(entries is not None and len(entries) <= _MOST_HELD for entries in listings):
        for entries in listings:
            missing += [e for e in entries or () if not names_entry(answer, e) and e not in missing]
    return AnswerGaps(
        tuple(missing),
        tuple(invented),
        _wrong_count(answer, results, request),
        wrong_pick(answer, results, request),
        _wrong_count_stated(answer, results, request),
        spoken,
        unnamed_files(answer, results, request, list(called or ())),
        wrong_language(request, answer) if languages else None,
    )


def tools_spoken_of(answer: str, tools: Collection[str], sources: Sequence[str]) -> tuple[str, ...]:
    """The ``tools`` ``answer`` speaks of to the user: those it writes a call of (:func:`calls_written`);
    ``"the tool"`` when it opens with what the tool did in a sentence ("The tool returned 3 entries:
    ..."); and those it names as a word where none of ``sources`` (the results and the request,
    lower-cased) does, if it is no word (``list_dir``, not ``add``). Asked how to run a project's tests,
    the 1.5B model listed tests/ and answered "you can use the list_dir function with the path tests"."""
    spoken = list(calls_written(answer, tools))
    if _TOOL_SPOKEN.match(answer) and not _TOOL_TALK.match(answer):
        # "The tool returned 3 entries: atlas, docs and setup.cfg." for a folder of two folders and a
        # file: sent back, the listing came out, its folders marked (bench/main_job.py, 8 of 8).
        spoken.append("the tool")
    low = answer.lower()
    for name in tools:
        # Only a name no sentence uses as a word ("list_dir", "getWeather"): a tool named "add" or
        # "search" is spoken of in any answer.
        if name in spoken or not _CODE_NAME.fullmatch(name) or name.lower() not in low:
            continue
        named = re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", answer, re.IGNORECASE)
        if named is not None and not any(name.lower() in source for source in sources):
            spoken.append(name)
    return tuple(spoken)


def without_tool_talk(answer: str) -> str:
    """``answer`` without an opening that hands on the tool's output ("The tool returned: "), when text
    follows it: the user asked for what the tool returned, not who returned it."""
    opening = _TOOL_TALK.match(answer)
    rest = answer[opening.end() :] if opening is not None else ""
    return rest if rest.strip() else answer


def calls_written(answer: str, tools: Collection[str]) -> tuple[str, ...]:
    """The ``tools`` whose calls ``answer`` writes out as JSON (``{"name": "read_file", "arguments":``), in
    order. Asked to show what the docs folder holds, the 1.5B model read one file and answered 'The file
    "deploy.md" contains the following text:' and a fenced call reading the other, in 4 runs of 4."""
    found: list[str] = []
    for match in _CALL_WRITTEN.finditer(answer):
        name = match.group(1)
        if name in tools and name not in found:
            found.append(name)
    return tuple(found)


def _wrong_count_stated(answer: str, results: Sequence[str], request: str) -> str | None:
    """What the one whole listing among ``results`` holds, when no count was asked and ``answer`` states a
    count of its entries ("11 files and folders", "3 Python files") that none of its counts is. Asked what
    was in a folder of 9 entries, the 1.5B model opened with "There are 11 files and folders"."""
    if len(results) != 1 or COUNT_ASKED.search(request):
        return None
    entries = whole_listing(results[0])
    if entries is None:
        return None
    extensions = {e.rsplit(".", 1)[1].lower() for e in entries if "." in e.strip(".") and e[-1] != "/"}
    # What a listed folder holds, said of it ("atlas/ holds 3 files"), is no count of the listing.
    folders = FolderCountsSaid(answer, results[0])
    for match in _COUNT_STATED.finditer(answer):
        digits, word, kind = match.groups()
        if kind is not None and kind.lower() not in FILE_KINDS and kind.lower().lstrip(".") not in extensions:
            continue
        number = int(digits.replace(",", "")) if digits else NUMBER_WORDS[word.lower()]
        counts = listing_counts(entries, match.group(0))[0]
        if number not in counts and not folders.said_of_folder(answer, match.start(), match.end(), number):
            return listing_counts(entries, "")[1]
    return None


def elsewhere(request: str, called: Collection[str]) -> bool:
    """Whether ``request`` writes out a nested path (``src/steadyloop/cli``, ``docs/faq.md``) and none of
    the ``called`` arguments is one of them (a leading ``./`` and a trailing slash aside)."""
    asked = {_bare_path(w) for w in path_words(request) if "/" in w.strip("/")}
    return bool(asked) and asked.isdisjoint(_bare_path(c) for c in called)


def _bare_path(path: str) -> str:
    return path.strip().removeprefix("./").rstrip("/").lower()


def all_failed(results: Sequence[str]) -> bool:
    """Whether every one of ``results`` (at least one) is a tool's failure, as the loop writes it for the
    model: the exception's name first (``FileNotFoundError: ...``)."""
    return bool(results) and all(_FAILED.match(r.lstrip()) for r in results)


def _some(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN_IN_CORRECTION])
    return shown + (
        f" and {len(names) - _SHOWN_IN_CORRECTION} more" if len(names) > _SHOWN_IN_CORRECTION else ""
    )


def correction(gaps: AnswerGaps) -> str:
    """The message that sends an answer with ``gaps`` back: what it missed, and what to do."""
    said: list[str] = []
    if gaps.missing:
        said.append(f"Your answer leaves out entries the tool returned: {_some(gaps.missing)}.")
    if gaps.invented:
        said.append(f"Your answer names {_some(gaps.invented)}, which no tool returned.")
    if gaps.count:
        said.append(f"Your count is wrong: the tool returned {gaps.count}.")
    # A folder's pick ("server/, with 45 files") is named as one.
    picked = "folders" if gaps.pick and gaps.pick.partition(",")[0].endswith("/") else "files"
    if gaps.pick:
        said.append(f"Your pick is wrong: of the {picked} the tool returned, it is {gaps.pick}.")
    if gaps.stated:
        said.append(f"Your count is wrong: the tool returned {gaps.stated}.")
    if gaps.tools:
        said.append(
            f"Your answer speaks to the user of {_some(gaps.tools)}, which only you can use: the user "
            "wants what the tools returned, not how they work."
        )
    if gaps.unnamed:
        said.append(
            f"Your answer does not name the file the user asked for; the tools found {_some(gaps.unnamed)}."
        )
    # "and nothing else" costs a count asked for, and without it a small model left the same entry out
    # again (docs/steering.md); a listing named in full wins over a count.
    wanted = (
        "name every entry the tool returned"
        if gaps.missing or (gaps.stated and not gaps.invented)
        else "give the count the tool returned"
        if gaps.count and not gaps.invented
        else f"name that {picked[:-1]}"
        if gaps.pick and not gaps.invented
        else "say in words what the tools returned"
        if gaps.tools and not gaps.invented
        else "name the file"
        if gaps.unnamed and not gaps.invented
        else "name only what the tools returned"
    )
    if gaps.language:
        said.append(f"Your answer is not in {gaps.language}, the language the user wrote in.")
    if gaps.language and not said[:-1]:
        # The language is all it missed. Told to answer again from the results in Spanish, the 1.5B model
        # translated the whole README it had read; told to write its answer in Spanish, it did that.
        again = f"Write your answer above in {gaps.language}, and nothing else."
    else:
        again = f"Answer the question again from the tool results: {wanted}, and nothing else."
        if gaps.language:
            again = f"{again} Write it in {gaps.language}."
    return " ".join([*said, again])
