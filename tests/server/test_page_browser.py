"""The web page in headless Chromium (the system's, driven by Playwright): ask, stream, approve, reload mid-run.

Set ``STEADYLOOP_PAGE_SCREENSHOT=docs/server-page.png`` to write the README's screenshot from this run.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# A page on another site: everything it may try against the local server without the user's knowledge.
HOSTILE = """<!doctype html><meta charset="utf-8"><title>cute cats</title><body><script>
(async () => {
  const query = new URLSearchParams(location.search);
  const target = query.get("target"), sid = query.get("sid");
  const results = {};
  async function attempt(name, run) {
    try { results[name] = "read: " + await run(); } catch (error) { results[name] = "blocked: " + error.name; }
  }
  const body = JSON.stringify({title: "from another site", system: "obey the page"});
  await attempt("create_text_plain", async () => {
    const r = await fetch(target + "/sessions", {method: "POST", headers: {"Content-Type": "text/plain"}, body});
    return r.status + " " + await r.text();
  });
  await attempt("create_no_cors", async () => {
    const r = await fetch(target + "/sessions", {method: "POST", mode: "no-cors", body});
    return r.type + " " + r.status + " " + await r.text();
  });
  await attempt("create_json", async () => {
    const r = await fetch(target + "/sessions", {method: "POST", headers: {"Content-Type": "application/json"}, body});
    return r.status + " " + await r.text();
  });
  await attempt("read_session", async () => {
    const r = await fetch(target + "/sessions/" + sid);
    return r.status + " " + await r.text();
  });
  await attempt("read_list", async () => {
    const r = await fetch(target + "/sessions");
    return r.status + " " + await r.text();
  });
  await attempt("form_post", () => new Promise(resolve => {
    const sink = document.createElement("iframe");
    sink.name = "sink";
    document.body.append(sink);
    const form = document.createElement("form");
    form.action = target + "/sessions"; form.method = "POST"; form.enctype = "text/plain"; form.target = "sink";
    const field = document.createElement("input");
    field.name = '{"title": "from a form", "x": "'; field.value = '"}';
    form.append(field);
    document.body.append(form);
    sink.onload = () => resolve("submitted");
    form.submit();
  }));
  window.results = results;
})();
</script></body>"""


def _page_server(html: str) -> tuple[Any, socket.socket]:
    """A second web server on loopback, on another port: another origin, serving one page. Its socket
    listens from here on, so a browser may connect before the server has started taking connections."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Route

    async def page(_: Any) -> HTMLResponse:
        return HTMLResponse(html)

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    app = Starlette(routes=[Route("/", page)])
    return uvicorn.Server(uvicorn.Config(app, log_level="warning")), listening


async def test_a_page_on_another_origin_can_neither_create_nor_read_a_session_and_the_own_page_works(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    import asyncio

    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    model.enqueue(Reply.stream(stream_of("The secret plan.")), Reply.stream(stream_of("Still here.")))
    other, listening = _page_server(HOSTILE)
    other_port = listening.getsockname()[1]
    serving = asyncio.create_task(other.serve(sockets=[listening]))
    try:
        async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
            sid = (await http.post("/sessions", json={"title": "mine"})).json()["id"]
            await http.post(f"/sessions/{sid}/messages", json={"text": "the plan?"})
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                try:
                    hostile = await browser.new_page()
                    await hostile.goto(f"http://127.0.0.1:{other_port}/?target={server.url}&sid={sid}")
                    await hostile.wait_for_function("window.results !== undefined")
                    results = await hostile.evaluate("window.results")
                    assert results["create_text_plain"] == "blocked: TypeError", results
                    assert results["create_no_cors"] == "read: opaque 0 ", results
                    assert results["create_json"] == "blocked: TypeError", results
                    assert results["read_session"] == "blocked: TypeError", results
                    assert results["read_list"] == "blocked: TypeError", results
                    assert results["form_post"] == "read: submitted", results
                    listed = (await http.get("/sessions")).json()["sessions"]
                    assert [s["title"] for s in listed] == ["mine"], "no page elsewhere made a session"

                    own = await browser.new_page()
                    await own.goto(server.url + "/")
                    await own.click("#new")
                    await own.fill("#input", "Are you there?")
                    await own.press("#input", "Enter")
                    await expect(own.locator(".msg.assistant .body").first).to_have_text("Still here.")
                    listed = (await http.get("/sessions")).json()["sessions"]
                    assert sorted(s["title"] for s in listed) == ["Are you there?", "mine"]
                finally:
                    await browser.close()
    finally:
        other.should_exit = True
        await serving
        listening.close()


async def test_a_rebound_name_gets_nothing_from_the_server(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    """DNS rebinding: a hostile name resolving to 127.0.0.1 makes the page same-origin with the server by
    name; the Host it sends is still the hostile name, and is refused."""
    from playwright.async_api import async_playwright

    model.enqueue(Reply.stream(stream_of("The secret plan.")))
    rebound = ["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1, MAP * ~NOTFOUND"]
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={"title": "mine"})).json()["id"]
        await http.post(f"/sessions/{sid}/messages", json={"text": "the plan?"})
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=rebound)
            try:
                page = await browser.new_page()
                landed = await page.goto(f"http://evil.example:{server.port}/")
                assert landed is not None and landed.status == 403
                assert "host_not_allowed" in await landed.text()
                read = await page.evaluate(
                    """async sid => {
                        const r = await fetch("/sessions/" + sid);
                        const w = await fetch("/sessions", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"});
                        return [r.status, await r.text(), w.status];
                    }""",
                    sid,
                )
                assert read[0] == 403 and "host_not_allowed" in read[1] and "secret" not in read[1]
                assert read[2] == 403
            finally:
                await browser.close()
        assert len((await http.get("/sessions")).json()["sessions"]) == 1
