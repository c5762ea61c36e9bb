"""Sessions for the web UI's tests, recorded from real SDK traffic through taplog.

Three sessions over two fake vendors, each with something the pages must show:

    inert-script     a prompt that carries a <script> element, to prove it stays text
    anthropic-tools  an Anthropic agent loop (streamed) with parallel tool calls and a
                     failing tool
    failover-chat    an OpenAI Chat agent loop while OpenAI is down: every call fails
                     over to Anthropic and is translated both ways

`ui_recording` (tests/conftest.py) is a module-scoped fixture over `record_sessions`:
recording takes seconds, and a module's tests only read what it recorded, or add calls
of their own to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anthropic
import openai

from tests.fakes.agents import anthropic_agent, chat_agent
from tests.fakes.harness import FAILOVER_RULES, Taplog, Vendors
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY
from tests.fakes.servers import ServerThread

SCRIPT_PROMPT = 'Explain this tag: <script>window.__pwned=1</script> and its "quotes", please'
SESSIONS = ("anthropic-tools", "failover-chat", "inert-script")


def openai_client(proxy: Taplog, session: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/s/{session}/v1", api_key=OPENAI_KEY, max_retries=0)


def anthropic_client(proxy: Taplog, session: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=f"{proxy.url}/s/{session}", api_key=ANTHROPIC_KEY, max_retries=0
    )


def ask(proxy: Taplog, session: str, prompt: str) -> str:
    """One OpenAI Chat call in `session`; the answer's text."""
    answer = openai_client(proxy, session).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": prompt}]
    )
    return answer.choices[0].message.content or ""


def record_sessions(
    servers: ServerThread, vendors: Vendors, data_dir: Path, **settings: object
) -> Taplog:
    """A running taplog (with failover rules) that has recorded the three sessions."""
    proxy = vendors.proxy(servers, data_dir, FAILOVER_RULES, **settings)
    ask(proxy, "inert-script", SCRIPT_PROMPT)
    anthropic_agent(anthropic_client(proxy, "anthropic-tools"), stream=True)
    vendors.openai.down = {"status": "503"}
    chat_agent(openai_client(proxy, "failover-chat"), stream=False)
    vendors.openai.down = {}
    proxy.wait_for(lambda sessions: sorted(sessions) == sorted(SESSIONS))
    proxy.flush()
    return proxy


@dataclass
class Recorded:
    proxy: Taplog  # serving the web UI at /ui/ too
    vendors: Vendors

    @property
    def data_dir(self) -> Path:
        return self.proxy.data_dir
