"""The web page in headless Chromium, walked as a person uses it against a scripted model: new-session
settings within the operator's floor, a conversation with thinking, tool cards and approvals (a write's
content, an edit's diff, a shell command), timings and totals, the run's timeline, the session list, and
branches (regenerate, edit and resend, continue from here, copy, an image)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable
from typing import Any

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk

from ._page import ARGS, CHROMIUM, Workspace, expect_patiently, needs_chromium, png, shoot
from .conftest import LiveServer, wait_for_event

pytestmark = needs_chromium

ANSWER = (
    "The answer is **42**.\n\n```py\ndef answer():\n    return 42  # always\n```\n\n"
    "| question | answer |\n|---|---|\n| life | 42 |"
)
REFUSED_TEMPERATURE = {
    "error": {
        "message": "Unsupported parameter: 'temperature'",
        "type": "invalid_request_error",
        "param": "temperature",
    }
}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def sessions_posted(page: Any) -> list[dict[str, Any]]:
    """The bodies of the ``POST /sessions`` the page sends from now on, in order."""
    made: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: (
            made.append(json.loads(r.post_data or "{}"))
            if r.method == "POST" and r.url.endswith("/sessions")
            else None
        ),
    )
    return made


async def test_settings_conversation_approvals_and_timeline(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    work = Workspace()
    model.enqueue(
        Reply.json(REFUSED_TEMPERATURE, status=400),
        Reply.stream(
            stream_of(ANSWER, reasoning="The user wants the answer.", usage=usage_chunk(120, 9, cached=96)),
            delay=0.01,
        ),
        Reply.json({"error": {"message": "overloaded"}}, status=503, headers={"Retry-After": "0"}),
        Reply.stream(
            stream_of(
                tool_calls=[call("w1", "write_file", path="notes.md", content="# Notes\n\n- one\n- two\n")]
            )
        ),
        Reply.stream(
            stream_of(
                tool_calls=[
                    call("e1", "edit_file", path="app.py", old="    return x\n", new="    return x + 1\n"),
                    call("s1", "run_shell", command="pytest -q tests/"),
                ]
            )
        ),
        Reply.stream(
            stream_of(
                "Wrote `notes.md` and edited `app.py`; the tests were not run.", usage=usage_chunk(300, 20)
            )
        ),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=work.tools())) as server,
        server.client() as http,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            made = sessions_posted(page)
            await page.goto(server.url + "/")

            # The operator's floor is ticked and cannot be unticked; the timeout cannot go past it.
            settings = page.locator("#settings")
            for effect in ("mutate-reversible", "mutate-irreversible", "destructive"):
                box = settings.locator(f'input[data-effect="{effect}"]')
                await expect(box).to_be_checked()
                await expect(box).to_be_disabled()
            await expect(settings.locator('input[data-effect="read"]')).to_be_enabled()
            await expect(settings.locator("#set-timeout")).to_have_attribute("max", "300")
            await expect(settings.locator('input[data-ask="run_shell"]')).to_be_disabled()
            await shoot(page, "new-session")
            await settings.locator('input[data-effect="read"]').check()
            await settings.locator('input[data-tool="read_file"]').uncheck()
            await page.fill("#set-system", "Be brief.")
            await page.click("text=More")
            await page.fill("#set-temperature", "0.3")

            await page.fill("#input", "What is the answer?")
            await page.press("#input", "Enter")
            first = page.locator(".run").nth(0)
            await expect(first.locator(".answer")).to_contain_text("The answer is 42.")
            await expect(first.locator(".answer strong")).to_have_text("42")
            await expect(first.locator(".answer .hl-k").first).to_have_text("def")
            await expect(first.locator(".answer td").nth(1)).to_have_text("42")
            thinking = first.locator("details.thinking")
            await expect(thinking).not_to_have_attribute("open", "")
            await expect(thinking).to_contain_text("The user wants the answer.")
            await expect(first.locator(".meta")).to_contain_text("120 in (80% cached) · 9 out")
            await expect(first.locator(".meta")).to_contain_text("first token")
            await expect(first.locator(".meta")).to_contain_text("scripted")
            await expect(first.locator(".chip.downgrade")).to_contain_text("temperature")
            await expect(first.locator(".msg.user time")).not_to_have_text("")
            await expect(first.locator(".run-foot")).to_contain_text("done ·")

            asked = made[0]
            assert asked["system"] == "Be brief." and asked["temperature"] == 0.3, asked
            assert asked["tools"] == ["write_file", "edit_file", "run_shell"], asked
            assert sorted(asked["approvals"]["require_for"]) == [
                "destructive",
                "mutate-irreversible",
                "mutate-reversible",
                "read",
            ], asked
            sent = model.chat_requests[0].json
            assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
            assert sent["temperature"] == 0.3 and "temperature" not in model.chat_requests[1].json
            assert {t["function"]["name"] for t in sent["tools"]} == {"write_file", "edit_file", "run_shell"}

            # A write waits with the file's new content shown once, and nothing is written before Approve.
            await page.fill("#input", "Write my notes and fix app.py.")
            await page.press("#input", "Enter")
            second = page.locator(".run").nth(1)
            write = second.locator("details.tool", has_text="write_file")
            await expect(write.locator("button.approve")).to_be_visible()
            await expect(write.locator(".line.add")).to_have_count(5)
            assert await write.evaluate("card => card.textContent.split('# Notes').length - 1") == 1
            assert "notes.md" not in work.files
            await write.locator("button.approve").click()
            await expect(write.locator(".decided")).to_contain_text("allowed")
            await expect(write.locator("pre.result")).to_have_text("wrote 21 characters to notes.md")

            # An edit as a diff, a command as a command line; approved and denied from the keyboard.
            edit = second.locator("details.tool", has_text="edit_file")
            shell = second.locator("details.tool", has_text="run_shell")
            await expect(edit.locator(".line.del")).to_contain_text("return x")
            await expect(edit.locator(".line.add")).to_contain_text("return x + 1")
            await expect(shell.locator("pre.shell")).to_have_text("$ pytest -q tests/")
            await expect(page.locator("#status")).to_have_text("waits for your decision")
            await shoot(page, "approval")
            await page.keyboard.press("Escape")
            await page.keyboard.press("a")
            await expect(edit.locator(".decided")).to_contain_text("allowed")
            await expect(shell.locator("button.approve")).to_be_visible()  # "d" decides only once asked
            await page.keyboard.press("d")
            await expect(shell.locator(".decided")).to_contain_text("denied")
            await expect(second.locator(".answer").last).to_contain_text("the tests were not run")
            assert work.files["app.py"] == "def f(x):\n    return x + 1\n" and work.commands == []
            await expect(second.locator(".chip.retry")).to_contain_text("retry 1")

            # Each step's line sits with what it did; no token counts where the endpoint gave none.
            orphans = await page.evaluate(
                """() => [...document.querySelectorAll('.step')].filter(step =>
                    !step.querySelector('.tool') && !step.querySelector('.answer')?.textContent.trim()).length"""
            )
            assert orphans == 0
            log = await page.locator("#log").inner_text()
            assert not re.search(r"(?<![\d.])0% cached|(?<![\d.])0 in\b", log), log
            await expect(page.locator("#totals")).to_contain_text("2 runs")
            await expect(page.locator("#model")).to_have_text("scripted")

            await second.locator(".run-foot button", has_text="Timeline").click()
            panel = page.locator("#panel-body")
            await expect(panel.locator(".tl-step")).to_have_count(4)
            await expect(panel).to_contain_text("retry 1")
            await expect(panel).to_contain_text("waiting for a decision")
            await expect(panel.locator(".row", has_text="write_file")).to_have_count(1)
            await expect(panel.locator(".row", has_text="run_shell")).to_contain_text("blocked")
            await expect(panel.locator(".row", has_text="request").first).to_contain_text("first token")
            raw = panel.locator("details.raw").nth(1)
            await raw.locator("summary").click()
            await expect(raw.locator(".event").first).to_contain_text("turn_start")
            await shoot(page, "timeline")
            sid = (await http.get("/sessions")).json()["sessions"][0]["id"]
            assert (await http.get(f"/sessions/{sid}")).json()["title"] == "What is the answer?"
        finally:
            await browser.close()


async def test_the_session_list_titles_flags_searches_renames_and_deletes(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    work = Workspace()
    model.enqueue(
        Reply.stream(stream_of("Paris.")),
        Reply.stream(stream_of(tool_calls=[call("w1", "write_file", path="todo.md", content="milk")])),
        Reply.stream(stream_of("Noted.")),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=work.tools())) as server,
        server.client() as http,
        async_playwright() as p,
    ):
        geo = (await http.post("/sessions", json={})).json()["id"]
        await http.post(f"/sessions/{geo}/messages", json={"text": "Capital of France?"})
        todo = (await http.post("/sessions", json={})).json()["id"]
        running = asyncio.ensure_future(
            http.post(f"/sessions/{todo}/messages", json={"text": "Note the milk."})
        )
        asked = await wait_for_event(http, todo, "approval_required")
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            await page.goto(server.url + "/")
            items = page.locator("#sessions li")
            await expect(items).to_have_count(2)
            waiting = items.filter(has_text="Note the milk.")
            await expect(waiting.locator(".badge.waiting")).to_have_text("1 waiting")
            await expect(waiting).to_contain_text("just now")
            await expect(items.filter(has_text="Capital of France?")).to_have_count(1)
            await waiting.click()
            await expect(page.locator("details.tool button.approve")).to_be_visible()
            await shoot(page, "sessions")

            await page.fill("#search", "paris")  # the assistant's words find it
            await expect(items).to_have_count(1)
            await expect(items.first).to_contain_text("Capital of France?")
            await page.fill("#search", "")
            await expect(items).to_have_count(2)

            geo_item = items.filter(has_text="Capital of France?")
            await geo_item.hover()
            await geo_item.locator("button.rename").click()
            await page.fill(".rename-input", "Geography")
            await page.press(".rename-input", "Enter")
            await expect(items.filter(has_text="Geography")).to_have_count(1)
            assert (await http.get(f"/sessions/{geo}")).json()["title"] == "Geography"

            geo_item = items.filter(has_text="Geography")
            await geo_item.hover()
            await geo_item.locator("button.delete").click()
            await geo_item.locator("button", has_text="Delete it").click()
            await expect(items).to_have_count(1)
            assert (await http.get(f"/sessions/{geo}")).status_code == 404

            card = page.locator("details.tool", has_text="write_file")
            await expect(card.locator("button.approve")).to_be_visible()
            await card.locator("button.approve").click()
            await expect(page.locator(".answer").last).to_have_text("Noted.")
            await expect(items.first.locator(".badge")).to_have_count(0)
            assert work.files["todo.md"] == "milk" and asked.data["name"] == "write_file"
            assert (await running).json()["answer"] == "Noted."
        finally:
            await browser.close()


async def test_branches_regenerate_edit_continue_copy_and_an_image(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    model.enqueue(*(Reply.stream(stream_of(text)) for text in ("Blue.", "Green.", "A pear.", "Red.")))
    async with (
        LiveServer(settings_for(model.base_url)) as server,
        server.client() as http,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 860})
            await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
            page = await context.new_page()
            await page.goto(server.url + "/")
            await page.set_input_files(
                "#file", files=[{"name": "dot.png", "mimeType": "image/png", "buffer": png(160, 100)}]
            )
            await expect(page.locator("#attachments img")).to_have_count(1)
            await page.fill("#input", "Pick a colour for this.")
            await page.press("#input", "Enter")
            runs = page.locator(".run")
            await expect(runs.nth(0).locator(".answer")).to_have_text("Blue.")
            image = runs.nth(0).locator(".msg.user img")
            await expect(image).to_have_attribute(
                "src", "data:image/png;base64," + base64.b64encode(png(160, 100)).decode()
            )
            await expect(page.locator("#attachments img")).to_have_count(0)
            parts = model.chat_requests[0].json["messages"][-1]["content"]
            assert [part["type"] for part in parts] == ["text", "image_url"], parts

            await runs.nth(0).locator(".run-foot button", has_text="Regenerate").click()
            await expect(runs.nth(1).locator(".answer")).to_have_text("Green.")
            await expect(runs.nth(1).locator(".msg.user img")).to_have_count(1)  # the image went again
            await expect(page.locator(".run.off-branch")).to_have_count(1)
            await expect(runs.nth(0)).to_have_class(re.compile(r"\boff-branch\b"))

            await runs.nth(1).locator(".run-foot button", has_text="Copy").click()
            assert await page.evaluate("navigator.clipboard.readText()") == "Green."

            await runs.nth(1).locator(".msg.user button", has_text="Edit").click()
            await page.fill(".edit-area", "Pick a fruit.")
            await page.press(".edit-area", "Enter")
            await expect(runs.nth(2).locator(".answer")).to_have_text("A pear.")
            await expect(page.locator(".run.off-branch")).to_have_count(2)

            await page.click("#show-tree")
            tree = page.locator("#panel-body")
            await expect(tree.locator(".fork .branch")).to_have_count(3)
            await expect(tree.locator("li.entry.leaf")).to_contain_text("A pear.")
            blue = tree.locator("li.entry", has_text="Blue.")
            await blue.hover()
            await blue.locator("button", has_text="Continue from here").click()
            await expect(tree.locator("li.entry.leaf")).to_contain_text("Blue.")
            await expect(page.locator(".run.off-branch")).to_have_count(2)
            await expect(runs.nth(0)).not_to_have_class(re.compile(r"\boff-branch\b"))
            await page.fill("#input", "And another?")
            await page.press("#input", "Enter")
            await expect(runs.nth(3).locator(".answer")).to_have_text("Red.")
            await expect(tree.locator("li.entry.leaf")).to_contain_text("Red.")
            await expect(page.locator("#totals")).to_contain_text("4 runs")
            await shoot(page, "branches")

            sid = (await http.get("/sessions")).json()["sessions"][0]["id"]
            entries = {e["id"]: e for e in (await http.get(f"/sessions/{sid}/tree")).json()["entries"]}
            another = next(e for e in entries.values() if e["message"]["content"] == "And another?")
            assert entries[another["parent_id"]]["message"]["content"] == "Blue."
            sent = model.chat_requests[3].json["messages"]
            assert [m["content"] if isinstance(m["content"], str) else "image" for m in sent[-3:]] == [
                "image",
                "Blue.",
                "And another?",
            ]
        finally:
            await browser.close()


async def test_an_agent_document_from_the_settings_makes_the_session(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    """The settings' agent document goes with the new session: its prompt and temperature reach the model. A
    document that is no JSON is said on the page and no session is made."""
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    model.enqueue(Reply.stream(stream_of("Reviewed: nothing to change.")))
    document = {
        "spec": "steadyloop.agent/1",
        "model": {"temperature": 0.3},
        "prompt": [{"id": "role", "text": "You review code."}],
    }
    async with LiveServer(settings_for(model.base_url)) as server, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            made = sessions_posted(page)
            await page.goto(server.url + "/")
            await page.click("text=More")
            await page.fill("#set-agent", "{not json")
            await page.fill("#input", "Review this.")
            await page.press("#input", "Enter")
            await expect(page.locator("#notice")).to_contain_text("the agent document is not JSON")
            assert made == [] and model.chat_requests == []

            await page.fill("#set-agent", json.dumps(document))
            await page.fill("#input", "Review this.")
            await page.press("#input", "Enter")
            await expect(page.locator(".run").nth(0).locator(".answer")).to_contain_text("nothing to change")
            assert made == [{"agent": document}], made
            sent = model.chat_requests[0].json
            assert sent["messages"][0] == {"role": "system", "content": "You review code."}
            assert sent["temperature"] == 0.3
        finally:
            await browser.close()
