"""The NVML field table: which backend reading feeds which metric, read from `fields.csv`.

Like dcgm-exporter's counters file, the set of exported GPU fields is data: a commented file,
parsed strictly, with line numbers in every error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.nvml.backend import NvmlBackend

DEFAULT_FIELDS_FILE = Path(__file__).with_name("fields.csv")

# Backend calls, each made at most once per GPU per scrape however many fields read it.
CALLS: dict[str, Callable[[NvmlBackend, Any], Any]] = {
    "utilization": lambda b, h: b.utilization(h),
    "memory": lambda b, h: b.memory(h),
    "temperature": lambda b, h: b.temperature(h),
    "memory_temperature": lambda b, h: b.memory_temperature(h),
    "power_usage": lambda b, h: b.power_usage(h),
    "power_limit": lambda b, h: b.power_limit(h),
    "total_energy": lambda b, h: b.total_energy(h),
    "clock_sm": lambda b, h: b.clock(h, "sm"),
    "clock_mem": lambda b, h: b.clock(h, "mem"),
    "max_clock_sm": lambda b, h: b.max_clock(h, "sm"),
    "max_clock_mem": lambda b, h: b.max_clock(h, "mem"),
    "clocks_event_reasons": lambda b, h: b.clocks_event_reasons(h),
    "violation_power": lambda b, h: b.violation_time(h, "power"),
    "violation_thermal": lambda b, h: b.violation_time(h, "thermal"),
    "ecc_corrected": lambda b, h: b.ecc_errors(h, "corrected"),
    "ecc_uncorrected": lambda b, h: b.ecc_errors(h, "uncorrected"),
    "remapped_rows": lambda b, h: b.remapped_rows(h),
    "pcie_replays": lambda b, h: b.pcie_replays(h),
    "pcie_tx": lambda b, h: b.pcie_throughput(h, "tx"),
    "pcie_rx": lambda b, h: b.pcie_throughput(h, "rx"),
}

# NVML clocks event reason bits (nvmlClocksEventReason*).
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def _same(r: Any) -> float | None:
    return float(r)


def _item(i: int) -> Callable[[Any], float | None]:
    return lambda r: float(r[i])


def _attr(name: str) -> Callable[[Any], float | None]:
    def get(r: Any) -> float | None:
        value = getattr(r, name)
        return None if value is None else float(value)

    return get


def _bit(mask: int) -> Callable[[Any], float | None]:
    return lambda r: 1.0 if int(r) & mask else 0.0


# field -> (call, how to get the value out of the call's result); None means "not reported".
FIELDS: dict[str, tuple[str, Callable[[Any], float | None]]] = {
    "utilization.gpu": ("utilization", _item(0)),
    "utilization.memory": ("utilization", _item(1)),
    "memory.total": ("memory", _attr("total")),
    "memory.used": ("memory", _attr("used")),
    "memory.free": ("memory", _attr("free")),
    "memory.reserved": ("memory", _attr("reserved")),
    "temperature.gpu": ("temperature", _same),
    "temperature.memory": ("memory_temperature", _same),
    "power.usage": ("power_usage", _same),
    "power.limit": ("power_limit", _same),
    "energy.total": ("total_energy", _same),
    "clocks.sm": ("clock_sm", _same),
    "clocks.mem": ("clock_mem", _same),
    "clocks.max.sm": ("max_clock_sm", _same),
    "clocks.max.mem": ("max_clock_mem", _same),
    **{
        f"clocks_event_reasons.{reason}": ("clocks_event_reasons", _bit(bit))
        for reason, bit in REASON_BITS.items()
    },
    "violation.power": ("violation_power", _same),
    "violation.thermal": ("violation_thermal", _same),
    "ecc.corrected": ("ecc_corrected", _same),
    "ecc.uncorrected": ("ecc_uncorrected", _same),
    "remapped_rows.correctable": ("remapped_rows", _item(0)),
    "remapped_rows.uncorrectable": ("remapped_rows", _item(1)),
    "remapped_rows.pending": ("remapped_rows", _item(2)),
    "remapped_rows.failure": ("remapped_rows", _item(3)),
    "pcie.replays": ("pcie_replays", _same),
    "pcie.tx": ("pcie_tx", _same),
    "pcie.rx": ("pcie_rx", _same),
}

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_RESERVED_LABELS = {"gpu", "uuid"}


class FieldsFileError(ValueError):
    """The NVML fields file is malformed; the message names the line."""


@dataclass(frozen=True)
class FieldRow:
    """One line of the fields file."""

    metric: str  # full name, tokenpulse_gpu_...
    type: str
    field: str
    scale: float
    labels: tuple[tuple[str, str], ...]
    help: str


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric and the rows (series) that feed it."""

    name: str
    type: str
    help: str
    label_names: tuple[str, ...]
    rows: tuple[FieldRow, ...]


def parse_fields(text: str, source: str = "fields.csv") -> list[MetricSpec]:
    """Parse the fields file into metric specs, in file order."""
    specs: dict[str, MetricSpec] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        row = _row(line, f"{source} line {lineno}")
        where = f"{source} line {lineno}"
        if (row.metric, row.labels) in seen:
            raise FieldsFileError(f"{where}: duplicate series {row.metric} {dict(row.labels)}")
        seen.add((row.metric, row.labels))
        names = tuple(k for k, _ in row.labels)
        spec = specs.get(row.metric)
        if spec is None:
            if not row.help:
                raise FieldsFileError(f"{where}: first line of {row.metric} needs a help text")
            specs[row.metric] = MetricSpec(row.metric, row.type, row.help, names, (row,))
            continue
        if names != spec.label_names:
            raise FieldsFileError(f"{where}: {row.metric} needs labels {list(spec.label_names)}")
        specs[row.metric] = MetricSpec(
            spec.name, spec.type, spec.help, spec.label_names, (*spec.rows, row)
        )
    if not specs:
        raise FieldsFileError(f"{source}: no fields")
    return list(specs.values())


def _row(line: str, where: str) -> FieldRow:
    parts = [p.strip() for p in line.split(",", 5)]
    if len(parts) != 6:
        raise FieldsFileError(f"{where}: expected 6 comma-separated columns, got {len(parts)}")
    metric, typ, field, scale_text, labels_text, help_text = parts
    if not _NAME.fullmatch(metric):
        raise FieldsFileError(f"{where}: bad metric name {metric!r}")
    if typ not in ("gauge", "counter"):
        raise FieldsFileError(f"{where}: type must be gauge or counter, not {typ!r}")
    if (typ == "counter") != metric.endswith("_total"):
        raise FieldsFileError(f"{where}: counters, and only counters, end in _total")
    if field not in FIELDS:
        raise FieldsFileError(f"{where}: unknown field {field!r}")
    try:
        scale = float(scale_text)
    except ValueError as exc:
        raise FieldsFileError(f"{where}: scale {scale_text!r} is not a number") from exc
    labels: list[tuple[str, str]] = []
    for pair in filter(None, (p.strip() for p in labels_text.split(";"))):
        key, sep, value = pair.partition("=")
        if not sep or not _NAME.fullmatch(key) or not value:
            raise FieldsFileError(f"{where}: labels must be k=v;k=v with lower-case names")
        if key in _RESERVED_LABELS:
            raise FieldsFileError(f"{where}: label {key!r} is set by the collector")
        labels.append((key, value))
    return FieldRow(f"tokenpulse_gpu_{metric}", typ, field, scale, tuple(sorted(labels)), help_text)


def load_fields(path: Path | None = None) -> list[MetricSpec]:
    """The metric specs of a fields file (the packaged one by default)."""
    path = path or DEFAULT_FIELDS_FILE
    try:
        text = path.read_text()
    except OSError as exc:
        raise FieldsFileError(f"cannot read nvml fields file {path}: {exc.strerror}") from exc
    return parse_fields(text, path.name)
