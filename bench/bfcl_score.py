"""BFCL's scoring as ``bench/bfcl.py`` applies it, without bfcl-eval: the entries, the seeded sample, decoding
a reply's calls, the verdict around the package's checker (behind ``Checker``), the tallies and the report.

Nothing here talks to a server or imports bfcl-eval, so the normal test suite checks it.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

TUNING = ("simple_python", "multiple", "parallel", "irrelevance")
HELD_OUT = ("live_simple", "live_multiple", "live_irrelevance")
CATEGORIES = TUNING + HELD_OUT
IRRELEVANCE = frozenset({"irrelevance", "live_irrelevance"})

#: Qwen2.5-1.5B-Instruct in function-calling mode, full precision (BFCL paper, Table 1, and the leaderboard).
PUBLISHED: dict[str, float] = {
    "simple_python": 92,
    "multiple": 87,
    "parallel": 81.5,
    "irrelevance": 63,
    "live_simple": 74,
    "live_multiple": 66,
}

MODES: dict[str, str] = {
    "raw": "raw openai client",
    "default": "steadyloop, default",
    "routed": "steadyloop, tool_routing + gate",
}

#: The name this run has in the checker's model registry; no "_" in it, which the checker reads as "/".

# -- entries and the sample -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One BFCL question.

    Attributes:
        messages: the first turn, as BFCL sends it.
        functions: the function docs as BFCL's checker reads them (no language hint).
        tools: the OpenAI tools as BFCL's function-calling handlers send them.
        answer: the possible answers; ``None`` on an irrelevance entry.
    """

    id: str
    category: str
    messages: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    answer: tuple[dict[str, Any], ...] | None

    @property
    def question(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return str(users[-1].get("content", "")) if users else ""


def sample(entries: Sequence[Entry], n: int, seed: int) -> list[Entry]:
    """``n`` entries of one category, drawn with a generator seeded by ``seed`` and the category, in file order.

    Each category draws on its own, so asking for more categories or fewer leaves every other's draw as it was.
    """
    if not entries:
        return []
    chosen = random.Random(f"{seed}/{entries[0].category}").sample(range(len(entries)), min(n, len(entries)))
    return [entries[i] for i in sorted(chosen)]


def decode(calls: Sequence[tuple[str, Any]]) -> tuple[list[dict[str, Any]] | None, str]:
    """A reply's calls as BFCL's OpenAI-style handler decodes them: ``[{name: arguments}]``.

    ``(None, why)`` when they do not decode: a reply without calls (text, as BFCL's decoder finds it), or
    arguments that are not JSON.
    """
    if not calls:
        return None, "the reply holds no function call"
    out: list[dict[str, Any]] = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError as exc:
                return None, f"the arguments of {name} are not JSON: {exc}"
        out.append({name: arguments})
    return out, ""


# -- the verdict: the package's checker behind a small seam -------------------------------------------------


class Checker(Protocol):
    """What the scoring needs of bfcl-eval."""

    def ast(
        self,
        functions: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        answer: list[dict[str, Any]],
        category: str,
    ) -> Mapping[str, Any]: ...

    def well_formed(self, calls: list[dict[str, Any]]) -> bool: ...

    def is_empty(self, calls: list[dict[str, Any]]) -> bool: ...


@dataclass
class Reply:
    """One way's first step on one entry.

    Attributes:
        calls: the decoded calls, ``None`` when none decoded (see ``decode``).
        text: the reply's text.
        decode_error: why no call decoded.
        error: the request or run failed (then nothing else is known).
        requests: model requests the step made (routing's gate and decision count).
        notices: the names of steadyloop's notices during the step (recovery, latches, ...).
        prompt_tokens: the prompt tokens of the step's requests, as the server counted them.
        cached_tokens: of those, the ones the server read from its prompt cache rather than computed.
        completion_tokens: the tokens the step's requests wrote, as the server counted them.
    """

    calls: list[dict[str, Any]] | None = None
    text: str = ""
    decode_error: str = ""
    error: str = ""
    seconds: float = 0.0
    requests: int = 0
    notices: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Verdict:
    passed: bool
    error_type: str = ""
    error: str = ""


def judge(entry: Entry, reply: Reply, checker: Checker) -> Verdict:
    """BFCL's verdict on a reply (``eval_runner``'s relevance and AST paths); a failed request fails."""
    if reply.error:
        return Verdict(False, "request_failed", reply.error)
    if entry.category in IRRELEVANCE:
        if reply.calls is not None and not checker.is_empty(copy.deepcopy(reply.calls)):
            return Verdict(False, "irrelevance_error:decoder_success", "a function call where none should be")
        return Verdict(True)
    if reply.calls is None:
        return Verdict(False, "ast_decoder:decoder_failed", f"Failed to decode AST: {reply.decode_error}")
    if not checker.well_formed(copy.deepcopy(reply.calls)):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", "not in the function-call format")
    assert entry.answer is not None, f"{entry.id}: an AST category entry without possible answers"
    found = checker.ast(
        copy.deepcopy(list(entry.functions)),
        copy.deepcopy(reply.calls),
        copy.deepcopy(list(entry.answer)),
        entry.category,
    )
    if found.get("valid"):
        return Verdict(True)
    errors = found.get("error", [])
    return Verdict(False, str(found.get("error_type", "")), "; ".join(str(e) for e in errors))


# -- results and the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    entry: Entry
    mode: str
    reply: Reply
    verdict: Verdict

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.entry.id,
            "category": self.entry.category,
            "mode": self.mode,
            "calls": self.reply.calls,
            "text": self.reply.text,
            "pass": self.verdict.passed,
            "error_type": self.verdict.error_type,
            "error": self.verdict.error,
            "seconds": round(self.reply.seconds, 2),
            "requests": self.reply.requests,
            "notices": self.reply.notices,
            "prompt_tokens": self.reply.prompt_tokens,
            "cached_tokens": self.reply.cached_tokens,
            "completion_tokens": self.reply.completion_tokens,
        }


def interleave(entries: Sequence[Entry]) -> list[Entry]:
    """The entries, one of each category in turn: a run stopped early has as many of each as it could."""
    by_category: dict[str, list[Entry]] = {}
    for e in entries:
        by_category.setdefault(e.category, []).append(e)
    rounds = max((len(v) for v in by_category.values()), default=0)
    return [group[i] for i in range(rounds) for group in by_category.values() if i < len(group)]


def restored(entries: Sequence[Entry], document: Mapping[str, Any]) -> dict[tuple[str, str], Result]:
    """The results an earlier ``--out`` holds for these entries, by ``(id, mode)``."""
    by_id = {e.id: e for e in entries}
    out: dict[tuple[str, str], Result] = {}
    for r in document.get("results", []):
        entry = by_id.get(r["id"])
        if entry is None:
            continue
        reply = Reply(
            calls=r["calls"],
            text=r["text"],
            error=r["error"] if r["error_type"] == "request_failed" else "",
            seconds=r["seconds"],
            requests=r["requests"],
            notices=list(r["notices"]),
            prompt_tokens=r.get("prompt_tokens", 0),
            cached_tokens=r.get("cached_tokens", 0),
            completion_tokens=r.get("completion_tokens", 0),
        )
        out[(entry.id, r["mode"])] = Result(
            entry, r["mode"], reply, Verdict(r["pass"], r["error_type"], r["error"])
        )
    return out


def shown(reply: Reply) -> str:
    if reply.error:
        return reply.error
    if reply.calls is not None:
        return json.dumps(reply.calls, ensure_ascii=False)
    return "text: " + " ".join(reply.text.split())


@dataclass(frozen=True)
class Tally:
    passed: int = 0
    n: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.passed + other.passed, self.n + other.n)

    def __str__(self) -> str:
        return f"{100 * self.passed / self.n:.0f}% ({self.passed}/{self.n})" if self.n else "-"


def tally(results: Sequence[Result], keep: Callable[[Result], bool] = lambda _r: True) -> Tally:
    mine = [r for r in results if keep(r)]
    return Tally(sum(r.verdict.passed for r in mine), len(mine))


def _mean_seconds(results: Sequence[Result]) -> float:
    return sum(r.reply.seconds for r in results) / len(results) if results else 0.0


def plain_mode(modes: Sequence[str]) -> str | None:
    """The way the others' time is told against: steadyloop's default where it was asked, else the raw client."""
    return next((m for m in ("default", "raw") if m in modes), None)


def _alike(mine: Sequence[Result], theirs: Mapping[str, Result]) -> tuple[float, float, int]:
    """Seconds of this way and of the plain way over the entries both answered with the same calls: the
    step's own cost, apart from a way writing more (three calls where the other wrote one, or a sentence
    where the other wrote a short call)."""
    pairs = [
        (r.reply.seconds, theirs[r.entry.id].reply.seconds)
        for r in mine
        if r.entry.id in theirs
        and r.reply.calls is not None
        and not r.reply.error
        and r.reply.calls == theirs[r.entry.id].reply.calls
    ]
    return sum(p[0] for p in pairs), sum(p[1] for p in pairs), len(pairs)


def summarise(results: Sequence[Result], modes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per way: accuracy per category and over the groups, seconds per entry (also against the plain way on
    the entries both answered alike), tokens, errors and notices."""
    out: dict[str, dict[str, Any]] = {}
    plain = plain_mode(modes)
    theirs = {r.entry.id: r for r in results if r.mode == plain}
    for mode in modes:
        mine = [r for r in results if r.mode == mode]
        seconds = sum(r.reply.seconds for r in mine)
        out[mode] = {
            "categories": {c: tally([r for r in mine if r.entry.category == c]) for c in CATEGORIES},
            "needs a tool": tally(mine, lambda r: r.entry.category not in IRRELEVANCE),
            "irrelevance": tally(mine, lambda r: r.entry.category in IRRELEVANCE),
            "tuning (non-live)": tally(mine, lambda r: r.entry.category in TUNING),
            "held out (live)": tally(mine, lambda r: r.entry.category in HELD_OUT),
            "all": tally(mine),
            "seconds_per_entry": seconds / len(mine) if mine else 0.0,
            "seconds_per_entry_needing_a_tool": _mean_seconds(
                [r for r in mine if r.entry.category not in IRRELEVANCE]
            ),
            "seconds_per_entry_irrelevance": _mean_seconds(
                [r for r in mine if r.entry.category in IRRELEVANCE]
            ),
            "seconds_alike": _alike(mine, theirs) if mode != plain else (0.0, 0.0, 0),
            "requests_per_entry": sum(r.reply.requests for r in mine) / len(mine) if mine else 0.0,
            "computed_prompt_tokens_per_entry": (
                sum(r.reply.prompt_tokens - r.reply.cached_tokens for r in mine) / len(mine) if mine else 0.0
            ),
            "completion_tokens_per_entry": (
                sum(r.reply.completion_tokens for r in mine) / len(mine) if mine else 0.0
            ),
            "request_errors": sum(r.verdict.error_type == "request_failed" for r in mine),
            "notices": dict(Counter(n for r in mine for n in r.reply.notices)),
        }
    return out


def table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary as a markdown table, the published figures beside."""
    modes = list(summary)
    head = "| | published (Qwen2.5-1.5B-Instruct FC) | " + " | ".join(MODES[m] for m in modes) + " |"
    lines = [head, "|---" * (len(modes) + 2) + "|"]

    def row(label: str, published: str, cells: Iterator[str]) -> None:
        lines.append(f"| {label} | {published} | " + " | ".join(cells) + " |")

    for c in CATEGORIES:
        if any(summary[m]["categories"][c].n for m in modes):
            published = f"{PUBLISHED[c]:g}" if c in PUBLISHED else "-"
            row(c, published, (str(summary[m]["categories"][c]) for m in modes))
    for group in ("needs a tool", "irrelevance", "tuning (non-live)", "held out (live)", "all"):
        row(f"**{group}**", "", (f"**{summary[m][group]}**" for m in modes))
    row("seconds per entry", "", (f"{summary[m]['seconds_per_entry']:.1f}" for m in modes))
    row("requests per entry", "", (f"{summary[m]['requests_per_entry']:.1f}" for m in modes))
    row(
        "prompt tokens computed per entry",
        "",
        (f"{summary[m]['computed_prompt_tokens_per_entry']:.0f}" for m in modes),
    )
    row("tokens written per entry", "", (f"{summary[m]['completion_tokens_per_entry']:.0f}" for m in modes))
    base = plain_mode(modes)
    if base is not None:
        name = "default" if base == "default" else "raw"
        for key, label in (
            ("seconds_per_entry", f"time / {MODES[base]}"),
            ("seconds_per_entry_needing_a_tool", f"time / {name}, needing a tool"),
            ("seconds_per_entry_irrelevance", f"time / {name}, irrelevance"),
        ):
            against = summary[base][key]
            if against:
                row(label, "", (f"{summary[m][key] / against:.2f}x" for m in modes))
        row(
            f"time / {name}, same calls written",
            "",
            (_alike_cell(summary[m]["seconds_alike"]) for m in modes),
        )
    row("failed requests", "", (str(summary[m]["request_errors"]) for m in modes))
    return "\n".join(lines)


def _alike_cell(alike: Sequence[float]) -> str:
    mine, theirs, n = alike
    return f"{mine / theirs:.2f}x ({int(n)})" if theirs else "-"


def show_examples(results: Sequence[Result], out: Any = sys.stdout) -> None:
    """For each category and way, one entry that passed and one that failed, with the calls and the verdict."""
    for category in CATEGORIES:
        for mode in dict.fromkeys(r.mode for r in results):
            mine = [r for r in results if r.entry.category == category and r.mode == mode]
            for wanted in (True, False):
                found = next((r for r in mine if r.verdict.passed is wanted), None)
                if found is None:
                    continue
                e = found.entry
                print(f"\n[{'pass' if wanted else 'FAIL'}] {mode} {e.id}: {e.question[:300]!r}", file=out)
                print(f"  functions: {[f['name'] for f in e.functions]}", file=out)
                print(f"  reply: {shown(found.reply)[:400]}", file=out)
                if e.answer is not None:
                    print(f"  possible answer: {json.dumps(e.answer, ensure_ascii=False)[:400]}", file=out)
                if not wanted:
                    print(f"  checker: {found.verdict.error_type}: {found.verdict.error[:300]}", file=out)


def plain(summary: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in summary.items():
        if isinstance(value, Tally):
            out[key] = {"passed": value.passed, "n": value.n}
        elif isinstance(value, dict):
            out[key] = {
                k: {"passed": v.passed, "n": v.n} if isinstance(v, Tally) else v for k, v in value.items()
            }
        else:
            out[key] = value
    return out
