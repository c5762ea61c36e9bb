"""The UI's answers stay the size of a screen (issue #31): the sessions list, a long
session's page, its tool runs and its conversation, over the sessions of
tests/fakes/reading_traffic.py, with the request bodies each answer read."""

from __future__ import annotations

import httpx
import pytest

from taplog.recorder.query.browse import PREVIEW
from taplog.recorder.store.reader import read_session
from tests.fakes.reading_traffic import (
    LONG,
    LONG_OUTPUT,
    SHORTS,
    TOOL_STEPS,
    bodies_read,
    output,
    prompt,
)

pytestmark = pytest.mark.slow
CALLS = TOOL_STEPS + 3  # the quota probe, the title, the loop's calls and its answer


def api(recorded, path: str, **params: str | int) -> httpx.Response:
    return httpx.get(f"{recorded.proxy.url}/ui/api/{path}", params=params, timeout=30)


def test_the_list_shows_each_persons_prompt_from_a_body_each(reading_recording, counted):
    listed = api(reading_recording, "sessions", limit=20).json()["sessions"]
    prompts = {row["session"]: row["prompt"] for row in listed}
    assert len(prompts) == SHORTS + 1 and prompts[LONG] == prompt(LONG, TOOL_STEPS)
    assert bodies_read(counted) == SHORTS + 1


def test_a_long_session_comes_a_page_of_calls_at_a_time(reading_recording, counted):
    last = api(reading_recording, f"sessions/{LONG}")
    found = last.json()
    assert found["page"] == {
        "start": CALLS - 200, "end": CALLS, "total": CALLS, "limit": 200, "until": None
    }  # fmt: skip
    assert len(found["calls"]) == 200 and found["summary"]["calls"] == CALLS
    first = api(reading_recording, f"sessions/{LONG}", before=CALLS - 200).json()
    assert first["page"]["start"] == 0 and len(first["calls"]) == CALLS - 200
    assert first["page"]["until"] == found["calls"][0]["started_at"]
    tools = [t["call_id"] for page in (first, found) for t in page["tools"]]
    events = read_session(reading_recording.data_dir, LONG)
    assert tools == [e["call_id"] for e in events if e["type"] == "tool.pre"]  # each once
    assert len(tools) == TOOL_STEPS
    listing = found["tools"][-1]  # the loop's last tool printed a long listing
    assert listing["printed_preview"] == output(TOOL_STEPS - 1)[: PREVIEW - 1] + "…"
    assert len(last.content) < 200 * 1500  # a row a call, clipped tool runs
    assert bodies_read(counted) == 0

    whole = api(reading_recording, f"sessions/{LONG}/tools/{listing['call_id']}").json()
    assert whole["printed"] == whole["result"] == output(TOOL_STEPS - 1)
    assert len(whole["printed"]) >= LONG_OUTPUT
    assert api(reading_recording, f"sessions/{LONG}/tools/nope").status_code == 404


def test_the_conversation_comes_a_page_at_a_time(reading_recording, counted):
    page = api(reading_recording, f"sessions/{LONG}/chat").json()
    assert page["entries"] == 100 and page["earlier"] is not None
    (thread,) = page["threads"]
    assert thread["entries"][-1]["text"] == "Echo: Tidy up the parser of long-agent."
    listing = [e for e in thread["entries"] if e["kind"] == "tool"][-1]
    assert listing["clipped"] and listing["printed"] == output(TOOL_STEPS - 1)[: PREVIEW - 1] + "…"
    assert "result" not in listing  # whole from …/tools/<call_id>
    assert bodies_read(counted) <= 3

    before = api(reading_recording, f"sessions/{LONG}/chat", before=page["earlier"]).json()
    assert before["entries"] >= 100 and before["earlier"] < page["earlier"]
    everything = api(reading_recording, f"sessions/{LONG}/chat", last=100_000).json()
    assert everything["earlier"] is None
    users = [e["text"] for t in everything["threads"] for e in t["entries"] if e["kind"] == "user"]
    assert users[0] == "quota" and prompt(LONG, TOOL_STEPS) in users


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        (f"sessions/{LONG}", {"limit": "0"}, "limit"),
        (f"sessions/{LONG}", {"before": "x"}, "before"),
        (f"sessions/{LONG}/chat", {"last": "-3"}, "last"),
        (f"sessions/{LONG}/chat", {"before": "soon"}, "before"),
    ],
)
def test_bad_page_parameters_get_a_400_naming_them(reading_recording, path, params, named):
    response = api(reading_recording, path, **params)
    assert response.status_code == 400 and response.json()["error"].startswith(named)
