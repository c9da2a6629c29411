"""One log format: structlog JSON with fixed keys from any source, console only on a TTY."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading

import pytest

from tokenpulse import native_logs
from tokenpulse.logging import check_level, configuration_kept, configure_logging, get_logger


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_with_fixed_keys_from_threads_too() -> None:
    stream = io.StringIO()
    configure_logging("demo", "INFO", stream=stream)
    log = get_logger("tests")
    log.info("hello", answer=42)
    worker = threading.Thread(target=lambda: log.warning("from a thread"))
    worker.start()
    worker.join()
    log.debug("filtered out")
    first, second = _lines(stream)
    assert list(first)[:5] == ["@timestamp", "level", "component", "logger_name", "message"]
    assert first["message"] == "hello" and first["answer"] == 42
    assert first["level"] == "info" and str(first["@timestamp"]).endswith("Z")
    assert second["component"] == first["component"] == "demo"
    assert second["level"] == "warning"


def test_loggers_bound_at_import_and_stdlib_loggers_follow_the_configuration() -> None:
    early = get_logger("early").bind(request="r1")  # as modules do at import time
    stream = io.StringIO()
    configure_logging("demo", "WARNING", stream=stream)
    early.info("below the level")
    early.warning("bound early")
    logging.getLogger("aiohttp.server").error("foreign %s", "line")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        get_logger("tests").exception("failed")
    bound, foreign, failed = _lines(stream)
    assert bound["message"] == "bound early" and bound["request"] == "r1"
    assert bound["component"] == "demo"
    assert foreign["message"] == "foreign line" and foreign["logger_name"] == "aiohttp.server"
    assert foreign["level"] == "error" and foreign["component"] == "demo"
    assert "RuntimeError: boom" in str(failed["exception"])


def test_lines_logged_before_configure_logging_are_json_too() -> None:
    code = "from tokenpulse.logging import get_logger; get_logger('early').info('hi', a=1)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stderr)
    assert (line["message"], line["a"], line["logger_name"]) == ("hi", 1, "early")


def test_console_renderer_only_on_a_tty() -> None:
    tty = _Tty()
    configure_logging("demo", "INFO", stream=tty)
    get_logger("tests").info("for a person", answer=42)
    line = re.sub(r"\x1b\[[0-9;]*m", "", tty.getvalue())  # without the colours
    assert "for a person" in line and "answer=42" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def test_configuring_twice_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("demo", "INFO", stream=first)
    configure_logging("demo", "INFO", stream=second)
    get_logger("tests").info("once")
    assert first.getvalue() == "" and len(_lines(second)) == 1


def test_levels_are_checked_and_map_onto_tensorflow_cpp_logging() -> None:
    assert check_level("debug") == "DEBUG"
    with pytest.raises(ValueError, match="log level must be one of DEBUG, INFO, WARNING, ERROR"):
        configure_logging("demo", "chatty")
    hooks = list(sys.meta_path)
    configure_logging("demo", "DEBUG", stream=io.StringIO())
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert sys.meta_path == [h for h in hooks if h is not native_logs._QUIET]
    configure_logging("demo", "INFO", stream=io.StringIO())
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"
    if "tensorflow" not in sys.modules:  # the first TF import will be quiet, once
        assert sys.meta_path.count(native_logs._QUIET) == 1
    native_logs.uninstall()


def test_configuration_kept_puts_logging_back_as_it_was() -> None:
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    with configuration_kept():
        configure_logging("demo", "DEBUG", stream=io.StringIO())
        assert root.level == logging.DEBUG
    assert (root.level, list(root.handlers)) == before
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        logging.getLogger("httpx").info("HTTP Request: x")  # below the level as it was
    assert err.getvalue() == ""
