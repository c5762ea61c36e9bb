"""The command line of `bench/real_day`: generate a day, run it, check it against the CLI.

.venv/bin/python bench/real_day generate --calls 2000 --seed 1 --out /tmp/day.jsonl
.venv/bin/python bench/real_day run [--calls 2000] [--seed 1] [--bodies FILE] [--no-write]
.venv/bin/python bench/real_day check-cli [--cli claude|codex] [--steps 400]
.venv/bin/python bench/real_day compare --against /tmp/base [--bodies FILE] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from bench.common import ROOT
from bench.real_day import bodies, measure, report
from bench.real_day.day import CONTEXT_TOKENS

RESULTS = ROOT / "bench" / "RESULTS.md"


def _day_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=2000, help="calls in the day")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=CONTEXT_TOKENS,
        help="the context at which the history is compacted (4 bytes a token)",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="bench/real_day", description=__doc__.split("\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="write a day's calls as JSONL")
    _day_options(generate)
    generate.add_argument("--out", type=Path, required=True)
    run = commands.add_parser("run", help="send a day through the systems, weigh and read it")
    _day_options(run)
    run.add_argument("--bodies", type=Path, help="send this JSONL (generate's) instead")
    run.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    run.add_argument("--no-zstd", action="store_true", help="skip the zstd reference")
    run.add_argument("--keep", action="store_true", help="keep the data dirs under /tmp")
    run.add_argument(
        "--repeats", type=int, default=2, help="runs of each reading command; the fastest is kept"
    )
    run.add_argument("--json", type=Path, help="also write every figure here")
    run.add_argument("--note", default="", help="what tree was measured, for RESULTS.md")
    run.add_argument("--results", type=Path, default=RESULTS, help="the file to write")
    check = commands.add_parser("check-cli", help="a real coding agent beside the generator")
    check.add_argument("--cli", choices=("claude", "codex"), default="claude")
    check.add_argument("--steps", type=int, help="tool steps of the main agent (400; Codex: 1,000)")
    check.add_argument("--seed", type=int, default=1)
    check.add_argument("--keep", action="store_true", help="keep the scratch dir under /tmp")
    check.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    check.add_argument("--results", type=Path, default=RESULTS, help="the file to write")
    check.add_argument("--note", default="", help="what tree was measured, for RESULTS.md")
    against = commands.add_parser("compare", help="this tree beside another, in the same run")
    _day_options(against)
    against.add_argument("--against", type=Path, required=True, help="the other tree")
    against.add_argument("--bodies", type=Path, help="send this JSONL (a recording) instead")
    against.add_argument("--workers", type=int, default=0, help="serve's --workers, for both")
    against.add_argument("--rounds", type=int, default=2, help="passes over the day")
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.command == "generate":
        calls = bodies.generate(args.calls, args.seed, args.context_tokens)
        bodies.print_summary(bodies.write(calls, args.out))
    elif args.command == "run":
        run(args, argv if argv is not None else sys.argv[1:])
    elif args.command == "compare":
        from bench.real_day import compare

        day = bodies.load(args.bodies) if args.bodies else None
        if day is None:
            day = bodies.generate(args.calls, args.seed, args.context_tokens)
        compare.compare(day, args.against, args.workers, args.rounds)
    else:
        from bench.real_day import cli_check

        steps = args.steps or cli_check.STEPS[args.cli]
        section = cli_check.main(steps, args.seed, args.keep, args.note, args.cli)
        print(section)
        if not args.no_write:
            report.write(args.results, section)


def run(args: argparse.Namespace, argv: list[str]) -> None:
    if args.bodies:
        calls = bodies.load(args.bodies)
    else:
        calls = bodies.generate(args.calls, args.seed, args.context_tokens)
    figures = measure.measure(calls, args.keep, not args.no_zstd, args.repeats)
    figures["seed"] = args.seed if not args.bodies else f"none: {args.bodies}"
    figures["command"] = ".venv/bin/python bench/real_day " + shlex.join(argv)
    if args.note:
        figures["tree"] += f" ({args.note})"
    if args.no_zstd:
        figures["notes"] = ["zstd skipped (`--no-zstd`)."]
    section = report.render(figures)
    print(section)
    if args.json:
        args.json.write_text(json.dumps(measure.dump(figures), indent=1))
    if not args.no_write:
        report.write(args.results, section)
        print(f"wrote the section {report.HEADING!r} of {args.results}")
