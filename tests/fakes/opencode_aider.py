"""opencode and aider, run as a user runs them, against taplog (`tests.fakes.clis` runs Claude
Code, Codex and the Gemini CLI the same way).

Each runs non-interactively in a scratch directory (its working directory `work/` and its
home `home/` under it) with the fake vendors behind taplog. `.ci/run` installs both pinned:
opencode with npm into `.ci/clis` beside the other CLIs, aider (which pins many packages,
litellm 1.81.10 among them) into a venv of its own, `.ci/clis/aider`, which git and ruff
pass over like the rest of `.ci/clis`. Elsewhere the tests that need them are skipped with
how to install them; `TAPLOG_CLIS` names another `node_modules/.bin` (as for the others),
`TAPLOG_AIDER` another aider.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import ROOT
from tests.fakes.clis import BIN, run
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

OPENCODE = BIN / "opencode"
AIDER = Path(os.environ.get("TAPLOG_AIDER", ROOT / ".ci/clis/aider/bin/aider"))
OPENCODE_MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-4.1"}
AIDER_MODELS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-4.1"}
OPENCODE_PROMPT = "Run the shell command, then report what it printed. !plan=bash"
OPENCODE_SUB_AGENT_PROMPT = "Have a sub-agent run the shell command. !plan=task"


def needs_opencode() -> None:
    if not OPENCODE.exists():
        pytest.skip(
            "opencode is not installed here: npm install --prefix .ci/clis opencode-ai@1.18.33 "
            "(as .ci/run does)"
        )


def needs_aider() -> None:
    if not AIDER.exists():
        pytest.skip(
            "aider is not installed here: python3 -m venv .ci/clis/aider && "
            ".ci/clis/aider/bin/pip install aider-chat==0.86.2 (as .ci/run does)"
        )


def run_opencode(
    base_url: str, scratch: Path, provider: str, prompt: str = OPENCODE_PROMPT
) -> list[dict]:
    """`opencode run PROMPT` with `provider`'s model through `base_url`, its tools allowed;
    its JSON events. Its title is given (`--title`): asked of a model, the title would be
    one more call, which the fake answers from the prompt like any other."""
    needs_opencode()
    work = scratch / "work"
    work.mkdir(parents=True)
    config = {
        "autoupdate": False,
        "share": "disabled",
        "model": OPENCODE_MODELS[provider],
        "provider": {
            "anthropic": {"options": {"baseURL": f"{base_url}/v1", "apiKey": ANTHROPIC_KEY}},
            "openai": {"options": {"baseURL": f"{base_url}/v1", "apiKey": OPENAI_KEY}},
        },
        "permission": {"bash": "allow", "edit": "allow"},
    }
    (work / "opencode.json").write_text(json.dumps(config))
    home = scratch / "home"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        # its bundled model list, no updates, downloads or sharing: it talks to taplog only
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    # Word by word: opencode quotes a message argument that holds a space, and the quote
    # would end up in the fake's plan.
    argv = [str(OPENCODE), "run", "--format", "json", "--title", "taplog", *prompt.split()]
    done = run(argv, env, scratch)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_aider(base_url: str, scratch: Path, provider: str, *prompts: str) -> str:
    """aider with `provider`'s model through `base_url` (…/v1 for OpenAI), each prompt typed
    in turn (then `/exit`), no git, no edits to make; what it printed."""
    needs_aider()
    home = scratch / "home"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TERM": "dumb",
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "ANTHROPIC_API_BASE": base_url,
        "OPENAI_API_KEY": OPENAI_KEY,
        "OPENAI_API_BASE": f"{base_url}/v1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm's bundled prices, not GitHub's
        "NO_PROXY": "127.0.0.1,localhost",
    }
    argv = [
        str(AIDER),
        *("--model", AIDER_MODELS[provider], "--map-tokens", "0", "--no-pretty"),
        *("--yes-always", "--no-git", "--no-auto-commits", "--analytics-disable"),
        *("--no-check-update", "--no-show-model-warnings", "--no-show-release-notes"),
    ]
    work = scratch / "work"
    work.mkdir(parents=True)
    home.mkdir()
    done = subprocess.run(
        argv,
        cwd=work,
        env=env,
        input="".join(f"{prompt}\n" for prompt in (*prompts, "/exit")),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout
