"""`nvml` collector: per-GPU signals through NVML, in base units, labelled `gpu` and `uuid`.

Which per-GPU fields are exported is data (`exporter/nvml/fields.csv`); identity, per-process
memory, lost GPUs and XID events are built here. A field the GPU does not support is omitted; any
other NVML error omits that field and marks the scrape of this collector as failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter.guard import GuardedCollector
from exporter.nvml.backend import NvmlError, NvmlGpuLost, NvmlNotSupported
from exporter.nvml.fields import CALLS, FIELDS, MetricSpec
from exporter.nvml.session import Device, NvmlSession
from exporter.registry import CollectorError, register
from exporter.sources import Sources

_GPU = ["gpu", "uuid"]


class NvmlCollector:
    """Reads every GPU of an NvmlSession on each scrape."""

    def __init__(self, session: NvmlSession, fields: list[MetricSpec]) -> None:
        self._session = session
        self._fields = fields
        self._calls = sorted({FIELDS[row.field][0] for spec in fields for row in spec.rows})
        # Per row, worked out once: (metric, call, extract, scale, extra label values).
        self._plan = [
            (spec.name, *FIELDS[row.field], row.scale, [v for _, v in row.labels])
            for spec in fields
            for row in spec.rows
        ]

    def collect(self) -> Iterator[Metric]:
        """One family per field, plus info, lost, processes and XIDs."""
        ok = self._session.ensure()
        yield GaugeMetricFamily(
            "tokenpulse_gpu_nvml_available",
            "Whether NVML is usable (library, driver and at least the init call work).",
            value=1.0 if ok else 0.0,
        )
        if not ok:
            raise CollectorError(f"nvml unavailable: {self._session.error}")
        families = {
            s.name: _family(s.name, s.type, s.help, [*_GPU, *s.label_names]) for s in self._fields
        }
        info = GaugeMetricFamily(
            "tokenpulse_gpu_info",
            "GPU identity; always 1.",
            labels=[*_GPU, "name", "pci_bus_id", "driver_version", "cuda_version"],
        )
        lost = GaugeMetricFamily(
            "tokenpulse_gpu_lost",
            "Whether the GPU has fallen off the bus or cannot be reached (NVML GPU is lost).",
            labels=_GPU,
        )
        procs = GaugeMetricFamily(
            "tokenpulse_gpu_process_memory_used_bytes",
            "Device memory used by each process with a context on the GPU.",
            labels=[*_GPU, "pid", "process"],
        )
        failures: list[str] = []
        s = self._session
        for d in s.devices:
            gpu = [str(d.index), d.uuid]
            info.add_metric(gpu + [d.name, d.pci_bus_id, s.driver_version, s.cuda_version], 1.0)
            is_lost = d.lost_at_init or not self._read_gpu(d, gpu, families, procs, failures)
            lost.add_metric(gpu, 1.0 if is_lost else 0.0)
            if is_lost:
                failures.append(f"gpu {d.index}: lost")
        yield from families.values()
        yield info
        yield lost
        yield procs
        yield from self._xids()
        if failures:
            raise CollectorError("; ".join(failures))

    def _read_gpu(
        self,
        d: Device,
        gpu: list[str],
        families: dict[str, Any],
        procs: GaugeMetricFamily,
        failures: list[str],
    ) -> bool:
        """Fill one GPU's series; False when the GPU is lost."""
        b = self._session.backend
        results: dict[str, Any] = {}
        try:
            for call in self._calls:
                try:
                    results[call] = CALLS[call](b, d.handle)
                except NvmlNotSupported:
                    pass  # this GPU lacks the query: omit its fields, not an error
                except NvmlGpuLost:
                    raise
                except NvmlError as exc:
                    failures.append(f"gpu {d.index} {call}: {exc}")
            for proc in b.processes(d.handle):
                if proc.used_bytes is not None:
                    labels = gpu + [str(proc.pid), b.process_name(proc.pid)]
                    procs.add_metric(labels, float(proc.used_bytes))
        except NvmlGpuLost:
            return False
        except NvmlNotSupported:
            pass
        except NvmlError as exc:
            failures.append(f"gpu {d.index} processes: {exc}")
        for metric, call, extract, scale, extra in self._plan:
            if call not in results:
                continue
            value = extract(results[call])
            if value is None:
                continue
            if scale != 1:
                # 15 significant digits: 41 * 0.01 is 0.41, not 0.41000000000000003.
                value = float(f"{value * scale:.15g}")
            families[metric].add_metric(gpu + extra if extra else gpu, value)
        return True

    def _xids(self) -> Iterator[Metric]:
        counts, last = self._session.xids.read()
        index = {d.uuid: str(d.index) for d in self._session.devices}
        total = CounterMetricFamily(
            "tokenpulse_gpu_xid_errors",
            "XID critical errors reported by the driver, per XID code.",
            labels=[*_GPU, "xid"],
        )
        seen = GaugeMetricFamily(
            "tokenpulse_gpu_xid_last_timestamp_seconds",
            "When each XID code was last reported for the GPU, unix time.",
            labels=[*_GPU, "xid"],
            unit="seconds",
        )
        for (uuid, xid), n in sorted(counts.items()):
            total.add_metric([index.get(uuid, ""), uuid, str(xid)], float(n))
        for (uuid, xid), ts in sorted(last.items()):
            seen.add_metric([index.get(uuid, ""), uuid, str(xid)], ts)
        yield total
        yield seen


def _family(name: str, typ: str, doc: str, labels: list[str]) -> Any:
    if typ == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


@register("nvml", default_enabled=True, help="GPU signals through NVML (nvidia-ml-py)")
def build(sources: Sources) -> GuardedCollector:
    """The collector over the shared NVML session and fields file, with a deadline per scrape."""
    collector = NvmlCollector(sources.nvml_session(), sources.nvml_fields())
    return GuardedCollector(collector, sources.settings.nvml_timeout_seconds)
