"""Counters and histograms kept as plain numbers, turned into metric families at scrape time.

The recorder's observer updates a dozen series per recorded answer on the
writer thread. prometheus_client's `Counter.inc` and `Histogram.observe` each
take a lock and run several Python calls; here an update is a dict lookup and
an addition (a histogram finds its bucket with `bisect`). The families built
when Prometheus scrapes have the names, help, labels and buckets the
prometheus_client metrics would have, and the same text.

Threads: the writer thread updates while holding the lock given to
`Families` (`proxy.observe.metrics.Metrics` takes it once around all the updates of
one recorded event); a scrape, on the event loop, copies every series of a
`Families` under that lock at once, so it never sees a histogram whose
buckets, count and sum disagree, nor an answer counted in one of its families
and not yet in another.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import accumulate

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

LabelValues = tuple[str, ...]


class CounterSeries:
    """One counter family: its value per label values (0 from the start when unlabelled)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self.values: dict[LabelValues, float] = {} if labelnames else {(): 0.0}

    def inc(self, key: LabelValues, amount: float = 1.0) -> None:
        self.values[key] = self.values.get(key, 0.0) + amount

    def copy(self) -> dict[LabelValues, float]:
        return dict(self.values)

    def family(self, values: dict[LabelValues, float]) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, value in values.items():
            family.add_metric(key, value)
        return family


class HistogramSeries:
    """One histogram family: per label values, the count in each bucket (`+Inf` last), then
    the sum of what was observed."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self.bounds = tuple(float(bound) for bound in buckets)
        self._le = [*(floatToGoString(bound) for bound in self.bounds), "+Inf"]
        self.counts: dict[LabelValues, list[float]] = {}

    def observe(self, key: LabelValues, amount: float) -> None:
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = [0.0] * (len(self.bounds) + 2)
        counts[bisect_left(self.bounds, amount)] += 1  # the first bucket with amount <= le
        counts[-1] += amount

    def copy(self) -> dict[LabelValues, list[float]]:
        return {key: list(counts) for key, counts in self.counts.items()}

    def family(self, counts: dict[LabelValues, list[float]]) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, series in counts.items():
            family.add_metric(
                key, list(zip(self._le, accumulate(series[:-1]), strict=True)), series[-1]
            )
        return family


Series = CounterSeries | HistogramSeries


class Families:
    """A collector for `CollectorRegistry.register`: series that share one lock."""

    def __init__(self, lock: threading.Lock, *series: Series) -> None:
        self._lock = lock
        self._series = series

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            copies = [series.copy() for series in self._series]
        for series, copy in zip(self._series, copies, strict=True):
            yield series.family(copy)
