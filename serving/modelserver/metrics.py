"""TF Serving's own metrics, exposed exactly like its Prometheus page (prometheus_exporter.cc).

prometheus_client cannot produce this format (colons in names, `NAME{} 5`, no HELP lines, %g bucket
bounds, strictly-less-than buckets), so the registry and the exposition are written out here.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence


def exponential_buckets(scale: float, growth: float, count: int) -> tuple[float, ...]:
    """TF's `Buckets::Exponential`: `count` limits scale*growth^i (then an implicit +Inf)."""
    return tuple(scale * growth**i for i in range(count))


def fmt_double(value: float) -> str:
    """`absl::StrCat(double)`: %g with 6 significant digits."""
    return f"{value:g}"


def _prom_name(internal: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", ":", internal)


def _label_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "_", name)


def _label_value(value: str) -> str:
    # Only backslash and double quote are escaped; newlines are not (as in TF Serving).
    return value.replace("\\", "\\\\").replace('"', '\\"')


class _Metric:
    kind = "untyped"

    def __init__(self, internal_name: str, labels: Sequence[str]) -> None:
        self.internal_name = internal_name
        self.name = _prom_name(internal_name)
        self.labels = tuple(labels)
        self._lock = threading.Lock()

    def _key(self, values: Sequence[str]) -> tuple[str, ...]:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.internal_name} takes {len(self.labels)} label values")
        return tuple(str(v) for v in values)

    def _label_text(self, values: tuple[str, ...]) -> list[str]:
        return [
            f'{_label_name(n)}="{_label_value(v)}"'
            for n, v in zip(self.labels, values, strict=True)
        ]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    """An int64 counter (monitoring::Counter<N>)."""

    kind = "counter"

    def __init__(self, internal_name: str, labels: Sequence[str] = ()) -> None:
        super().__init__(internal_name, labels)
        self._cells: dict[tuple[str, ...], int] = {}
        if not self.labels:
            self._cells[()] = 0  # an unlabelled metric always has its one cell

    def inc(self, *values: str, amount: int = 1) -> None:
        """Add `amount` to the cell for these label values."""
        key = self._key(values)
        with self._lock:
            self._cells[key] = self._cells.get(key, 0) + int(amount)

    def value(self, *values: str) -> int:
        """The cell's value (0 when it does not exist)."""
        with self._lock:
            return self._cells.get(self._key(values), 0)

    def lines(self) -> list[str]:
        """`# TYPE` then one `NAME{labels} value` line per cell."""
        out = [f"# TYPE {self.name} {self.kind}"]
        with self._lock:
            cells = sorted(self._cells.items())
        for key, value in cells:
            out.append(f"{self.name}{{{','.join(self._label_text(key))}}} {value}")
        return out


class Histogram(_Metric):
    """A sampler (monitoring::Sampler<N>) with explicit bucket limits; a value v lands in the
    first bucket whose limit is strictly greater than v."""

    kind = "histogram"

    def __init__(self, internal_name: str, labels: Sequence[str], limits: Sequence[float]) -> None:
        super().__init__(internal_name, labels)
        self.limits = tuple(limits)
        self._cells: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}
        if not self.labels:
            self._cells[()] = ([0] * (len(self.limits) + 1), [0.0])

    def observe(self, value: float, *values: str) -> None:
        """Record one sample in the cell for these label values."""
        key = self._key(values)
        index = bisect.bisect_right(self.limits, value)
        with self._lock:
            cell = self._cells.get(key)
            if cell is None:
                cell = ([0] * (len(self.limits) + 1), [0.0])
                self._cells[key] = cell
            cell[0][index] += 1
            cell[1][0] += value

    def count(self, *values: str) -> int:
        """How many samples the cell holds."""
        with self._lock:
            cell = self._cells.get(self._key(values))
            return sum(cell[0]) if cell else 0

    def lines(self) -> list[str]:
        """`# TYPE`, then per cell cumulative `_bucket` lines, `+Inf`, `_sum`, `_count`."""
        out = [f"# TYPE {self.name} histogram"]
        with self._lock:
            cells = sorted((k, (list(c[0]), c[1][0])) for k, c in self._cells.items())
        for key, (buckets, total) in cells:
            labels = self._label_text(key)
            prefix = f"{self.name}_bucket{{{','.join(labels)}{',' if labels else ''}"
            cumulative = 0
            for i, n in enumerate(buckets):
                cumulative += n
                limit = fmt_double(self.limits[i]) if i < len(self.limits) else "+Inf"
                out.append(f'{prefix}le="{limit}"}} {cumulative}')
            joined = ",".join(labels)
            out.append(f"{self.name}_sum{{{joined}}} {fmt_double(total)}")
            out.append(f"{self.name}_count{{{joined}}} {cumulative}")
        return out


LATENCY_US = exponential_buckets(10, 1.8, 33)
# The `model_name` value that every request for a model not in the config is counted under.
# TF Serving labels such requests with the requested name itself; here a client cannot grow the
# page by inventing names.
UNKNOWN_MODEL = "__unknown__"
BATCH_SIZES = exponential_buckets(1, 2, 14)


class ServingMetrics:
    """Every metric the model server exposes, named and labelled as TF Serving does."""

    def __init__(self) -> None:
        s = "/tensorflow/serving/"
        self.request_count = Counter(s + "request_count", ["model_name", "status"])
        self.request_latency = Histogram(
            s + "request_latency", ["model_name", "API", "entrypoint"], LATENCY_US
        )
        self.runtime_latency = Histogram(
            s + "runtime_latency", ["model_name", "API", "runtime"], LATENCY_US
        )
        self.request_example_counts = Histogram(
            s + "request_example_counts", ["model"], exponential_buckets(1, 2, 15)
        )
        self.request_example_count_total = Counter(s + "request_example_count_total", ["model"])
        self.model_warmup_latency = Histogram(
            s + "model_warmup_latency", ["model_path", "status"], LATENCY_US
        )
        self.model_warmup_records_read = Counter(
            s + "model_warmup_records_read", ["model_path", "status"]
        )
        b = s + "batching_session/"
        self.queuing_latency = Histogram(
            b + "queuing_latency", ["thread_pool_name"], exponential_buckets(100, 1.2, 52)
        )
        self.wrapped_run_count = Counter(b + "wrapped_run_count")
        # TF registers these three lazily, on the first batch (function-local statics).
        self.input_batch_size = Histogram(b + "input_batch_size", [], BATCH_SIZES)
        self.processed_batch_size = Histogram(b + "processed_batch_size", [], BATCH_SIZES)
        self.padding_size = Histogram(b + "padding_size", ["execution_batch_size"], BATCH_SIZES)
        self.load_attempt_count = Counter(
            "/tensorflow/cc/saved_model/load_attempt_count", ["model_path", "status"]
        )
        self.load_latency = Counter("/tensorflow/cc/saved_model/load_latency", ["model_path"])
        self.graph_runs = Counter("/tensorflow/core/graph_runs")
        self.graph_run_time_usecs = Counter("/tensorflow/core/graph_run_time_usecs")
        self._batching_seen = threading.Event()
        self._metrics: list[_Metric] = [m for m in vars(self).values() if isinstance(m, _Metric)]

    def batch_recorded(self) -> None:
        """Mark that a batch ran, so the lazily registered batching metrics appear."""
        self._batching_seen.set()

    def render(self) -> str:
        """The whole page: metrics sorted by internal name, lines joined by \\n, trailing \\n."""
        lazy = {self.input_batch_size, self.processed_batch_size, self.padding_size}
        lines: list[str] = []
        for metric in sorted(self._metrics, key=lambda m: m.internal_name):
            if metric in lazy and not self._batching_seen.is_set():
                continue
            lines.extend(metric.lines())
        return "\n".join(lines) + "\n"
