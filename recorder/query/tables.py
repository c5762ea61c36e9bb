"""Query results as text: table, CSV, JSON or JSON Lines.

Recorded content is attacker-controlled (prompts, tool output), so every
cell printed for a terminal has its control characters made visible: a
recorded escape sequence can never move the cursor or rewrite the screen.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

FORMATS = ("table", "csv", "json", "jsonl")
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_ESCAPED = {code: chr(code).encode("unicode_escape").decode("ascii") for code in _CONTROLS}
_RAW_IN_JSON = re.compile(r"[\x7f-\x9f\u2028\u2029]")  # orjson escapes only C0 controls


def safe_text(value: str) -> str:
    """`value` with control characters shown as escapes (`\\x1b`, `\\n`)."""
    return value.translate(_ESCAPED)


def cell(value: Any, width: int | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="milliseconds")
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list | dict):
        text = orjson.dumps(value, default=str).decode()
    else:
        text = str(value)
    cut = width is not None and len(text) > width  # escapes only lengthen: its start will do
    text = safe_text(text[:width] if cut else text)
    if width is not None and (cut or len(text) > width):
        text = text[: width - 1] + "…"
    return text


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_width: int = 60) -> str:
    cells = [[cell(v, max_width) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True))  # noqa: E731
    rule = "  ".join("-" * w for w in widths)
    body = [line(r).rstrip() for r in cells]
    footer = f"({len(rows)} row{'' if len(rows) == 1 else 's'})"
    return "\n".join([line(list(columns)).rstrip(), rule, *body, footer])


def render(
    columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str
) -> str:
    """Rows in one of FORMATS; `types` (SQL type names) mark the JSON columns."""
    if fmt == "table":
        return table(columns, rows)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[cell(v) for v in row] for row in rows])
        return out.getvalue().rstrip("\n")
    is_json = [kind == "JSON" for kind in types]
    records = [
        {
            c: orjson.loads(v) if j and v is not None else _in_range(v)
            for c, j, v in zip(columns, is_json, row, strict=True)
        }
        for row in rows
    ]
    if fmt == "json":
        return _escaped(orjson.dumps(records, option=orjson.OPT_INDENT_2, default=str).decode())
    return "\n".join(_escaped(orjson.dumps(r, default=str).decode()) for r in records)


def _in_range(value: Any) -> Any:
    """A value JSON output can write: an integer past 64 bits (a HUGEINT sum) as its
    digits in a string, which orjson cannot write as a number."""
    if type(value) is int and not -(2**63) <= value < 2**64:
        return str(value)
    return value


def _escaped(json_text: str) -> str:
    """JSON with DEL, the C1 controls and the line separators escaped as well (\\u009b):
    the same JSON, and nothing in it a terminal acts on."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)
