"""structlog JSON logging with fixed keys, shared by every component."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog


def configure_logging(component: str, level: str = "INFO", stream: Any = None) -> None:
    """JSON lines on stderr: @timestamp, log.level, component, message, then the event's fields."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    logging.basicConfig(level=numeric, stream=stream or sys.stderr, format="%(message)s")

    def add_component(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        # A processor, not a context var: threads do not inherit context vars.
        event.setdefault("component", component)
        return event

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_component,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="@timestamp"),
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            # ECS keeps `event` for an object: the message goes under `message`.
            structlog.processors.EventRenamer("message"),
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    """A structlog logger tagged with its module name."""
    return structlog.get_logger(logger_name=name)
