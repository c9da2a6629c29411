"""One collector per file; importing this package registers every collector by name."""

from exporter.collectors import canary, nvml, tfserving  # noqa: F401
