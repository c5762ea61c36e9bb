"""The real coding agents, Claude Code, Codex and the Gemini CLI, run as a user runs them,
against taplog.

Each CLI runs non-interactively in a scratch directory (its working directory `work/`
and its home `home/` under it) and works through a one-tool loop of the fake vendor:
the model asks for one harmless shell `echo`, the CLI runs it and sends the result, the
model answers with it ("Done: … taplog-ok"). `.ci/run` installs the pinned CLIs with npm
into `.ci/clis` (see there); elsewhere the tests that need them are skipped with how to
install them, or `TAPLOG_CLIS` names another `node_modules/.bin`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from taplog.proxy.failover.rules import load_fallbacks
from tests import ROOT
from tests.fakes.harness import start_taplog
from tests.fakes.keys import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

BIN = Path(os.environ.get("TAPLOG_CLIS", ROOT / ".ci/clis/node_modules/.bin"))
CLAUDE, CODEX, GEMINI = BIN / "claude", BIN / "codex", BIN / "gemini"
PROMPT = "Run the shell command, then report what it printed. !plan={tool}"
CLAUDE_PROMPT, CODEX_PROMPT = PROMPT.format(tool="Bash"), PROMPT.format(tool="exec_command")
GEMINI_PROMPT = PROMPT.format(tool="run_shell_command")
# Claude Code's Agent tool starts a sub-agent whose own prompt plans the shell echo
# (tests/fakes/vendor.py): its calls go through taplog in the same session.
SUB_AGENT_PROMPT = "Have a sub-agent run the shell command. !plan=Agent"
QUIET = {  # no telemetry, updates or error reports: the CLIs talk to the fakes only
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def needs(cli: Path) -> None:
    if not cli.exists():
        pytest.skip(
            f"{cli.name} is not installed here: npm install --prefix .ci/clis "
            "@anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0 @google/gemini-cli@0.61.0 "
            "(as .ci/run does)"
        )


def proxy_for(servers, vendors, data: Path, *fallback: str, **options):
    """taplog in front of the three fakes, with `--fallback` rules as a user would type them."""
    bases = {
        "openai_base": f"{vendors.openai.url}/v1",
        "anthropic_base": vendors.anthropic.url,
        "gemini_base": vendors.gemini.url,
    }
    fallbacks = load_fallbacks(
        bases["openai_base"], bases["anthropic_base"], {}, fallback, bases["gemini_base"]
    )
    return start_taplog(servers, data, fallbacks, **bases, **options)


def run_claude(
    base_url: str,
    scratch: Path,
    prompt: str = CLAUDE_PROMPT,
    tools: tuple[str, ...] = ("Bash",),
    succeeds: bool = True,
) -> dict:
    """`claude -p PROMPT` through `base_url`, allowed `tools`; its JSON result (of a run that
    exits 0, unless not expected to `succeed`)."""
    needs(CLAUDE)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch / "home"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        **QUIET,
    }
    argv = [str(CLAUDE), "-p", prompt, "--output-format", "json"]
    done = run([*argv, "--allowedTools", *tools], env, scratch, succeeds)
    return json.loads(done.stdout)


def run_codex(
    base_url: str,
    scratch: Path,
    directives: str = "",
    sandbox: str | None = None,
    prompt: str = CODEX_PROMPT,
    timeout: float = 180,
) -> list[dict]:
    """`codex exec PROMPT` through `base_url` (…/v1), in its own `--sandbox` mode unless
    given one (its default, read-only, lets no command write); its JSON events."""
    needs(CODEX)
    home = scratch / "codex"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        f"""model = "gpt-5.5"
model_provider = "taplog"
check_for_update_on_startup = false

[model_providers.taplog]
name = "taplog"
base_url = "{base_url}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
"""
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch / "home"),
        "CODEX_HOME": str(home),
        "OPENAI_API_KEY": OPENAI_KEY,
    }
    argv = [str(CODEX), "exec", "--json", "--skip-git-repo-check"]
    argv += ["--sandbox", sandbox] if sandbox else []
    done = run([*argv, f"{prompt} {directives}"], env, scratch, timeout=timeout)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_gemini(base_url: str, scratch: Path, prompt: str = GEMINI_PROMPT) -> dict:
    """`gemini -p PROMPT` through `base_url` (as GOOGLE_GEMINI_BASE_URL), its tools run without
    asking; its JSON result. Its settings keep every call on the base URL: an API key's
    auth chosen outright (a base URL alone makes it pick a gateway auth it then refuses),
    no usage statistics or telemetry (Google's own hosts)."""
    needs(GEMINI)
    home = scratch / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
        "GEMINI_API_KEY": GEMINI_KEY,
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_NO_RELAUNCH": "true",  # one process, no re-launch with other flags
        "NO_PROXY": "127.0.0.1,localhost",
    }
    argv = [str(GEMINI), "-p", prompt, "-m", "gemini-2.5-flash", "--yolo", "--skip-trust"]
    done = run([*argv, "--output-format", "json"], env, scratch)
    return json.loads(done.stdout)


def run(
    argv: list[str], env: dict[str, str], scratch: Path, succeeds: bool = True, timeout: float = 180
) -> subprocess.CompletedProcess:
    work = scratch / "work"
    work.mkdir(parents=True, exist_ok=True)
    (scratch / "home").mkdir(exist_ok=True)
    done = subprocess.run(
        argv,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode == 0) is succeeds, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def codex_answer(events: list[dict]) -> str:
    messages = [
        e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"
    ]
    return messages[-1] if messages else ""
