"""Session tools on recorded logs: export, fork, snapshot, what `resume` sends, and the index
`replay` answers from."""
