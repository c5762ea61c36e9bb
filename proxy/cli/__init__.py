"""The `taplog` command: `main` is the group; each module holds one family of commands."""
