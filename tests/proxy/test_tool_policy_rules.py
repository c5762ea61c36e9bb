"""The tool policy's rules as a user writes them: TOML in, decisions and refusals out."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.proxy.config import load
from taplog.proxy.tool_policy import (
    CallFacts,
    Decision,
    GatedCall,
    Policy,
    load_policy,
    refusal_text,
)
from tests.fakes.harness import TAPLOG, taplog_env

FACTS = CallFacts(
    session="ci-42", key_fingerprint="key:1a2b3c4d5e6f7a8b", model="claude-sonnet-4-6"
)
DENY_RM = """
[[tool_policy]]
id = "no-rm-rf"
name = "Bash"
arguments = 'rm\\s+-rf'
action = "deny"
reason = "no recursive deletes"
"""


def _policy(tmp_path, rules: str, policy_file: str | None = None) -> Policy:
    config = tmp_path / "taplog.toml"
    config.write_text(rules)
    flags = {}
    if policy_file is not None:
        (tmp_path / "policy.toml").write_text(policy_file)
        flags["tool_policy"] = str(tmp_path / "policy.toml")
    return load(flags, {}, config).tool_policy_rules


def _judge(policy: Policy, name: str, arguments: str, facts: CallFacts = FACTS, **call):
    return policy.judge(GatedCall(name, arguments, "toolu_1", **call), facts)


def _rule_of(decision: Decision | None) -> str | None:
    return decision.rule if decision is not None else None


def test_the_simplest_rule_denies_bash_rm_rf_whatever_the_json_spacing(tmp_path):
    policy = _policy(tmp_path, DENY_RM)
    for arguments in ('{"command":"rm -rf /tmp/x"}', '{ "command" :  "rm  -rf /tmp/x" }'):
        decision = _judge(policy, "Bash", arguments)
        assert decision is not None
        assert (decision.action, decision.rule, decision.reason) == (
            "deny",
            "no-rm-rf",
            "no recursive deletes",
        )
        assert decision.call.arguments == arguments and decision.call.call_id == "toolu_1"
    assert _judge(policy, "Bash", '{"command": "ls -l"}') is None
    assert _judge(policy, "bash", '{"command": "rm -rf /"}') is None  # globs are case-sensitive


def test_the_arguments_regex_searches_compact_json_so_it_can_anchor_on_a_key(tmp_path):
    rule = '[[tool_policy]]\narguments = \'"command":"sudo\\s\'\naction = "flag"\n'
    policy = _policy(tmp_path, rule)
    assert _judge(policy, "Bash", '{\n  "command" : "sudo reboot"\n}') is not None
    assert _judge(policy, "Bash", '{"description": "\\"command\\":\\"sudo x"}') is None


def test_a_name_glob_matches_every_mcp_tool(tmp_path):
    policy = _policy(tmp_path, '[[tool_policy]]\nname = "mcp__*"\naction = "flag"\n')
    decision = _judge(policy, "mcp__github__create_issue", '{"title": "x"}')
    assert decision is not None and decision.action == "flag"
    assert decision.reason == "flagged by the tool policy" and decision.rule == "tool_policy[0]"
    assert _judge(policy, "Bash", "{}") is None


def test_fields_follow_keys_and_list_indexes_and_read_non_strings_as_json(tmp_path):
    rules = """
[[tool_policy]]
id = "etc"
fields = { "edits.1.path" = '^/etc/' }
action = "deny"
reason = "not /etc"

[[tool_policy]]
id = "background-long"
fields = { run_in_background = '^true$', timeout = '^[0-9]{6,}$' }
action = "flag"

[[tool_policy]]
id = "env-object"
fields = { env = '"HOME":"/root"' }
action = "flag"
"""
    policy = _policy(tmp_path, rules)
    edits = '{"edits": [{"path": "/tmp/a"}, {"path": "/etc/passwd"}]}'
    assert _rule_of(_judge(policy, "MultiEdit", edits)) == "etc"
    assert _judge(policy, "MultiEdit", '{"edits": [{"path": "/etc/passwd"}]}') is None
    assert _judge(policy, "MultiEdit", '{"edits": {"1": {"path": "/etc/x"}}}') is not None
    background = '{"command": "make", "run_in_background": true, "timeout": 600000}'
    assert _rule_of(_judge(policy, "Bash", background)) == "background-long"
    short = '{"command": "make", "run_in_background": true, "timeout": 6000}'
    assert _judge(policy, "Bash", short) is None  # every field given must match
    assert _judge(policy, "Bash", '{"command": "make", "timeout": 600000}') is None  # missing
    env = '{"env": { "HOME": "/root", "X": 1 }}'
    assert _rule_of(_judge(policy, "exec", env)) == "env-object"
    assert _judge(policy, "exec", "edits.1.path=/etc/x") is None  # not JSON: no fields


def test_session_key_and_model_globs_match_the_call_facts(tmp_path):
    rules = """
[[tool_policy]]
id = "ci-only"
session = "ci-*"
key = "key:1a2b*"
model = "claude-*"
action = "flag"
"""
    policy = _policy(tmp_path, rules)
    assert _rule_of(_judge(policy, "Bash", "{}")) == "ci-only"
    for other in (
        CallFacts("dev-1", FACTS.key_fingerprint, FACTS.model),
        CallFacts("ci-1", "key:ffffffffffffffff", FACTS.model),
        CallFacts("ci-1", None, FACTS.model),  # no key: a key glob does not match
        CallFacts("ci-1", FACTS.key_fingerprint, "gpt-5"),
        CallFacts("ci-1", FACTS.key_fingerprint, None),
    ):
        assert _judge(policy, "Bash", "{}", other) is None


def test_the_first_matching_rule_wins_and_the_policy_file_comes_first(tmp_path):
    in_config = """
[[tool_policy]]
name = "Bash"
action = "flag"
reason = "every Bash call is looked at"
"""
    policy = _policy(tmp_path, in_config + DENY_RM, policy_file=DENY_RM.replace("no-rm-rf", "rm"))
    assert [rule.id for rule in policy.rules] == ["rm", "tool_policy[0]", "no-rm-rf"]
    assert _judge(policy, "Bash", '{"command": "rm -rf /"}').rule == "rm"
    flagged = _judge(policy, "Bash", '{"command": "ls"}')
    assert (flagged.action, flagged.reason) == ("flag", "every Bash call is looked at")
    alone = _policy(tmp_path, "", policy_file="[[tool_policy]]\nname='*'\naction='flag'\n")
    assert [rule.id for rule in alone.rules] == ["policy.toml:tool_policy[0]"]


def test_arguments_cut_short_or_freeform_are_searched_as_raw_text(tmp_path):
    rules = """
[[tool_policy]]
id = "no-deleting-patches"
name = "apply_patch"
arguments = '(?m)^\\*\\*\\* Delete File: '
action = "deny"
reason = "patches do not delete files"
"""
    policy = _policy(tmp_path, DENY_RM + rules)
    patch = "*** Begin Patch\n*** Delete File: src/app.py\n*** End Patch\n"
    assert _rule_of(_judge(policy, "apply_patch", patch)) == "no-deleting-patches"
    cut = '{"command": "cd /w && rm -rf build && make ' + "x" * 100
    decision = _judge(policy, "Bash", cut, partial=True)
    assert decision.rule == "no-rm-rf" and decision.call.partial is True
    by_field = '[[tool_policy]]\nfields = { command = "rm" }\naction = "flag"\n'
    assert _judge(_policy(tmp_path, by_field), "Bash", cut, partial=True) is None


def test_no_rules_is_a_false_policy_and_judges_nothing(tmp_path):
    policy = _policy(tmp_path, "port = 8787\n")
    assert not policy and policy.judge(GatedCall("Bash", "{}", ""), FACTS) is None
    assert _policy(tmp_path, DENY_RM)


def test_the_refusal_names_taplog_the_tool_the_rule_and_the_reason():
    call = GatedCall("Bash", '{"command": "rm -rf /"}', "toolu_1")
    text = refusal_text(Decision("deny", "no-rm-rf", "no recursive deletes", call))
    assert text == (
        "taplog's tool policy refused this call to Bash (rule no-rm-rf): "
        "no recursive deletes. The tool was not run."
    )
    ended = refusal_text(Decision("deny", "r", "Ask a human first!", call))
    assert "(rule r): Ask a human first! The tool was not run." in ended


def test_check_config_lists_the_rules_one_line_each(tmp_path):
    config = tmp_path / "taplog.toml"
    config.write_text(
        DENY_RM
        + "\n[[tool_policy]]\nname = \"exec_command\"\nfields = { cmd = '^git push' }\n"
        + 'model = "gpt-*"\naction = "flag"\n'
    )
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1:] == [
        '  tool policy: no-rm-rf: deny Bash when arguments ~ rm\\s+-rf ("no recursive deletes")',
        "  tool policy: tool_policy[1]: flag exec_command when cmd ~ ^git push and model is "
        'gpt-* ("flagged by the tool policy")',
    ]


RULE = 'name = "Bash"\naction = "deny"\nreason = "r"\n'


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('nme = "Bash"\naction = "deny"\nreason = "r"', "tool_policy[0]: unknown key 'nme' (id, "),
        (f"{RULE}name_glob = 'x'", "tool_policy[0]: unknown key 'name_glob'"),
        ('name = 5\naction = "flag"', "tool_policy[0].name: must be a glob"),
        ('session = ""\naction = "flag"', "tool_policy[0].session: must be a glob"),
        ("key = ['a']\naction = 'flag'", "tool_policy[0].key: must be a glob"),
        ('model = true\naction = "flag"', "tool_policy[0].model: must be a glob"),
        ('arguments = "rm(("\naction = "flag"', "tool_policy[0].arguments: bad regular expression"),
        ('arguments = 3\naction = "flag"', "tool_policy[0].arguments: must be a regular expr"),
        ('fields = "command"\naction = "flag"', "tool_policy[0].fields: must be a table"),
        ("fields = {}\naction = 'flag'", "tool_policy[0].fields: must be a table"),
        ("fields = { cmd = '[' }\naction = 'flag'", "tool_policy[0].fields.cmd: bad regular expr"),
        ("fields = { cmd = 1 }\naction = 'flag'", "tool_policy[0].fields.cmd: must be a regular"),
        ("fields = { 'a..b' = 'x' }\naction = 'flag'", "tool_policy[0].fields.a..b: a path is"),
        (
            'name = "Bash"\nreason = "r"',
            'tool_policy[0].action: must be "deny" or "flag" (missing)',
        ),
        (
            'name = "Bash"\naction = "block"',
            'tool_policy[0].action: must be "deny" or "flag" (got \'block\')',
        ),
        ('name = "Bash"\naction = "deny"', "tool_policy[0].reason: missing: a deny rule says why"),
        ('name = "Bash"\naction = "flag"\nreason = " "', "tool_policy[0].reason: must be a sent"),
        ('action = "deny"\nreason = "r"', "tool_policy[0]: matches every call (it has none of"),
        (f'{RULE}id = "no rm"', "tool_policy[0].id: must be 1 to 128 characters without spaces"),
        (
            f"{RULE}\n[[tool_policy]]\n{RULE}id = 'tool_policy[0]'",
            "tool_policy[1].id: 'tool_policy[0]' is already the id of config file",
        ),
    ],
)
def test_check_config_refuses_a_bad_rule_naming_it_and_its_key(tmp_path, table, named):
    config = tmp_path / "taplog.toml"
    config.write_text(f"[[tool_policy]]\n{table}\n")
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code == 1
    assert f"Error: config file {config}: {named}" in result.output


def test_check_config_refuses_a_bad_policy_file_naming_it(tmp_path):
    policy = tmp_path / "policy.toml"
    config = tmp_path / "taplog.toml"
    config.write_text(f"tool_policy = '{policy}'\n")

    def refusal() -> str:
        result = CliRunner().invoke(main, ["check-config", str(config)])
        assert result.exit_code == 1
        return result.output

    assert f"config file {config}: tool_policy: must be an existing file" in refusal()
    policy.write_text("port = 1\n")
    assert f"tool policy file {policy}: unknown key 'port' (only [[tool_policy]]" in refusal()
    policy.write_text("[[tool_policy]\n")
    assert f"tool policy file {policy}: not valid TOML" in refusal()
    policy.write_text(DENY_RM)
    config.write_text(f"tool_policy = '{policy}'\n")
    assert "no-rm-rf: deny Bash" in CliRunner().invoke(main, ["check-config", str(config)]).output
    config.write_text(DENY_RM)  # the same id in both
    env = {"TAPLOG_TOOL_POLICY": str(policy)}
    result = CliRunner(env=env).invoke(main, ["check-config", str(config)])
    assert (
        result.exit_code == 1
        and (
            f"config file {config}: tool_policy[0].id: 'no-rm-rf' is already the id of "
            f"tool policy file {policy}: tool_policy[0]"
        )
        in result.output
    )


def test_serve_refuses_to_start_with_a_bad_rule_naming_it(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[tool_policy]]\nname = "Bash"\narguments = "rm(("\naction = "deny"\nreason = "r"\n'
    )
    result = subprocess.run(
        [
            TAPLOG,
            "serve",
            "--tool-policy",
            str(bad),
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        env=taplog_env(),
    )
    assert result.returncode == 2
    assert f"tool policy file {bad}: tool_policy[0].arguments: bad regular expression" in (
        result.stderr
    )
    assert not (tmp_path / "d").exists()


def _page_examples() -> dict[str, Policy]:
    """Each rule of docs/tool-policy.md's TOML blocks, by id, loaded as a user would."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "tool-policy.md").read_text()
    examples = {}
    for block in re.findall(r"^```toml\n(.*?)^```", page, re.M | re.S):
        for rule in load_policy(tomllib.loads(block), Path("taplog.toml"), None).rules:
            examples[rule.id] = Policy((rule,))
    return examples


@pytest.mark.parametrize(
    ("rule", "tool", "arguments", "facts", "matched"),
    [
        ("no-rm-rf", "Bash", '{"command": "cd /w && rm -Rf build"}', FACTS, True),
        ("no-rm-rf", "Bash", '{"command": "rm -r build"}', FACTS, False),
        ("no-push-to-main", "Bash", '{"command": "git push origin main"}', FACTS, True),
        ("no-push-to-main", "Bash", '{"command": "git push origin maintenance"}', FACTS, False),
        ("no-ssh-keys", "Read", '{"file_path": "/home/me/.ssh/id_ed25519"}', FACTS, True),
        (
            "codex-no-push-to-main",
            "exec_command",
            '{"cmd": "git push -f origin master"}',
            FACTS,
            True,
        ),
        ("codex-not-in-etc", "exec_command", '{"cmd": "ls", "workdir": "/etc"}', FACTS, True),
        ("codex-not-in-etc", "exec_command", '{"cmd": "ls", "workdir": "/etcetera"}', FACTS, False),
        (
            "codex-no-deleted-files",
            "apply_patch",
            "*** Begin Patch\n*** Delete File: a.py\n*** End Patch\n",
            FACTS,
            True,
        ),
        (
            "codex-ci-config",
            "apply_patch",
            "*** Begin Patch\n*** Update File: .github/workflows/ci.yml\n@@\n-a\n+b\n*** End Patch",
            FACTS,
            True,
        ),
        ("no-merging", "mcp__github__merge_pull_request", '{"pullNumber": 7}', FACTS, True),
        ("mcp-in-ci", "mcp__linear__create_issue", "{}", FACTS, True),
        ("mcp-in-ci", "mcp__linear__create_issue", "{}", CallFacts("dev", None, None), False),
        ("interns-no-network", "Bash", '{"command": "curl -s x.io"}', FACTS, True),
        ("watch-new-model", "Read", "{}", CallFacts("s", None, "gpt-5.1-codex"), True),
    ],
)
def test_the_examples_of_the_docs_page_do_what_it_says(rule, tool, arguments, facts, matched):
    decision = _page_examples()[rule].judge(GatedCall(tool, arguments, ""), facts)
    assert (decision is not None) is matched
