"""SQL that only reads: which statements may run, and which files DuckDB may open.

Two walls, the first decisive:

1. `check_read_only`, before DuckDB runs anything. A statement passes only when
   DuckDB's own parser types it as a query: SELECT, which covers WITH, FROM,
   VALUES, DESCRIBE, SHOW and SUMMARIZE, or an EXPLAIN of one (EXPLAIN ANALYZE
   runs what it explains), or a PIVOT that takes its columns from the data
   (typed MULTI: a type of the values, then the query), as long as it names no
   statement that writes. COPY, EXPORT, ATTACH, CREATE, INSERT, PRAGMA, SET,
   CALL, INSTALL, LOAD and every other statement are refused by name; each
   statement of a script is checked.
2. `lock_down`, on the connection, bounds what DuckDB could touch were a
   statement to get past: it may open the files the views read, each named
   (so it can create no file, in the data dir or anywhere else), and the one
   file taplog writes a result to; external access is off (no other file, no
   network, no extension); spill files go to a private temporary folder,
   never the working directory; and the configuration is locked. DuckDB has
   no setting that opens a file for reading only (`allowed_paths` and
   `allowed_directories` grant writes too), so it is the first wall that keeps
   the files the views read from being overwritten.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import duckdb

ALLOWED = "SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, or EXPLAIN [ANALYZE] of one"


class QueryError(ValueError):
    """The SQL was refused or failed; the message says why."""


def check_read_only(sql: str) -> None:
    """Refuse anything but one query, as DuckDB's parser reads it, before DuckDB runs any."""
    statements = _parsed(sql)
    for statement in statements:
        if statement.type == duckdb.StatementType.EXPLAIN:
            explained = _explained(statement.query)
            if [s.type for s in explained] != [duckdb.StatementType.SELECT]:
                raise QueryError(
                    f"only queries run here ({ALLOWED}); refused an EXPLAIN of "
                    + (" and ".join(_named(s) for s in explained) or "nothing")
                )
        elif statement.type == duckdb.StatementType.MULTI and _a_pivot_query(statement.query):
            continue
        elif statement.type != duckdb.StatementType.SELECT:
            raise QueryError(f"only queries run here ({ALLOWED}); refused {_named(statement)}")
    if len(statements) != 1:
        raise QueryError(f"give exactly one SQL statement (got {len(statements)})")


# What a statement that is not a query starts with, or holds (`INSERT … PIVOT`).
_NOT_QUERIES = frozenset(
    {
        *("alter", "attach", "begin", "call", "checkpoint", "comment", "commit", "copy"),
        *("create", "delete", "detach", "drop", "execute", "export", "import", "insert"),
        *("install", "load", "merge", "pragma", "prepare", "reset", "rollback", "set"),
        *("truncate", "update", "use", "vacuum"),
    }
)


def _a_pivot_query(text: str) -> bool:
    """Whether a statement DuckDB types as several (MULTI) is a query with a PIVOT whose
    columns come from the data: DuckDB makes a type of the values first, then runs the
    query. Its keywords must name a pivot and nothing that writes (`CREATE TABLE … AS
    PIVOT`, `COPY (PIVOT …) TO` are refused)."""
    found = duckdb.tokenize(text)
    ends = [offset for offset, _ in found[1:]] + [len(text)]
    words = {
        text[offset:end].strip().lower()
        for (offset, kind), end in zip(found, ends, strict=True)
        if kind == duckdb.token_type.keyword
    }
    return bool(words & {"pivot", "pivot_wider"}) and not words & _NOT_QUERIES


def _parsed(sql: str) -> list[duckdb.Statement]:
    try:
        return duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from None


def _named(statement: duckdb.Statement) -> str:
    kind = statement.type.name
    return f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind} statement"


def _explained(text: str) -> list[duckdb.Statement]:
    """What an EXPLAIN is about, as DuckDB's parser reads it.

    It follows `EXPLAIN [ANALYZE]`, and an options list when there is one
    (`EXPLAIN (ANALYZE, FORMAT json) …`). Whether a `(` there opens options or a
    query is left to the parser: the text from the `(` is read first, then the
    text after its `)`. No text parses both ways, since no statement starts as
    an options list does and none can follow a query in parentheses.
    """
    tokens = _tokens(text)
    analyze = [word.upper() for _, word in tokens[1:2]] in (["ANALYZE"], ["ANALYSE"])
    rest = tokens[2:] if analyze else tokens[1:]
    starts = [offset for offset, _ in rest[:1]]
    if rest and rest[0][1] == "(":
        depth = 0
        for index, (_, word) in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(word, 0)
            if depth == 0:
                starts += [offset for offset, _ in rest[index + 1 : index + 2]]
                break
    for start in starts:
        try:
            return duckdb.extract_statements(text[start:])
        except duckdb.Error:
            continue
    return []


def _tokens(text: str) -> list[tuple[int, str]]:
    """Where each token of `text` starts, and its text, comments left out."""
    found = duckdb.tokenize(text)
    ends = [offset for offset, _ in found[1:]] + [len(text)]
    return [
        (offset, text[offset:end].strip())
        for (offset, kind), end in zip(found, ends, strict=True)
        if kind != duckdb.token_type.comment
    ]


def lock_down(con: duckdb.DuckDBPyConnection, readable: Sequence[str], output: Path | None) -> None:
    """Let DuckDB open only the `readable` files and `output`, then lock its configuration."""
    con.execute("SET allowed_paths = ?", [[*readable, *([str(output)] if output else [])]])
    con.execute("SET temp_directory = ?", [str(_private_folder() / uuid.uuid4().hex)])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


@functools.cache
def _private_folder() -> Path:
    """A folder only this user can read, for DuckDB's spill files: one per user, kept
    (`$XDG_RUNTIME_DIR/taplog-sql`, else `$TMPDIR/taplog-sql-<uid>`), so a `taplog sql`
    that is killed leaves no folder behind. DuckDB makes a connection's own folder in
    it when it first spills, and removes that when the connection closes.

    One that is not this user's own, or that others may open, is never used (another
    user could have made it first): a folder of this process's own is, removed at exit.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        Path(runtime, "taplog-sql")
        if runtime
        else Path(tempfile.gettempdir(), f"taplog-sql-{os.getuid()}")
    )
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = os.lstat(folder)
    if stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077:
        return folder
    own = Path(tempfile.mkdtemp(prefix="taplog-sql-"))
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    return own
