"""The web UI's endpoints and `taplog tail`, over sessions recorded from real SDK traffic.

The pages themselves are driven in a real browser in test_ui_browser.py; here
the JSON and the live stream are checked against the log and the views.
"""

from __future__ import annotations

import subprocess
import threading
import time

import httpx
import openai
import orjson
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from taplog.proxy.cli.main import main
from taplog.recorder.query.connect import connect
from taplog.recorder.store.reader import read_session
from tests.disk import log_of, readable
from tests.fakes.harness import TAPLOG, serve_on_fake, start_on_fake, taplog_env
from tests.fakes.keys import OPENAI_KEY
from tests.fakes.ui_traffic import SESSIONS, ask, openai_client

TOKEN = "ui-test-token-0123456789abcdef"


def api(recorded, path: str, **params: str) -> httpx.Response:
    return httpx.get(f"{recorded.proxy.url}/ui/api/{path}", params=params)


def test_sessions_list_agrees_with_the_sessions_view(ui_recording):
    listed = api(ui_recording, "sessions").json()
    rows = {row["session"]: row for row in listed["sessions"]}
    assert sorted(rows) == sorted(SESSIONS)
    con = connect(ui_recording.data_dir)
    for session, calls, cost, tool_errors, failovers in con.sql(
        "SELECT session, calls, cost_usd, tool_errors, failovers FROM sessions"
    ).fetchall():
        assert (rows[session]["calls"], rows[session]["cost_usd"]) == (calls, cost)
        assert (rows[session]["tool_errors"], rows[session]["failovers"]) == (
            tool_errors,
            failovers,
        )
    assert listed["models"] == ["claude-sonnet-4-6", "gpt-4.1"]
    assert rows["failover-chat"]["failovers"] == 8 and rows["anthropic-tools"]["tool_errors"] == 1


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"model": "gpt-4.1"}, ["inert-script"]),
        ({"text": "<SCRIPT>window.__pwned"}, ["inert-script"]),
        ({"text": 'its "quotes"'}, ["inert-script"]),
        ({"text": "plan my trip"}, ["anthropic-tools", "failover-chat"]),
        ({"text": "nobody wrote this"}, []),
        ({"since": "2999-01-01T00:00:00Z"}, []),
        ({"until": "2000-01-01T00:00:00+01:00"}, []),
    ],
)
def test_sessions_filter_by_model_prompt_text_and_time(ui_recording, params, expected):
    found = api(ui_recording, "sessions", **params).json()["sessions"]
    assert sorted(row["session"] for row in found) == expected


def test_sessions_sort_by_any_column_both_ways(ui_recording):
    for column, key in (("cost_usd", "cost_usd"), ("calls", "calls"), ("session", "session")):
        up = api(ui_recording, "sessions", sort=column, order="asc").json()["sessions"]
        down = api(ui_recording, "sessions", sort=column, order="desc").json()["sessions"]
        values = [row[key] for row in up]
        assert values == sorted(values)
        assert [row[key] for row in down] == sorted(values, reverse=True)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sort": "cost_usd; DROP TABLE x"}, "sort"),
        ({"order": "sideways"}, "order"),
        ({"limit": "lots"}, "limit"),
        ({"since": "yesterday"}, "since"),
    ],
)
def test_bad_parameters_get_a_400_naming_them(ui_recording, params, named):
    response = api(ui_recording, "sessions", **params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(named)


def test_session_detail_has_every_call_tool_run_and_failover(ui_recording):
    events = read_session(ui_recording.data_dir, "failover-chat")
    detail = api(ui_recording, "sessions/failover-chat").json()
    exchanges = {e["exchange"] for e in events if e["type"] == "llm.request"}
    assert {call["exchange"] for call in detail["calls"]} == exchanges
    assert [t["tool_name"] for t in detail["tools"]] == ["get_weather", "get_time", "read_file"]
    failovers = [e["seq"] for e in events if e["type"] == "failover"]
    assert [m["seq"] for m in detail["marks"] if m["type"] == "failover"] == failovers
    assert detail["last_seq"] == events[-1]["seq"]
    assert detail["page"] == {"start": 0, "end": 8, "total": 8, "limit": 200, "until": None}
    tools = api(ui_recording, "sessions/anthropic-tools").json()["tools"]
    failed = [t for t in tools if t["is_error"]]
    assert [(t["tool_name"], t["printed_preview"]) for t in failed] == [
        ("read_file", "error: README.md: no such file")
    ]
    assert all(t["duration_ms"] > 0 and t["arguments_preview"] for t in tools)
    whole = api(ui_recording, f"sessions/anthropic-tools/tools/{failed[0]['call_id']}").json()
    assert (whole["result"], whole["printed"]) == ("error: README.md: no such file",) * 2
    assert whole["arguments"] == orjson.loads(failed[0]["arguments_preview"])


@pytest.mark.parametrize("session", ["no-such-session", "..", "a/b", "x" * 200, "%2e%2e%2fx"])
def test_unknown_or_malformed_sessions_are_404_and_never_proxied(ui_recording, session):
    vendors = ui_recording.vendors
    before = len(vendors.openai.requests) + len(vendors.anthropic.requests)
    response = httpx.get(f"{ui_recording.proxy.url}/ui/api/sessions/{session}")
    assert response.status_code == 404
    assert len(vendors.openai.requests) + len(vendors.anthropic.requests) == before


def test_call_detail_shows_only_what_changed_and_the_exact_translated_body(ui_recording):
    calls = api(ui_recording, "sessions/anthropic-tools").json()["calls"]
    first = api(ui_recording, f"sessions/anthropic-tools/calls/{calls[0]['exchange']}").json()
    assert first["changes"]["first_call"] and first["changes"]["kept"] == 0
    second = api(ui_recording, f"sessions/anthropic-tools/calls/{calls[1]['exchange']}").json()
    changes = second["changes"]
    assert (changes["kept"], [m["role"] for m in changes["new"]]) == (1, ["assistant", "user"])
    results = changes["new"][1]["content"]
    assert [r["content"] for r in results] == ["sunny, 21°C", "12:00"]
    answer = next(e for e in second["events"] if e["type"] == "llm.response")
    assert answer["stream"] and answer["sse"] and answer["usage"]["input_tokens"] > 0

    failover_calls = api(ui_recording, "sessions/failover-chat").json()["calls"]
    sent = [r.body for r in ui_recording.vendors.anthropic.requests if r.path == "/v1/messages"]
    for call in failover_calls:
        found = api(ui_recording, f"sessions/failover-chat/calls/{call['exchange']}").json()
        translated = [e for e in found["events"] if e.get("translated_from")]
        assert [e["translated_from"] for e in translated] == ["openai.chat"]
        assert translated[0]["upstream_body"].encode() in sent  # byte for byte what was sent


def test_overview_agrees_with_sql(ui_recording):
    found = api(ui_recording, "overview").json()
    con = connect(ui_recording.data_dir)
    (cost, calls) = con.execute("SELECT sum(cost_usd), count(*) FROM llm_calls").fetchone()
    assert found["totals"]["calls"] == calls == 17
    assert sum(day["cost_usd"] for day in found["cost_per_day"]) == pytest.approx(cost)
    assert {m["model"]: m["calls"] for m in found["cost_per_model"]} == {
        "claude-sonnet-4-6": 16,
        "gpt-4.1": 1,
    }
    latency = {m["model"]: m for m in found["latency_per_model"]}
    assert all(m["p50_ms"] <= m["p90_ms"] <= m["p99_ms"] for m in latency.values())
    tools = {t["tool_name"]: (t["runs"], t["errors"]) for t in found["tool_errors"]}
    assert tools == {"read_file": (2, 1), "get_weather": (2, 0), "get_time": (2, 0)}
    assert (
        api(ui_recording, "overview", since="2999-01-01T00:00:00Z").json()["totals"]["calls"] == 0
    )


def test_ui_requests_are_not_calls_and_never_reach_a_vendor(ui_recording):
    vendors, url = ui_recording.vendors, ui_recording.proxy.url
    before = len(vendors.openai.requests) + len(vendors.anthropic.requests)
    for path in ("", "/", "/static/main.js", "/api/sessions", "/api/overview"):
        assert httpx.get(f"{url}/ui{path}").status_code in (200, 302)
    assert len(vendors.openai.requests) + len(vendors.anthropic.requests) == before
    with httpx.stream("GET", f"{url}/ui/api/sessions/inert-script/events", timeout=10):
        metrics = httpx.get(f"{url}/metrics").text  # while a page follows a session
    samples = {s.name: s.value for f in text_string_to_metric_families(metrics) for s in f.samples}
    assert (samples["taplog_calls_in_flight"], samples["taplog_open_streams"]) == (0, 0)


def test_pages_forbid_anything_but_their_own_files(ui_recording):
    page = httpx.get(f"{ui_recording.proxy.url}/ui/")
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "http" not in page.text.replace("http-equiv", "")  # no external URL to fetch
    redirect = httpx.get(f"{ui_recording.proxy.url}/ui")
    assert (redirect.status_code, redirect.headers["location"]) == (302, "ui/")


def test_a_host_that_is_not_loopback_is_refused(ui_recording):
    rebound = httpx.get(
        f"{ui_recording.proxy.url}/ui/api/sessions", headers={"Host": "attacker.example:8787"}
    )
    assert rebound.status_code == 421
    assert "sessions" not in rebound.text


def _sse(url: str, count: int, headers: dict[str, str] | None = None) -> list[tuple[int, dict]]:
    """The first `count` events of a live stream: (id, event)."""
    found: list[tuple[int, dict]] = []
    with httpx.stream("GET", url, headers=headers, timeout=10) as response:
        assert response.headers["content-type"] == "text/event-stream"
        ident = None
        for line in response.iter_lines():
            if line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("data: "):
                found.append((ident, orjson.loads(line[6:])))
                if len(found) == count:
                    return found
    return found


def _proxy_with_ui(servers, fake, tmp_path, **settings):
    return start_on_fake(servers, fake, tmp_path / "data", ui=True, **settings)


def test_live_stream_resumes_from_last_event_id_without_gaps(servers, fake, tmp_path):
    proxy = _proxy_with_ui(servers, fake, tmp_path)
    ask(proxy, "live", "first")
    proxy.flush()
    url = f"{proxy.url}/ui/api/sessions/live/events"
    first = _sse(url + "?from=0", 4)
    assert [seq for seq, _ in first] == [1, 2, 3, 4]
    kinds = ["session.started", "llm.request", "llm.response", "call.answered"]
    assert [e["type"] for _, e in first] == kinds

    later: list[tuple[int, dict]] = []
    reader = threading.Thread(
        target=lambda: later.extend(_sse(url, 7, {"Last-Event-ID": "2"})), daemon=True
    )
    reader.start()
    time.sleep(0.5)  # the reader has caught up and now follows the growing log
    ask(proxy, "live", "second")
    ask(proxy, "live", "third")
    reader.join(10)
    assert [seq for seq, _ in later] == [3, 4, 5, 6, 7, 8, 9]
    kinds = ["llm.response", "call.answered", "llm.request"]
    assert [e["type"] for _, e in later] == [*kinds, *kinds, "llm.response"]
    assert later[2][1]["body"]["messages"][-1]["content"] == "second"


def test_live_stream_gives_each_request_whole_though_the_log_stores_resent_history_once(
    servers, fake, tmp_path
):
    proxy = _proxy_with_ui(servers, fake, tmp_path)
    client = openai.OpenAI(base_url=f"{proxy.url}/s/grow/v1", api_key=OPENAI_KEY, max_retries=0)
    messages: list[dict] = []
    for turn in ("one", "two", "three"):
        messages.append({"role": "user", "content": turn})
        answer = client.chat.completions.create(model="gpt-4.1", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    proxy.flush()
    stored = readable(log_of(tmp_path / "data", "grow")).splitlines()
    assert b'"transcript":{"base":5,"keep":3,"length":5}' in stored[-3]  # only what is new
    followed = [event for _, event in _sse(f"{proxy.url}/ui/api/sessions/grow/events", 10)]
    assert followed == read_session(tmp_path / "data", "grow")
    assert [len(e["body"]["messages"]) for e in followed if e["type"] == "llm.request"] == [
        1,
        3,
        5,
    ]


def test_live_stream_refuses_a_bad_seq_and_an_unknown_session(ui_recording):
    base = f"{ui_recording.proxy.url}/ui/api/sessions"
    assert httpx.get(f"{base}/inert-script/events", params={"from": "-1"}).status_code == 400
    assert httpx.get(f"{base}/nobody/events").status_code == 404


def test_tokens_guard_the_ui_like_metrics(servers, fake, tmp_path):
    proxy = _proxy_with_ui(servers, fake, tmp_path, auth_token=TOKEN)
    refused = httpx.get(f"{proxy.url}/ui/api/sessions")
    assert refused.status_code == 401 and "/t/<token>/ui/" in refused.text
    assert TOKEN not in refused.text
    assert httpx.get(f"{proxy.url}/t/wrong-token-0123456789/ui/").status_code == 401
    assert httpx.get(f"{proxy.url}/t/{TOKEN}/ui/api/sessions").json() == {
        "sessions": [],
        "models": [],
    }
    page = httpx.get(f"{proxy.url}/t/{TOKEN}/ui/")
    assert page.status_code == 200 and page.headers["referrer-policy"] == "no-referrer"
    assert httpx.get(f"{proxy.url}/ui/", headers={"X-Taplog-Token": TOKEN}).status_code == 200
    assert fake.requests == []  # none of it went to a vendor


def test_serve_ui_prints_where_the_pages_are_and_serves_them(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data", "--ui")
    try:
        page = next(line for line in served.banner if "web UI" in line).split()[-1]
        assert page == served.url + "/ui/"
        assert "<title>taplog</title>" in httpx.get(page).text
        assert httpx.get(page + "api/sessions").json() == {"sessions": [], "models": []}
        client = openai.OpenAI(
            base_url=f"{served.url}/s/watched/v1", api_key=OPENAI_KEY, max_retries=0
        )
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
        )
        log = log_of(tmp_path / "data", "watched")
        while not log.exists():
            time.sleep(0.02)
        with httpx.stream("GET", page + "api/sessions/watched/events", timeout=30) as live:
            assert live.status_code == 200
            stopping = time.monotonic()
            code, _ = served.stop()  # while a page follows the session
        assert code == 0 and time.monotonic() - stopping < 10  # the page did not hold it up
    finally:
        if served.process.poll() is None:
            served.stop()


def test_ui_command_refuses_to_listen_beyond_loopback_without_tokens(tmp_path):
    result = subprocess.run(
        [TAPLOG, "ui", "--host", "0.0.0.0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=taplog_env(),
        timeout=30,
    )
    assert result.returncode != 0
    assert "read every recorded session" in result.stderr
    assert "/t/<token>/ui/" in result.stderr and "TAPLOG_AUTH_TOKEN" in result.stderr


def test_tail_prints_the_last_events_with_control_characters_escaped(servers, fake, tmp_path):
    proxy = start_on_fake(servers, fake, tmp_path / "data")
    ask(proxy, "tailed", "hello")
    openai_client(proxy, "tailed").chat.completions.create(
        model="gpt-4.1\x1b[2J", messages=[{"role": "user", "content": "hi"}]
    )
    proxy.flush()
    args = ["tail", "tailed", "--data-dir", str(proxy.data_dir)]
    lines = CliRunner().invoke(main, [*args, "-n", "3"]).output.splitlines()
    assert len(lines) == 3
    assert [line.split()[1:3] for line in lines] == [
        ["#5", "llm.request"],
        ["#6", "llm.response"],
        ["#7", "call.answered"],
    ]
    assert all("\x1b" not in line and "gpt-4.1\\x1b[2J" in line for line in lines[:2])
    missing = CliRunner().invoke(main, ["tail", "nobody", "--data-dir", str(proxy.data_dir)])
    assert missing.exit_code == 1 and "no session 'nobody'" in missing.output


def test_tail_follow_prints_new_events_as_they_are_recorded(servers, fake, tmp_path):
    proxy = start_on_fake(servers, fake, tmp_path / "data")
    ask(proxy, "followed", "first")
    proxy.flush()
    follower = subprocess.Popen(
        [TAPLOG, "tail", "followed", "-f", "-n", "0", "--data-dir", str(proxy.data_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env=taplog_env(),
    )
    stuck = threading.Timer(20, follower.kill)  # a follower that never prints fails, not hangs
    stuck.start()
    try:
        time.sleep(1)  # started and following
        ask(proxy, "followed", "second")
        first, second = follower.stdout.readline(), follower.stdout.readline()
    finally:
        stuck.cancel()
        follower.terminate()
        follower.wait(10)
    assert "#5" in first and "llm.request" in first
    assert "#6" in second and "llm.response" in second and "200 ok" in second
