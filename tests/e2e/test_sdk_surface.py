"""Every method of both official SDKs, through taplog, reaches its own vendor with its own key
and nobody else's, and is recorded as its API (or passed through) without the key (issue #30).

The methods are not listed here: `tests/e2e/sdk_surface.py` finds them in the installed SDK
and calls each, so a new SDK method is covered the day the SDK is upgraded. Two
`RecordingVendor`s stand behind taplog, one per provider, and say what reached them. Each SDK
runs first straight at its own vendor (the baseline: the generic vendor answers every method,
so what fails through taplog is taplog's), then through taplog. `pytest -s` prints, per SDK
and mode, the methods found, called and skipped (and why).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from pathlib import Path

import duckdb
import httpx2
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from tests.disk import readable
from tests.e2e.sdk_surface import KEYS, PREFIXES, SDKS, Outcome, drive
from tests.fakes.harness import Taplog, start_taplog
from tests.fakes.recording_vendor import PROVIDERS, Reached, RecordingVendor
from tests.fakes.servers import ServerThread

# The SDKs' own deprecation warnings: deprecated methods are part of the surface too.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OTHER = {"openai": "anthropic", "anthropic": "openai"}
# The LLM APIs by (provider, method, path): what taplog records a call to them as.
LLM_APIS = {
    ("anthropic", "POST", "/v1/messages"): "anthropic.messages",
    ("openai", "POST", "/v1/chat/completions"): "openai.chat",
    ("openai", "POST", "/v1/responses"): "openai.responses",
}


def _serve(servers: ServerThread, provider: str) -> RecordingVendor:
    vendor = RecordingVendor(provider)
    vendor.url = servers.serve(vendor.app())
    return vendor


def _failures(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.call.label}: {o.error}" for o in outcomes if o.error]


def _target(request: httpx2.Request) -> str:
    return request.url.raw_path.decode()


def _family(target: str) -> str:
    """`/v1/files?beta=true` → `/v1/files?beta`: what a routing mistake is counted by."""
    path, _, query = target.partition("?")
    family = "/".join(path.split("/")[:3])
    return family + ("?beta" if "beta=true" in query else "")


def _fragments(provider: str) -> dict[str, str]:
    """Each key of `provider`'s SDK, and the pieces of it a log must not hold either."""
    found = {}
    for name, key in KEYS[provider].items():
        prefix = next(p for p in PREFIXES if key.startswith(p))
        found[f"{provider} {name}"] = key
        found[f"{provider} {name}, first 8 after {prefix}"] = key[len(prefix) :][:8]
        found[f"{provider} {name}, last 12"] = key[-12:]
    return found


def _holding(text: str | bytes, fragments: dict[str, str]) -> list[str]:
    if isinstance(text, bytes):
        return [name for name, fragment in fragments.items() if fragment.encode() in text]
    return [name for name, fragment in fragments.items() if fragment in text]


def _keys_in(reached: Reached, provider: str) -> list[str]:
    """Which of `provider`'s keys (or pieces of one) a request holds: headers, target, body."""
    text = f"{reached.headers} {reached.target}".encode() + reached.body
    return _holding(text, _fragments(provider))


def _report(provider: str, mode: str, outcomes: list[Outcome], vendors: dict) -> str:
    """`anthropic sync: 406 methods, 403 called (…), 3 skipped (3 client-side); requests
    to anthropic 408, to openai 0`, and the skipped methods, one a line."""
    methods = {o.call.method for o in outcomes}
    called = {o.call.method for o in outcomes if o.requests}
    skipped = {o.call.method: o.skipped for o in outcomes if o.call.method not in called}
    reasons = Counter(str(why).partition(" ")[0] for why in skipped.values())
    reached = ", ".join(f"to {p} {len(v.requests)}" for p, v in vendors.items())
    lines = [
        f"{provider} {mode}: {len(methods)} methods, {len(called)} called ({len(outcomes)} "
        f"calls, {sum(len(o.requests) for o in outcomes)} requests), {len(skipped)} skipped "
        f"({', '.join(f'{n} {why}' for why, n in sorted(reasons.items()))}); requests {reached}",
        *(f"  skipped {method}: {str(why)[:90]}" for method, why in sorted(skipped.items())),
    ]
    return "\n".join(lines)


def _routing(provider: str, sent: list[httpx2.Request], vendors: dict) -> list[str]:
    """Each request reached its own vendor as the SDK sent it, with the SDK's own key."""
    own, other = vendors[provider], vendors[OTHER[provider]]
    strays = Counter(_family(r.target) for r in other.requests)
    if strays:
        families = ", ".join(f"{family} {n}" for family, n in strays.most_common())
        return [f"{sum(strays.values())} of {len(sent)} reached {other.provider}: {families}"]
    reached: dict[tuple[str, str], deque[Reached]] = defaultdict(deque)
    for got in own.requests:
        reached[(got.method, got.target)].append(got)
    problems = []
    for request in sent:
        same = reached[(request.method, _target(request))]
        if not same:
            problems.append(f"{request.method} {_target(request)}: never reached {provider}")
            continue
        got = same.popleft()
        keys = {h: got.headers.get(h) for h in ("authorization", "x-api-key")}
        if keys != {h: request.headers.get(h) for h in keys} or not _keys_in(got, provider):
            problems.append(f"{got.method} {got.target}: not the key the SDK sent")
        if foreign := _keys_in(got, OTHER[provider]):
            problems.append(f"{got.method} {got.target}: {foreign}")
    extra = [f"{r.method} {r.target}" for same in reached.values() for r in same]
    return problems + [f"{what}: reached {provider}, never sent" for what in extra]


def _recording(provider: str, sent: list[httpx2.Request], taplog: Taplog) -> list[str]:
    """An `llm.request` per request, of its provider, as its API or passed through."""
    try:
        taplog.wait_answers(len(sent))
    except AssertionError:  # (its message holds the whole log)
        answered = len(taplog.events("call.answered"))
        return [f"{answered} calls answered in the log, not the {len(sent)} sent"]
    logged = taplog.events("llm.request")
    if Counter((e["method"], e["path"]) for e in logged) != Counter(
        (r.method, _target(r)) for r in sent
    ):
        return [f"{len(logged)} requests recorded, not the {len(sent)} sent"]
    wrong: Counter[str] = Counter()
    for event in logged:
        api = LLM_APIS.get((provider, event["method"], event["path"].partition("?")[0]))
        passed = event["api"] == "passthrough" or (
            event["api"].startswith(f"{provider}.") and event["api"] not in LLM_APIS.values()
        )
        if event["provider"] != provider or not (event["api"] == api if api else passed):
            as_what = f"{event['provider']} {event['api']}"
            wrong[f"{_family(event['path'])} recorded as {as_what}"] += 1
    return [f"{what}: {n}" for what, n in wrong.most_common()]


def _answers(taplog: Taplog) -> list[str]:
    """Every answer recorded as the whole answer it was (the vendor answered each in full)."""
    requests = {e["exchange"]: e for e in taplog.events("llm.request")}
    broken = Counter(
        f"{_family(requests[e['exchange']]['path'])}"
        f"{' stream' if e.get('stream') else ''} recorded {e['outcome']}"
        for e in taplog.events("llm.response")
        if e["outcome"] != "ok"
    )
    return [f"{what}: {n}" for what, n in broken.most_common()]


def _stored_keys(data_dir: Path, requests: int) -> list[str]:
    """Keys (or pieces of one) in any file of the data dir, `taplog compact`'s Parquet
    included, and in its rows read back."""
    fragments = _fragments("openai") | _fragments("anthropic")
    compacted = CliRunner().invoke(main, ["compact", "--data-dir", str(data_dir)])
    assert compacted.exit_code == 0, compacted.output
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    problems = [
        f"{p.relative_to(data_dir)}: {found}"
        for p in files
        if (found := _holding(readable(p), fragments))
    ]
    parquet = f"read_parquet('{data_dir}/compacted/**/*.parquet', union_by_name = true)"
    rows = duckdb.sql(f"SELECT * FROM {parquet}").fetchall()
    logged = duckdb.sql(f"SELECT count(*) FROM {parquet} WHERE type = 'llm.request'").fetchall()
    assert logged == [(requests,)], "the Parquet holds every request"
    if found := _holding(str(rows), fragments):
        problems.append(f"compacted rows: {found}")
    return problems


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_sdk_method_reaches_its_own_vendor_with_its_own_key(
    provider: str, mode: str, tmp_path: Path
) -> None:
    sdk = SDKS[provider]
    files = tmp_path / "files"  # what the upload helpers read from disk
    files.mkdir()
    (files / "x.txt").write_text("x")
    with ServerThread() as servers:
        vendors = {p: _serve(servers, p) for p in PROVIDERS}
        own = vendors[provider]

        # the baseline: straight at its own vendor, every method answered
        direct = drive(sdk, mode, own.url, files)
        failures = _failures(direct)
        assert not failures, "straight at the vendor:\n" + "\n".join(failures)
        assert len(own.requests) == sum(len(o.requests) for o in direct)
        own.requests.clear()

        taplog = start_taplog(
            servers,
            tmp_path / "data",
            openai_base=f"{vendors['openai'].url}/v1",
            anthropic_base=vendors["anthropic"].url,
        )
        outcomes = drive(sdk, mode, taplog.url, files)
        print(f"\n{_report(provider, mode, outcomes, vendors)}")
        assert [o.skipped for o in outcomes] == [o.skipped for o in direct]
        sent = [request for outcome in outcomes for request in outcome.requests]
        problems = {
            "calls that failed": _failures(outcomes),
            "requests routed wrong": _routing(provider, sent, vendors),
            "requests recorded wrong": _recording(provider, sent, taplog),
            "answers recorded broken": _answers(taplog),
            "keys in the data dir": _stored_keys(taplog.data_dir, len(sent)),
        }
    found = {what: lines for what, lines in problems.items() if lines}
    assert not found, "\n".join(
        f"{what}:\n  " + "\n  ".join(lines) for what, lines in found.items()
    )
