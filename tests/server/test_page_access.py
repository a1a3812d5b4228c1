"""The web page for a person on the keyboard or a phone, behind a token, and under a model that writes
markup: send, approve, deny and stop with keys alone at 400 px; a token clears its own refusal; nothing the
model writes runs. And the page stays small enough to read."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import pytest

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of

from ._page import ARGS, CHROMIUM, Workspace, expect_patiently, needs_chromium, shoot
from .conftest import LiveServer

pytestmark = needs_chromium

LONG = " ".join(f"word{i}" for i in range(80))


async def test_send_approve_deny_and_stop_with_the_keyboard_alone_at_400_px(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    work = Workspace()
    model.enqueue(
        Reply.stream(
            stream_of(
                tool_calls=[
                    {
                        "id": "w1",
                        "name": "write_file",
                        "arguments": {"path": "notes.md", "content": "# Notes\n"},
                    }
                ]
            )
        ),
        Reply.stream(
            stream_of(
                tool_calls=[{"id": "s1", "name": "run_shell", "arguments": {"command": "rm -rf build/"}}]
            )
        ),
        Reply.stream(stream_of("Wrote the notes; the build folder stays.")),
        Reply.stream(stream_of(LONG), delay=0.08),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=work.tools())) as server,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 400, "height": 780})
            await page.goto(server.url + "/")
            await expect(page.locator("#input")).to_be_focused()
            await page.keyboard.type("Write the notes, then clean the build.")
            await page.keyboard.press("Enter")
            await expect(page.locator("button.approve")).to_be_visible()
            await page.keyboard.press("Escape")  # out of the message box: the page's keys work from here
            await page.keyboard.press("a")
            await expect(
                page.locator("details.tool", has_text="write_file").locator(".decided")
            ).to_contain_text("allowed")
            shell = page.locator("details.tool", has_text="run_shell")
            await expect(shell.locator("pre.shell")).to_have_text("$ rm -rf build/")
            # The call shows as it streams, before the run asks about it: "d" decides only once asked.
            await expect(shell.locator("button.approve")).to_be_visible()
            await shoot(page, "narrow")
            await page.keyboard.press("d")
            await expect(shell.locator(".decided")).to_contain_text("denied")
            await expect(page.locator(".answer").last).to_have_text(
                "Wrote the notes; the build folder stays."
            )
            assert work.files["notes.md"] == "# Notes\n" and work.commands == []

            widths = await page.evaluate(
                """() => [document.documentElement.scrollWidth, window.innerWidth,
                          document.getElementById('log').scrollWidth, document.getElementById('log').clientWidth]"""
            )
            assert widths[0] <= widths[1] and widths[2] <= widths[3], widths

            await page.keyboard.press("/")
            await expect(page.locator("#input")).to_be_focused()
            await page.keyboard.type("Count slowly.")
            await page.keyboard.press("Enter")
            await expect(page.locator(".answer").last).to_contain_text("word5")
            await page.keyboard.press("Escape")
            await page.keyboard.press("s")
            await expect(page.locator(".run-foot").last).to_contain_text("cancelled")
            await expect(page.locator("#abort")).to_be_disabled()

            await page.keyboard.press("l")  # the list slides over, its session focused
            await expect(page.locator("#sessions li.current")).to_be_focused()
            await expect(page.locator("#sessions li")).to_be_in_viewport()
            await shoot(page, "narrow-sessions")
            await page.keyboard.press("Escape")
            await expect(page.locator("#sessions li")).not_to_be_in_viewport()
        finally:
            await browser.close()


async def test_with_a_token_the_refusal_clears_once_the_token_is_given(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    settings = settings_for(model.base_url, tokens={"s3cret-token": "alice"})
    async with (
        LiveServer(settings) as server,
        server.client(token="s3cret-token") as http,
        async_playwright() as p,
    ):
        await http.post("/sessions", json={"title": "Alice's session"})
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            await page.goto(server.url + "/")
            await expect(page.locator("#notice")).to_contain_text("a valid bearer token is required")
            await page.fill("#token", "s3cret-token")
            await page.press("#token", "Enter")
            await expect(page.locator("#notice")).to_be_hidden()
            await expect(page.locator("#token-row")).to_be_hidden()
            await expect(page.locator("#sessions li .s-title")).to_have_text(["Alice's session"])
        finally:
            await browser.close()


HOSTILE = (
    "<script>window.pwned = 'script'</script> <img src=x onerror=\"window.pwned = 'img'\"> "
    '[click me](javascript:window.pwned=1) <a href="javascript:window.pwned=2">link</a> '
    '<svg onload="window.pwned = \'svg\'"></svg> <iframe src="javascript:window.pwned=4"></iframe>'
)


async def test_nothing_the_model_or_a_tool_writes_runs_on_the_page(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    expect = expect_patiently()
    work = Workspace()
    model.enqueue(
        Reply.stream(
            stream_of(
                reasoning=HOSTILE,
                tool_calls=[
                    {
                        "id": "w1",
                        "name": "write_file",
                        "arguments": {"path": HOSTILE[:40], "content": HOSTILE},
                    }
                ],
            )
        ),
        Reply.stream(
            stream_of(
                HOSTILE + "\n\n```html\n" + HOSTILE + "\n```\n\n| " + HOSTILE + " | x |\n|---|---|\n| y | z |"
            )
        ),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=work.tools())) as server,
        async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            landed = await page.goto(server.url + "/")
            assert landed is not None
            policy = landed.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, policy
            await page.fill("#input", HOSTILE)
            await page.press("#input", "Enter")
            await page.locator("button.approve").click()
            answer = page.locator(".answer").last
            await expect(answer).to_contain_text("<script>window.pwned = 'script'</script>")
            await expect(page.locator("#sessions li").first).to_contain_text("<script>")
            await page.locator("details.thinking summary").first.click()
            await expect(page.locator(".thought").first).to_contain_text("<img src=x onerror=")
            found = await page.evaluate(
                """() => ({
                    pwned: window.pwned === undefined ? null : String(window.pwned),
                    scripts: document.querySelectorAll('body script').length,
                    handlers: [...document.querySelectorAll('body *')].filter(e =>
                        [...e.attributes].some(a => a.name.startsWith('on'))).length,
                    scriptLinks: [...document.querySelectorAll('a[href]')].filter(a =>
                        !/^https?:/.test(a.getAttribute('href'))).length,
                    frames: document.querySelectorAll('iframe, svg, object, embed').length,
                    images: [...document.querySelectorAll('img')].filter(i => !i.src.startsWith('data:')).length,
                })"""
            )
            assert found == {
                "pwned": None,
                "scripts": 0,
                "handlers": 0,
                "scriptLinks": 0,
                "frames": 0,
                "images": 0,
            }
            assert work.files[HOSTILE[:40]] == HOSTILE, "the write itself went through, as approved"
        finally:
            await browser.close()


def _page_files() -> dict[str, str]:
    folder = resources.files("steadyloop.server").joinpath("page")
    return {
        f.name: f.read_text(encoding="utf-8")
        for f in folder.iterdir()
        if f.name.endswith((".js", ".css", ".html"))
    }


async def test_the_page_is_small_enough_to_read_and_serves_only_its_own_files(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], capsys: pytest.CaptureFixture[str]
) -> None:
    files = _page_files()
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        for name, text in files.items():
            path = "/" if name == "index.html" else f"/page/{name}"
            served = await http.get(path)
            assert served.status_code == 200 and served.text == text, name
            assert "content-security-policy" in served.headers
        for missing in ("/page/nope.js", "/page/..%2Fapp.py", "/page/__init__.py", "/page/index.html"):
            assert (await http.get(missing)).status_code == 404, missing
    sizes = {name: (len(text.encode()), text.count("\n")) for name, text in sorted(files.items())}
    js = sum(size for name, (size, _) in sizes.items() if name.endswith(".js"))
    css = sum(size for name, (size, _) in sizes.items() if name.endswith(".css"))
    with capsys.disabled():
        print("\nthe page's files (bytes, lines):")
        for name, (size, lines) in sizes.items():
            print(f"  {name:18} {size:7} {lines:5}")
        print(f"  JavaScript {js} bytes in {sum(n.endswith('.js') for n in files)} files; CSS {css} bytes")
    assert js < 100_000 and css < 30_000, (js, css)
    assert all(lines < 500 for _, lines in sizes.values()), sizes


async def test_the_pages_diff_is_a_shortest_edit_that_gives_back_both_sides(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from playwright.async_api import async_playwright

    async with LiveServer(settings_for(model.base_url)) as server, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = await browser.new_page()
            await page.goto(server.url + "/")
            checked = await page.evaluate(
                """async () => {
                    const { diffLines } = await import('/page/diff.js');
                    let seed = 7;
                    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
                    const lines = () => Array.from({ length: Math.floor(next() * 9) }, () => 'abc'[Math.floor(next() * 3)]);
                    for (let t = 0; t < 2000; t++) {
                        const a = lines(), b = lines(), ops = diffLines(a, b);
                        const old = ops.filter(([o]) => o !== '+').map(([, l]) => l).join();
                        const now = ops.filter(([o]) => o !== '-').map(([, l]) => l).join();
                        const lcs = Array.from({ length: a.length + 1 }, () => Array(b.length + 1).fill(0));
                        for (let i = 1; i <= a.length; i++) for (let j = 1; j <= b.length; j++)
                            lcs[i][j] = a[i - 1] === b[j - 1] ? lcs[i - 1][j - 1] + 1 : Math.max(lcs[i - 1][j], lcs[i][j - 1]);
                        const edits = ops.filter(([o]) => o !== ' ').length;
                        if (old !== a.join() || now !== b.join() || edits !== a.length + b.length - 2 * lcs[a.length][b.length])
                            return JSON.stringify({ a, b, ops });
                    }
                    return 'ok';
                }"""
            )
            assert checked == "ok", checked
        finally:
            await browser.close()
