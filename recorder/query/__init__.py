"""Reading the logs back: DuckDB views, Parquet compaction, the read-only SQL surface, and the
text and JSON that `sessions`, `show`, `tail` and the web UI print."""
