"""The web page in headless Chromium (the system's, driven by Playwright): ask, stream, approve, reload mid-run.

Set ``STEADYLOOP_PAGE_SCREENSHOT=docs/server-page.png`` to write the README's screenshot from this run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk
from steadyloop.tools.definition import tool

from .conftest import LiveServer

CHROMIUM = os.environ.get("STEADYLOOP_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="no system Chromium (scripts/setup installs it from Debian packages)",
)

LONG = " ".join(f"word{i}" for i in range(60))


async def test_ask_stream_approve_a_write_and_reload_mid_run(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)  # a ceiling on waiting for the page, on a machine that may be busy

    written: dict[str, str] = {}

    @tool(effect="mutate-reversible")
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        written[path] = content
        return f"wrote {len(content)} characters to {path}"

    model.enqueue(
        Reply.stream(
            stream_of(
                "The answer is **42**, as *always*.",
                reasoning="Let me think about it.",
                usage=usage_chunk(120, 9, cached=96),
            ),
            delay=0.02,
        ),
        Reply.stream(
            stream_of(
                tool_calls=[
                    {
                        "id": "w1",
                        "name": "write_file",
                        "arguments": {"path": "notes.md", "content": "# Notes"},
                    }
                ]
            )
        ),
        Reply.stream(stream_of("Wrote `notes.md`.")),
        Reply.stream(stream_of(LONG), delay=0.06),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=[write_file])) as server,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1200, "height": 820})
            await page.goto(server.url + "/")
            await page.click("#new")

            await page.fill("#input", "What is the answer?")  # the session is made with its first message
            await page.press("#input", "Enter")
            answer = page.locator(".msg.assistant .body").first
            await expect(answer).to_have_text("The answer is 42, as always.")
            await expect(answer.locator("strong")).to_have_text("42")
            thinking = page.locator("details.thinking").first
            await expect(thinking).not_to_have_attribute("open", "")
            await expect(thinking).to_contain_text("Let me think about it.")
            await expect(page.locator(".usage").first).to_contain_text("80% cached")

            await page.fill("#input", "Write my notes.")
            await page.press("#input", "Enter")
            approval = page.locator(".tool.approval")
            await expect(approval).to_contain_text("notes.md")
            assert written == {}, "nothing is written before the approval"
            await approval.get_by_role("button", name="Approve").click()
            await expect(approval.locator(".decided")).to_contain_text("allowed")
            await expect(page.locator(".msg.assistant:not([hidden]) .body").nth(1)).to_have_text(
                "Wrote notes.md."
            )
            assert written == {"notes.md": "# Notes"}
            await expect(page.locator(".tool").filter(has_text="wrote 7 characters")).to_have_count(1)
            shot = os.environ.get("STEADYLOOP_PAGE_SCREENSHOT")

            await page.fill("#input", "Count slowly.")
            await page.press("#input", "Enter")
            last = page.locator(".msg.assistant:not([hidden]) .body").nth(2)
            await expect(last).to_contain_text("word5")
            await expect(page.locator("#status")).to_have_text("running…")
            await page.reload()
            last = page.locator(".msg.assistant:not([hidden]) .body").nth(2)
            await expect(page.locator("#status")).to_have_text("running…")
            await expect(last).to_have_text(LONG, timeout=20_000)
            await expect(page.locator(".ended")).to_have_count(3)
            await expect(page.locator("#status")).to_have_text("")
            # Everything from before the reload is back, once.
            await expect(page.locator(".msg.user")).to_have_count(3)
            await expect(page.locator(".msg.assistant .body").first).to_have_text(
                "The answer is 42, as always."
            )
            await expect(page.locator("#sessions li")).to_have_count(1)
            await expect(page.locator("#sessions li").first).to_contain_text("What is the answer?")
            if shot:
                await page.locator("#log").evaluate("log => log.scrollTop = 0")
                await page.screenshot(path=shot)
        finally:
            await browser.close()
