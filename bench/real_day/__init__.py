"""A real day of a coding agent's work, in the bench (issue #31, item 4).

    .venv/bin/python bench/real_day generate --calls 2000 --out /tmp/day.jsonl
    .venv/bin/python bench/real_day run            # 7-8 minutes on 2 cores; RESULTS.md
    .venv/bin/python bench/real_day check-cli      # the real Claude Code beside it
    .venv/bin/python bench/real_day compare --against /tmp/base   # a before and after

A seeded, deterministic generator of one long Claude Code session as the CLI sends it
(Anthropic Messages bodies, headers and all): the main agent's tool loop with thinking
and signatures, sub-agents side by side, side calls to a small model, moving cache
markers and reminders, contexts growing to 300k tokens and a compaction that restarts
the history. `run` sends the day through the fake vendor, the bare proxy and taplog,
weighs what taplog stored and times its reading commands; `check-cli` records the real
CLI through taplog against the fake vendor and sets its figures beside the generator's.

The modules, by responsibility:

    claude_code  the request parts that do not depend on the conversation (from a capture)
    texts        sized, seeded texts: tool outputs, prose, ids, signatures
    tools        the tool calls and their results (a repository and a shell, played)
    side         side calls to the small model; reminder and compaction texts
    thread       one conversation: its history, its next request, the moving marker
    day          the schedule: prompts, tool loops, sub-agents, side calls, compaction
    bodies       a day's calls to and from JSONL, and their summary
    latency      the systems, and every call sent to each in turn
    storage      the data dir weighed against the bodies sent
    reading      the reading commands and the UI, timed, with their peak RSS
    measure      one run, step by step
    report       the RESULTS.md section
    cli_check    the real CLI recorded through taplog, beside the generator
    compare      two trees' taplog on the same day, in the same run
    cli          the command line
"""
