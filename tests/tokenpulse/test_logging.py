"""structlog JSON logs with fixed keys, from any thread."""

from __future__ import annotations

import io
import json
import threading

from tokenpulse.logging import configure_logging, get_logger


def test_json_lines_with_fixed_keys_from_threads_too() -> None:
    stream = io.StringIO()
    configure_logging("demo", "INFO", stream=stream)
    log = get_logger("tests")
    log.info("hello", answer=42)
    worker = threading.Thread(target=lambda: log.warning("from a thread"))
    worker.start()
    worker.join()
    log.debug("filtered out")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "hello" and first["answer"] == 42
    assert first["level"] == "info" and first["@timestamp"].endswith("Z")
    assert second["component"] == first["component"] == "demo"
    assert second["level"] == "warning"
