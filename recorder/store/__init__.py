"""The data dir on disk: the writer thread, session log files, blobs, transcript deltas,
syncing and the lock that gives one process the dir."""
