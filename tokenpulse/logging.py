"""One log format for every component: structlog JSON lines, a console renderer only on a TTY.

Every line, from structlog or from the standard library (aiohttp, asyncio, TensorFlow's Python
logger), carries `@timestamp`, `level`, `component` and `message`, then the event's own fields.
structlog is configured once, at import, with processors that read the current settings, so a
logger bound at import time still follows `configure_logging`.

TensorFlow's C++ start-up chatter (`E0000 ... cuInit`, oneDNN and CPU-feature lines) is written
by TensorFlow itself, not through Python logging: `configure_logging` keeps it out unless the
level is DEBUG (see tokenpulse.native_logs); call it before anything imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import structlog
from pydantic import AfterValidator

from tokenpulse.native_logs import quiet_tensorflow

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_FIRST_KEYS = ("@timestamp", "level", "component", "logger_name", "message")


def check_level(value: str) -> str:
    """A log level name, upper-cased; ValueError for anything else."""
    if not isinstance(value, str) or value.upper() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    return value.upper()


# The settings field type of every component's `log_level`.
LogLevel = Annotated[str, AfterValidator(check_level)]


class _Output:
    """Where lines go and how they look; set by configure_logging, read at every line."""

    component = "tokenpulse"
    level = logging.INFO
    stream: Any = None
    render: list[Any] = []
    lock = threading.Lock()


_out = _Output()


def _add_component(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    # A processor, not a context var: threads do not inherit context vars.
    event.setdefault("component", _out.component)
    return event


def _key_order(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    first = {key: event.pop(key) for key in _FIRST_KEYS if key in event}
    return {**first, **event}


def _renderers(stream: Any) -> list[Any]:
    """A console renderer for a person at a TTY; JSON lines for files, pipes and collectors."""
    if getattr(stream, "isatty", lambda: False)():
        # The console renderer formats exceptions itself.
        return [structlog.dev.ConsoleRenderer(event_key="message", timestamp_key="@timestamp")]
    return [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]


def _render(logger: Any, method: str, event: Any) -> Any:
    for processor in _out.render:
        event = processor(logger, method, event)
    return event


class _Logger(structlog.BoundLoggerBase):
    """A bound logger whose level test reads `_out.level`: a filtered line costs one comparison."""

    def _emit(self, level: int, method: str, event: str | None, kw: dict[str, Any]) -> Any:
        if level < _out.level:
            return None
        return self._proxy_to_logger(method, event, **kw)

    def debug(self, event: str | None = None, **kw: Any) -> Any:
        """Log at DEBUG."""
        return self._emit(logging.DEBUG, "debug", event, kw)

    def info(self, event: str | None = None, **kw: Any) -> Any:
        """Log at INFO."""
        return self._emit(logging.INFO, "info", event, kw)

    def warning(self, event: str | None = None, **kw: Any) -> Any:
        """Log at WARNING."""
        return self._emit(logging.WARNING, "warning", event, kw)

    warn = warning

    def error(self, event: str | None = None, **kw: Any) -> Any:
        """Log at ERROR."""
        return self._emit(logging.ERROR, "error", event, kw)

    def exception(self, event: str | None = None, **kw: Any) -> Any:
        """Log at ERROR with the exception being handled."""
        kw.setdefault("exc_info", True)
        return self._emit(logging.ERROR, "error", event, kw)

    def critical(self, event: str | None = None, **kw: Any) -> Any:
        """Log at CRITICAL."""
        return self._emit(logging.CRITICAL, "critical", event, kw)


class _Writer:
    """structlog's final logger: one line to the configured stream (stderr until configured)."""

    def msg(self, message: str) -> None:
        """Write one rendered line."""
        stream = _out.stream or sys.stderr
        with _out.lock:
            stream.write(message + "\n")
            stream.flush()

    log = debug = info = warn = warning = error = exception = critical = fatal = msg


_WRITER = _Writer()
_out.render = _renderers(sys.stderr)  # until configure_logging is called
_STAMP = structlog.processors.TimeStamper(fmt="iso", utc=True, key="@timestamp")
# ECS keeps `event` for an object: the message goes under `message`.
_FINISH: list[Any] = [structlog.processors.EventRenamer("message"), _key_order, _render]
_FOREIGN: list[Any] = [_add_component, _STAMP, structlog.processors.add_log_level, *_FINISH]

# Configured once, at import: loggers bound before configure_logging (module-level `.bind()`)
# keep these processors, which read `_out` at every line, so they follow it too.
structlog.configure(
    processors=[
        structlog.contextvars.merge_contextvars,
        _add_component,
        _STAMP,
        structlog.processors.add_log_level,
        *_FINISH,
    ],
    wrapper_class=_Logger,
    logger_factory=lambda *_args: _WRITER,
    cache_logger_on_first_use=False,
)


class _Handler(logging.Handler):
    """Standard-library lines (aiohttp, asyncio, TensorFlow's Python logger) in the same format."""

    def emit(self, record: logging.LogRecord) -> None:
        """Render one record like a structlog event."""
        try:
            event: Any = {"event": record.getMessage(), "logger_name": record.name}
            if record.exc_info:
                event["exc_info"] = record.exc_info
            method = record.levelname.lower()
            for processor in _FOREIGN:
                event = processor(None, method, event)
            _WRITER.msg(event)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def configure_logging(component: str, level: str = "INFO", stream: Any = None) -> None:
    """Log `component`'s lines at `level` and above to `stream` (default stderr)."""
    name = check_level(level)
    quiet_tensorflow(name)
    _out.component, _out.level, _out.stream = component, logging.getLevelName(name), stream
    _out.render = _renderers(stream or sys.stderr)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(_Handler())
    root.setLevel(name)


def get_logger(name: str) -> Any:
    """A structlog logger tagged with its module name."""
    return structlog.get_logger(logger_name=name)


@contextlib.contextmanager
def configuration_kept() -> Iterator[None]:
    """Put the logging configuration back as it was on leaving (the root logger's level and our
    handler, and where and how lines go): for code, such as a test, that runs a CLI in-process,
    whose `configure_logging` would otherwise outlive it."""
    root = logging.getLogger()
    level = root.level
    ours = [h for h in root.handlers if isinstance(h, _Handler)]
    output = {
        k: v for k, v in vars(_out).items() if k in ("component", "level", "stream", "render")
    }
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
            root.removeHandler(handler)
        for handler in ours:
            root.addHandler(handler)
        root.setLevel(level)
        for name in ("component", "level", "stream", "render"):
            if name in output:
                setattr(_out, name, output[name])
            elif name in vars(_out):
                delattr(_out, name)  # back to the class's default
