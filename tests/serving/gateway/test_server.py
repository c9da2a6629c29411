"""The gateway is a light process: no TensorFlow, neither imported nor mapped into memory."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from devtools.standins.tfserving import TfServingStandin
from tests.serving.gateway.helpers import auth, metric_value
from tests.support.gateway import running_gateway

PROBE = """
import json, sys
import serving.gateway.server, serving.gateway.cli, serving.gateway.app, devtools.bench.gateway
import stack.cli
stack.cli.build_parser()  # loads every registered command module, as `tokenpulse` does
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
                        ("tensorflow", "tensorflow_serving", "keras", "tf_keras"))))
"""


def test_importing_the_gateway_does_not_import_tensorflow() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_serving_gateway_has_no_tensorflow_mapped(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    with running_gateway(standin.url, keys_file) as gw:
        for route, body in (
            ("generate", {"prompt": "hi"}),
            ("completions", {"model": "gen", "prompt": "hi"}),
        ):
            resp = httpx.post(f"{gw.url}/v1/{route}", json=body, headers=auth(keys["demo"]))
            assert resp.status_code == 200
        maps = Path(f"/proc/{gw.pid}/maps").read_text()
    assert "tensorflow" not in maps and "libtensorflow" not in maps


async def _answers(port: int, silent: int, trickling: int) -> list[bytes]:
    """Open connections that never finish a request head; return what each got before closing."""
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(silent + trickling)]

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """One header line every 0.1 s, never the blank line, until an answer comes: a line
        written after the gateway's close would meet its reset, and a reset stream reader raises
        instead of returning the answer it holds."""
        writer.write(b"POST /v1/generate HTTP/1.1\r\nHost: x\r\n")
        for n in range(200):
            try:
                got = await asyncio.wait_for(reader.read(65536), 0.1)
            except TimeoutError:
                writer.write(f"X-Slow-{n}: 1\r\n".encode())
                continue
            return got + await asyncio.wait_for(reader.read(), 15)
        return b""

    answers = await asyncio.gather(
        *(asyncio.wait_for(r.read(), 15) for r, _ in conns[:silent]),
        *(trickle(r, w) for r, w in conns[silent:]),
    )
    for _, writer in conns:
        writer.close()
    return answers


def test_slow_and_silent_connections_are_closed_while_requests_are_served(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    # 3 s: a request sent by this worker, which runs at nice 19 beside the lanes, once took over
    # 1 s to arrive whole and got the 408 meant for the silent ones (r72)
    with running_gateway(standin.url, keys_file, header_timeout_s=3.0, access_log=False) as gw:
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(asyncio.run, _answers(gw.port, silent=150, trickling=150))
            # the claim is that they are served, not how fast: on a machine busy with the rest of
            # the suite an answer once took longer than httpx's default 5 s
            statuses = [
                httpx.post(
                    f"{gw.url}/v1/generate",
                    json={"prompt": "hi"},
                    headers=auth(keys["demo"]),
                    timeout=60,
                ).status_code
                for _ in range(20)
            ]
            answers = held.result()
        rejected = metric_value(
            gw.url, "tokenpulse_gateway_connections_rejected_total", reason="header_timeout"
        )
    assert statuses == [200] * 20
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 ")
        assert json.loads(body)["error"]["code"] == "request_timeout"
    assert rejected == 300


def test_connections_over_the_cap_get_503(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    with running_gateway(standin.url, keys_file, max_connections=3) as gw:
        with socket.create_connection(("127.0.0.1", gw.port)) as a:
            with socket.create_connection(("127.0.0.1", gw.port)) as b:
                with socket.create_connection(("127.0.0.1", gw.port)) as c:
                    with socket.create_connection(("127.0.0.1", gw.port)) as over:
                        over.settimeout(15)
                        answer = b"".join(iter(lambda: over.recv(4096), b""))
                del a, b, c
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ")
        assert json.loads(body)["error"]["message"] == "too many open connections (limit 3)"
        # slots are free again once those connections closed
        for _ in range(50):
            resp = httpx.post(
                f"{gw.url}/v1/generate", json={"prompt": "hi"}, headers=auth(keys["demo"])
            )
            if resp.status_code == 200:
                break
            time.sleep(0.1)
        assert resp.status_code == 200


def test_the_event_loop_setting_picks_uvloop_or_asyncio() -> None:
    import uvloop

    from serving.gateway.server import loop_factory

    factory = loop_factory("uvloop")
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    assert loop_factory("asyncio") is None


def test_the_gateway_serves_on_both_event_loops(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    for event_loop in ("uvloop", "asyncio"):
        with running_gateway(standin.url, keys_file, event_loop=event_loop) as gw:
            headers = auth(keys["demo"])
            r = httpx.post(f"{gw.url}/v1/generate", json={"prompt": "hi"}, headers=headers)
            assert r.status_code == 200, r.text
            assert r.json()["text"]
