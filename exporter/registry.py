"""The collector registry: every collector registers itself by name, node_exporter style.

`--collector.<name>` / `--no-collector.<name>` flags are generated from this registry, and the
scrape wrapper (`exporter.scrape`) runs whichever collectors are enabled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import Metric

if TYPE_CHECKING:
    from exporter.sources import Sources


class CollectorError(Exception):
    """A collector could not collect everything; the scrape still succeeds with success 0."""


class Collector(Protocol):
    """What the scrape wrapper runs: a prometheus_client custom collector."""

    def collect(self) -> Iterable[Metric]:
        """Yield fresh metric families; raise CollectorError (after yielding) on a partial fail."""
        ...


Factory = Callable[["Sources"], Collector]


@dataclass(frozen=True)
class CollectorSpec:
    """One registered collector: its name, whether it runs by default, and how to build it."""

    name: str
    default_enabled: bool
    help: str
    factory: Factory


COLLECTORS: dict[str, CollectorSpec] = {}


def register(name: str, *, default_enabled: bool, help: str) -> Callable[[Factory], Factory]:
    """Decorator on a collector factory: `@register("nvml", default_enabled=True, help=...)`."""

    def wrap(factory: Factory) -> Factory:
        if name in COLLECTORS:
            raise ValueError(f"collector {name!r} registered twice")
        COLLECTORS[name] = CollectorSpec(name, default_enabled, help, factory)
        return factory

    return wrap


def specs() -> dict[str, CollectorSpec]:
    """Every collector, once all collector modules are imported."""
    import exporter.collectors  # noqa: F401  (importing registers each collector)

    return dict(COLLECTORS)


def enabled_names(overrides: dict[str, bool]) -> list[str]:
    """Collector names to run: each collector's default unless overridden, in registry order."""
    known = specs()
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"unknown collector(s): {', '.join(unknown)}")
    return [name for name, spec in known.items() if overrides.get(name, spec.default_enabled)]
