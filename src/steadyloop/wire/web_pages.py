"""Telling a web page from an API's answer, and what the page says, without I/O.

A proxy, a login wall or a site at a wrong base URL answers with an HTML page where an API answers with
JSON. Quoted as it came, the page's first line is ``<!DOCTYPE html>``, which says nothing; its title or
first heading ("502 Bad Gateway", "404 Not Found", "Sign in") says what happened.
"""

from __future__ import annotations

import html
import re

__all__ = ["is_web_page", "page_words", "web_page_words"]

#: The most of a page read: the title and first heading come first.
_MAX_PAGE = 8_000
_WORDS_CHARS = 200
_MARKERS = ("<!doctype html", "<html", "<head", "<body", "<title", "<h1")
_HIDDEN = re.compile(r"<(script|style|noscript)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HEADING = re.compile(r"<h1\b[^>]*>(.*?)</h1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def is_web_page(text: str) -> bool:
    """Whether ``text`` is an HTML page rather than an API's answer (JSON, an event stream, words)."""
    start = text[:1024].lstrip("\ufeff \t\r\n")
    if not start.startswith("<"):
        return False
    head = start.lower()
    return any(marker in head for marker in _MARKERS)


def page_words(text: str) -> str:
    """What an HTML page says in a few words: its title, else its first heading, else its visible text,
    entities decoded and spaces collapsed, at most 200 characters (``""`` for a page with no words)."""
    page = _COMMENT.sub(" ", _HIDDEN.sub(" ", text[:_MAX_PAGE]))
    for pattern in (_TITLE, _HEADING):
        found = pattern.search(page)
        if found is not None:
            words = _plain(found.group(1))
            if words:
                return words
    return _plain(page)


def _plain(fragment: str) -> str:
    words = _SPACE.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()
    return words if len(words) <= _WORDS_CHARS else words[: _WORDS_CHARS - 1] + "…"


def web_page_words(status: int | None, says: str) -> str:
    """What an error that came as an HTML page says: the status, that the URL served a web page where an
    API should answer, what the page says, and where to look."""
    answered = f"HTTP {status}: " if status is not None else ""
    quoted = f' ("{says}")' if says else ""
    return (
        f"{answered}the URL served a web page, not an API{quoted}: check the base URL (an "
        "OpenAI-compatible one usually ends in /v1), or a proxy in the way"
    )
