"""The gateway is a light process: no TensorFlow, neither imported nor mapped into memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.serving.gateway.helpers import auth
from tests.support.gateway import running_gateway
from tokenpulse.testing.tfserving_standin import TfServingStandin

PROBE = """
import json, sys
import serving.gateway.server, serving.gateway.cli, serving.gateway.app, tokenpulse.bench.gateway
import tokenpulse.cli
tokenpulse.cli.build_parser()  # loads every registered command module, as `tokenpulse` does
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
