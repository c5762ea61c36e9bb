"""The web UI in a real headless browser (Debian's chromium, through Selenium).

`taplog ui` runs as a user runs it, over a data dir recorded from real SDK
traffic (tests/fakes/ui_traffic.py) while the proxy that recorded it keeps
recording. CI installs chromium (.ci/run) and these tests fail there without
it; elsewhere they are skipped with the reason.

Set TAPLOG_UI_SCREENSHOTS=docs to save docs/ui.md's screenshots of the three
pages and of a Claude Code session's conversation (docs/ui-*.png) while the tests run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from taplog.recorder.store.reader import read_session
from taplog.recorder.tools.fork import fork_session
from tests.fakes.agents import PLAN
from tests.fakes.clis import SUB_AGENT_PROMPT, run_claude
from tests.fakes.harness import TAPLOG, taplog_env
from tests.fakes.reading_traffic import LONG, TOOL_STEPS, output
from tests.fakes.ui_traffic import SCRIPT_PROMPT, SESSIONS, ask

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("selenium is not installed (pip install -e '.[test]')", allow_module_level=True)

pytestmark = pytest.mark.slow
WIDTH, HEIGHT = 1280, 800
SHOTS = os.environ.get("TAPLOG_UI_SCREENSHOTS")


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    if os.environ.get("CI"):
        pytest.fail("CI must run the browser tests: install chromium and chromium-driver")
    pytest.skip("no chromium / chromedriver here (apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary  # Debian's build: Selenium Manager never downloads one
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    _window(driver, HEIGHT)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def ui_url(ui_recording) -> Iterator[str]:
    """`taplog ui` over the recorded data dir, as a user starts it."""
    process = subprocess.Popen(
        [TAPLOG, "ui", "--data-dir", str(ui_recording.data_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=taplog_env(),
    )
    try:
        banner = [process.stdout.readline() for _ in range(2)]
        yield next(line.split()[-1] for line in banner if "open http" in line)
    finally:
        process.terminate()
        process.wait(10)


def wait(driver: webdriver.Chrome, check, timeout: float = 10):
    """`check`'s first true value; pages re-render, so elements may vanish meanwhile."""
    transient = (IndexError, StaleElementReferenceException)
    waiting = WebDriverWait(driver, timeout, ignored_exceptions=transient)
    return waiting.until(lambda d: check(d) or None)


def rows(driver: webdriver.Chrome, selector: str) -> list:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def screenshot(driver: webdriver.Chrome, name: str, top=None, height: int = HEIGHT) -> None:
    """The page from its top, or from element `top`, in a window `height` pixels tall."""
    if not SHOTS:
        return
    _window(driver, height)
    if top is None:
        driver.execute_script("window.scrollTo(0, 0)")
    else:
        driver.execute_script("arguments[0].scrollIntoView()", top)
    driver.save_screenshot(str(Path(SHOTS) / f"ui-{name}.png"))
    _window(driver, HEIGHT)


def _window(driver: webdriver.Chrome, height: int) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def open_page(driver: webdriver.Chrome, url: str) -> None:
    driver.get("about:blank")  # a new document: no state kept from the last test
    driver.get(url)


def test_sessions_page_lists_filters_and_sorts_the_sessions(browser, ui_url):
    open_page(browser, ui_url + "#/")
    listed = wait(browser, lambda d: rows(d, "tr.session-row"))
    assert sorted(row.get_attribute("data-session") for row in listed) == sorted(SESSIONS)
    failover = browser.find_element(By.CSS_SELECTOR, "tr[data-session='failover-chat']")
    assert "gpt-4.1" not in failover.text and "claude-sonnet-4-6" in failover.text
    prompt = failover.find_element(By.CSS_SELECTOR, ".prompt").text
    client = failover.find_element(By.CSS_SELECTOR, ".tag.client").text
    assert prompt.startswith("Plan my trip") and client == "OpenAI Python SDK"
    screenshot(browser, "sessions")

    browser.find_element(By.CSS_SELECTOR, "a[data-sort='calls']").click()  # most calls first
    wait(browser, lambda d: "sort=calls" in d.current_url and rows(d, "tr.session-row"))
    ordered = [row.get_attribute("data-session") for row in rows(browser, "tr.session-row")]
    assert ordered[-1] == "inert-script"  # 1 call, the others 8
    browser.find_element(By.CSS_SELECTOR, "a[data-sort='calls']").click()  # and the other way
    wait(browser, lambda d: "order=asc" in d.current_url)
    wait(
        browser,
        lambda d: rows(d, "tr.session-row")[0].get_attribute("data-session") == "inert-script",
    )

    search = browser.find_element(By.CSS_SELECTOR, "input[name='text']")
    search.send_keys("Plan my trip")
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type='submit']").click()
    wait(browser, lambda d: len(rows(d, "tr.session-row")) == 2 and "text=" in d.current_url)
    found = {row.get_attribute("data-session") for row in rows(browser, "tr.session-row")}
    assert found == {"anthropic-tools", "failover-chat"}


def test_session_timeline_shows_each_call_and_tool_run_and_a_call_in_full(
    browser,
    ui_url,
    ui_recording,
):
    events = read_session(ui_recording.data_dir, "anthropic-tools")
    calls = len({e["exchange"] for e in events if e["type"] == "llm.request"})
    tools = [e["name"] for e in events if e["type"] == "tool.pre"]
    open_page(browser, ui_url + "#/session/anthropic-tools")
    wait(browser, lambda d: rows(d, ".tl-row.call"))
    assert len(rows(browser, ".tl-row.call")) == calls == 8
    drawn = [row.text.split("\n")[0] for row in rows(browser, ".tl-row.tool")]
    assert (
        drawn == [f"↳ {name}" for name in tools] == ["↳ get_weather", "↳ get_time", "↳ read_file"]
    )
    assert [r.text.split("\n")[0] for r in rows(browser, ".tl-row.tool.error")] == ["↳ read_file"]
    assert len(rows(browser, "tr.tool-row")) == 3

    rows(browser, ".tl-row.call")[1].click()  # the call that carried the first tool results
    panel = wait(browser, lambda d: rows(d, ".detail[data-exchange]"))[0]
    assert "1 earlier message resent unchanged; 2 new" in panel.text
    assert "sunny, 21°C" in panel.text and "Plan my trip" not in panel.text  # only what is new
    second = [e["exchange"] for e in events if e["type"] == "llm.request"][1]
    answer = next(e for e in events if e["type"] == "llm.response" and e["exchange"] == second)
    streamed = panel.find_element(By.XPATH, ".//summary[starts-with(., 'Streamed events')]")
    assert streamed.text == f"Streamed events ({len(answer['sse'])})"
    streamed.click()
    assert len(panel.find_elements(By.CSS_SELECTOR, "table.stream tbody tr")) == len(answer["sse"])
    screenshot(browser, "session")

    rows(browser, ".tl-row.tool.error")[0].click()
    tool = wait(browser, lambda d: rows(d, ".detail[data-call]"))[0]
    assert "error: README.md: no such file" in tool.text and "Result (error)" in tool.text


def test_failovers_are_marked_and_the_translated_body_is_shown_exactly(
    browser,
    ui_url,
    ui_recording,
):
    events = read_session(ui_recording.data_dir, "failover-chat")
    open_page(browser, ui_url + "#/session/failover-chat")
    wait(browser, lambda d: rows(d, ".tl-row.call"))
    assert len(rows(browser, ".tl-row.call.failover")) == 8
    marks = rows(browser, ".tl-mark.failover")
    assert len(marks) == sum(e["type"] == "failover" for e in events)
    assert "failover openai:gpt-4.1 → anthropic:claude-sonnet-4-6" in marks[0].get_attribute(
        "title"
    )

    rows(browser, ".tl-row.call")[0].click()
    panel = wait(browser, lambda d: rows(d, ".detail[data-exchange]"))[0]
    upstream = panel.find_element(
        By.XPATH, ".//summary[starts-with(., 'Sent upstream to anthropic')]"
    )
    assert "translated from openai.chat" in upstream.text
    upstream.click()
    exact = panel.find_elements(By.CSS_SELECTOR, "details[open] pre.code")
    sent = [r.body.decode() for r in ui_recording.vendors.anthropic.requests]
    assert any(block.text in sent for block in exact)  # the exact bytes the fallback got


def test_recorded_script_is_shown_as_text_and_never_runs(browser, ui_url):
    open_page(browser, ui_url + "#/session/inert-script")
    wait(browser, lambda d: rows(d, ".tl-row.call"))
    rows(browser, ".tl-row.call")[0].click()
    panel = wait(browser, lambda d: rows(d, ".detail[data-exchange]"))[0]
    shown = panel.find_element(By.CSS_SELECTOR, ".message .text")
    assert shown.text == SCRIPT_PROMPT  # visible, as text
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.scripts.length") == 1  # the UI's own only
    open_page(browser, ui_url + "#/?text=" + "%3Cscript%3E")
    wait(browser, lambda d: rows(d, "tr.session-row"))
    assert browser.execute_script("return window.__pwned") is None


def test_overview_draws_its_charts(browser, ui_url):
    open_page(browser, ui_url + "#/overview")
    charts = wait(browser, lambda d: rows(d, "svg.chart"))
    assert len(charts) == 4
    assert len(charts[0].find_elements(By.CSS_SELECTOR, "rect")) == 1  # one day of calls
    labels = [t.text for t in charts[1].find_elements(By.CSS_SELECTOR, "text.label")]
    assert labels == ["claude-sonnet-4-6", "gpt-4.1"]  # cost per model, most first
    tools = charts[3].find_elements(By.CSS_SELECTOR, "text.value")
    assert [t.text for t in tools] == ["50% · 1 of 2 runs", "0% · 0 of 2 runs", "0% · 0 of 2 runs"]
    screenshot(browser, "overview")


def texts(where, selector: str) -> list[str]:
    return [found.text for found in where.find_elements(By.CSS_SELECTOR, selector)]


def test_the_conversation_reads_as_a_chat_each_turn_once(browser, ui_url):
    open_page(browser, ui_url + "#/session/anthropic-tools")
    chat = wait(browser, lambda d: rows(d, ".chat-box .chat"))[0]
    more = [f"More, please ({n})." for n in range(5)]
    assert texts(chat, ".chat-user .chat-text") == [PLAN, *more]
    names = texts(chat, ".chat-tool .chat-tool-name")
    assert names == ["get_weather", "get_time", "read_file"]
    answers = texts(chat, ".chat-assistant .chat-text")
    assert len(answers) == 6 and answers[0] == "Echo: Plan my trip to Paris."
    (failed,) = chat.find_elements(By.CSS_SELECTOR, ".chat-tool.bad")
    assert failed.text.endswith("→ ERROR error: README.md: no such file")  # folded: a line
    failed.find_element(By.TAG_NAME, "summary").click()
    assert "result (error)\nerror: README.md: no such file" in failed.text

    open_page(browser, ui_url + "#/session/inert-script")
    chat = wait(browser, lambda d: rows(d, ".chat-box .chat"))[0]
    assert texts(chat, ".chat-user .chat-text")[0] == SCRIPT_PROMPT  # as text
    assert browser.execute_script("return window.__pwned") is None


def test_claude_codes_sub_agent_is_shown_inside_its_agent_call(
    browser, ui_url, ui_recording, tmp_path
):
    """The real Claude Code, recorded by the proxy the page reads: its Agent tool's
    sub-agent, nested; the screenshot of docs/ui.md's conversation."""
    result = run_claude(ui_recording.proxy.url, tmp_path, SUB_AGENT_PROMPT, ("Bash", "Agent"))
    session = result["session_id"]  # Claude Code names its session; taplog keeps the name
    answers = lambda s: sum(e["type"] == "llm.response" for e in s.get(session, []))  # noqa: E731
    ui_recording.proxy.wait_for(lambda s: answers(s) >= 4)
    open_page(browser, ui_url + f"#/session/{session}")
    chat = wait(browser, lambda d: rows(d, ".chat-box .chat"))[0]
    assert texts(chat, ":scope > .chat-user .chat-text") == [SUB_AGENT_PROMPT]
    assert texts(chat, ":scope > .chat-system .chat-role") == ["SYSTEM PROMPT"]  # collapsed
    agent = chat.find_element(By.CSS_SELECTOR, ":scope > .chat-tool")
    agent.find_element(By.TAG_NAME, "summary").click()
    inside = agent.find_element(By.CSS_SELECTOR, ".chat-agent")
    assert texts(inside, ".chat-user .chat-text") == [
        "Run the shell command, then report what it printed. !plan=Bash"
    ]
    bash = inside.find_element(By.CSS_SELECTOR, ".chat-tool")
    assert bash.text.endswith("→ taplog-ok")  # folded: the call and what it printed
    assert texts(inside, ".chat-assistant .chat-text") == ["Done: taplog-ok"]
    final = texts(chat, ":scope > .chat-assistant .chat-text")
    assert len(final) == 1 and final[0].startswith("Done: Done: taplog-ok")
    heading = browser.find_element(By.XPATH, "//h2[. = 'Conversation']")
    screenshot(browser, "chat", heading, height=1060)


def test_an_open_session_page_shows_a_new_call_as_it_is_recorded(
    browser,
    ui_url,
    ui_recording,
):
    open_page(browser, ui_url + "#/session/inert-script")
    wait(browser, lambda d: rows(d, ".live.on"))
    before = len(rows(browser, ".tl-row.call"))
    ask(ui_recording.proxy, "inert-script", "And one more question, live.")
    wait(browser, lambda d: len(rows(d, ".tl-row.call")) == before + 1)
    newest = rows(browser, ".tl-row.call")[-1]
    newest.click()
    panel = wait(browser, lambda d: rows(d, ".detail[data-exchange]"))[0]
    wait(browser, lambda d: "And one more question, live." in panel.text)


def test_a_fork_names_its_origin_and_shows_only_its_own_calls(browser, ui_url, ui_recording):
    """Last in this module: the fork adds a session to the recording the others read."""
    events = read_session(ui_recording.data_dir, "anthropic-tools")
    at = next(e for e in events if e["type"] == "tool.pre")["seq"]
    fork = fork_session(ui_recording.data_dir, "anthropic-tools", at, "anthropic-tools-retry")
    open_page(browser, ui_url + f"#/session/{fork}")
    card = wait(browser, lambda d: rows(d, ".card.origin"))[0]
    assert card.text.split("\n") == ["anthropic-tools", f"forked at seq {at} from"]
    assert rows(browser, ".tl-row.call") == []  # its calls so far are the origin's
    card.find_element(By.TAG_NAME, "a").click()
    wait(browser, lambda d: d.current_url.endswith("#/session/anthropic-tools"))
    wait(browser, lambda d: len(rows(d, ".tl-row.call")) == 8)


def test_a_long_session_is_shown_a_page_at_a_time(browser, reading_recording):
    """Its calls 200 at a time with links to the others, its conversation's last entries
    with a button for more, a long tool output clipped until asked for whole."""
    calls = TOOL_STEPS + 3
    open_page(browser, f"{reading_recording.proxy.url}/ui/#/session/{LONG}")
    pager = wait(browser, lambda d: rows(d, ".pager"))[0]
    assert f"calls {calls - 199} to {calls} of {calls}" in pager.text
    assert len(rows(browser, ".tl-row.call")) == 200
    pager.find_element(By.XPATH, ".//button[. = '← Earlier calls']").click()
    wait(
        browser,
        lambda d: f"calls 1 to {calls - 200} of" in d.find_element(By.CSS_SELECTOR, ".pager").text,
    )
    assert len(rows(browser, ".tl-row.call")) == calls - 200

    chat = wait(browser, lambda d: rows(d, ".chat-box .chat"))[0]
    shown = len(chat.find_elements(By.CSS_SELECTOR, ".chat-tool"))
    assert 40 <= shown < TOOL_STEPS
    earlier = browser.find_element(By.CSS_SELECTOR, ".chat-earlier")
    assert earlier.text.startswith("The last 100 entries.")
    earlier.find_element(By.TAG_NAME, "button").click()
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".chat-box .chat-tool")) > shown)

    listing = browser.find_elements(By.CSS_SELECTOR, ".chat-box .chat-tool")[-1]
    listing.find_element(By.TAG_NAME, "summary").click()
    listing.find_element(By.CSS_SELECTOR, "button.chat-whole").click()
    tool = wait(browser, lambda d: rows(d, ".detail[data-call]"))[0]
    wait(browser, lambda d: output(TOOL_STEPS - 1).splitlines()[-1] in tool.text)
