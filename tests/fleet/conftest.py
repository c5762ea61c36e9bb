"""Fixtures of the fleet tests: a real SeaweedFS per test (`tests.fakes.engines`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.engines import SeaweedFS


@pytest.fixture
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    store = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    store.start()
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def store_env(seaweed: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> SeaweedFS:
    """The store's variables in this process's environment too (shipping in-process)."""
    for name, value in seaweed.env.items():
        monkeypatch.setenv(name, value)
    return seaweed
