"""One log format for every component: structlog JSON lines, a console renderer only on a TTY.

Every line, from structlog or from the standard library (aiohttp, asyncio, TensorFlow's Python
logger), carries `@timestamp`, `level`, `component` and `message`, then the event's own fields.
structlog routes through the standard library, so a logger bound at import time still follows
`configure_logging`, which only swaps the root handler and its level.

TensorFlow's C++ start-up chatter (`E0000 ... cuInit`, oneDNN and CPU-feature lines) is written
by TensorFlow itself, not through Python logging: `configure_logging` sets TF_CPP_MIN_LOG_LEVEL
before TensorFlow is imported so that it shows only at DEBUG.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from typing import Annotated, Any

import structlog
from pydantic import AfterValidator

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# TF_CPP_MIN_LOG_LEVEL: 0 shows INFO and up, 3 only FATAL. The cuInit line is an ERROR on every
# machine without a GPU, so anything short of DEBUG keeps TensorFlow's C++ log quiet.
_TF_CPP_LEVEL = {"DEBUG": "0", "INFO": "3", "WARNING": "3", "ERROR": "3"}
_FIRST_KEYS = ("@timestamp", "level", "component", "logger_name", "message")
_component = "tokenpulse"


def check_level(value: str) -> str:
    """A log level name, upper-cased; ValueError for anything else."""
    if not isinstance(value, str) or value.upper() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    return value.upper()


# The settings field type of every component's `log_level`.
LogLevel = Annotated[str, AfterValidator(check_level)]


def _add_component(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    # A processor, not a context var: threads do not inherit context vars.
    event.setdefault("component", _component)
    return event


def _foreign_logger_name(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    # Lines from the standard library (aiohttp, asyncio, TensorFlow) name their logger too.
    if not event.get("_from_structlog") and "_record" in event:
        event.setdefault("logger_name", event["_record"].name)
    return event


def _key_order(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    first = {key: event.pop(key) for key in _FIRST_KEYS if key in event}
    return {**first, **event}


_PRE_CHAIN: list[Any] = [
    structlog.contextvars.merge_contextvars,
    _add_component,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="@timestamp"),
    structlog.processors.add_log_level,
]

structlog.configure(
    processors=[
        structlog.stdlib.filter_by_level,
        *_PRE_CHAIN,
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    wrapper_class=structlog.stdlib.BoundLogger,
    logger_factory=structlog.stdlib.LoggerFactory(),
    cache_logger_on_first_use=False,
)


class _Handler(logging.StreamHandler):
    """The root handler that configure_logging owns (and replaces on a second call)."""


def configure_logging(component: str, level: str = "INFO", stream: Any = None) -> None:
    """Log `component`'s lines at `level` and above to `stream` (default stderr)."""
    global _component
    name = check_level(level)
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = _TF_CPP_LEVEL[name]
    _component = component
    stream = stream or sys.stderr
    tty = getattr(stream, "isatty", lambda: False)()
    # The console renderer formats exceptions itself; JSON wants them as a string field.
    render: list[Any] = (
        [structlog.dev.ConsoleRenderer(event_key="message", timestamp_key="@timestamp")]
        if tty
        else [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    )
    handler = _Handler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_PRE_CHAIN,
            processors=[
                _foreign_logger_name,
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                # ECS keeps `event` for an object: the message goes under `message`.
                structlog.processors.EventRenamer("message"),
                _key_order,
                *render,
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(name)


def get_logger(name: str) -> Any:
    """A structlog logger tagged with its module name."""
    return structlog.get_logger(name, logger_name=name)
