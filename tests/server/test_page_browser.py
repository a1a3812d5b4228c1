"""The web page in headless Chromium (the system's, driven by Playwright): a reload mid-run picks the run up,
and no page elsewhere can use the server: not by fetch, a form, DNS rebinding, or framing the page.

``test_page_walk.py`` and ``test_page_access.py`` walk the page itself.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk

from ._page import ARGS, CHROMIUM, expect_patiently, needs_chromium
from .conftest import LiveServer

pytestmark = needs_chromium

LONG = " ".join(f"word{i}" for i in range(60))


async def test_a_reload_mid_run_shows_everything_once_and_follows_the_run_to_its_end(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    model.enqueue(
        Reply.stream(
            stream_of("The answer is **42**.", reasoning="Think.", usage=usage_chunk(120, 9, cached=96))
        ),
        Reply.stream(stream_of(LONG), delay=0.06),
    )
    async with LiveServer(settings_for(model.base_url)) as server, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1200, "height": 820})
            await page.goto(server.url + "/")
            await page.fill("#input", "What is the answer?")  # the session is made with its first message
            await page.press("#input", "Enter")
            await expect(page.locator(".answer").first).to_have_text("The answer is 42.")
            await page.fill("#input", "Count slowly.")
            await page.press("#input", "Enter")
            last = page.locator(".run").nth(1).locator(".answer")
            await expect(last).to_contain_text("word5")
            await expect(page.locator("#status")).to_have_text("running…")
            await page.reload()
            await expect(page.locator("#status")).to_have_text("running…")
            await expect(page.locator(".run").nth(1).locator(".answer")).to_have_text(LONG, timeout=20_000)
            await expect(page.locator(".run-foot", has_text="done")).to_have_count(2)
            await expect(page.locator("#status")).to_have_text("")
            # Everything from before the reload is back, once.
            await expect(page.locator(".msg.user")).to_have_count(2)
            await expect(page.locator(".answer").first).to_have_text("The answer is 42.")
            await expect(page.locator(".meta").first).to_contain_text("80% cached")
            await expect(page.locator("#sessions li")).to_have_count(1)
            await expect(page.locator("#sessions li").first).to_contain_text("What is the answer?")
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
  await attempt("frame_page", () => new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.name = "framed";
    frame.onload = () => resolve("loaded");
    frame.src = target + "/";
    document.body.append(frame);
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

    from playwright.async_api import async_playwright

    expect = expect_patiently()
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
                    framed = next(f for f in hostile.frames if f.name == "framed")
                    assert not framed.url.startswith(server.url), "the page refuses to be framed elsewhere"
                    assert await framed.query_selector("#composer") is None
                    listed = (await http.get("/sessions")).json()["sessions"]
                    assert [s["title"] for s in listed] == ["mine"], "no page elsewhere made a session"

                    own = await browser.new_page()
                    await own.goto(server.url + "/")
                    await own.click("#new")
                    await own.fill("#input", "Are you there?")
                    await own.press("#input", "Enter")
                    await expect(own.locator(".answer").first).to_have_text("Still here.")
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
