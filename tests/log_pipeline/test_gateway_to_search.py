"""A request through a real gateway process shows up, redacted, in `samples search`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from devtools.standins.tfserving import TfServingStandin
from stack.cli import main
from tests.log_pipeline.support import shipped, shipper_settings, shipping, wait_until
from tests.support.gateway import make_keys_file, running_gateway


def test_request_to_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spool = tmp_path / "spool"
    rules = tmp_path / "rules.toml"
    rules.write_text("head_rate = 1.0\n")
    keys = make_keys_file(tmp_path / "keys.json", demo={})
    env = {"TOKENPULSE_SINK_SPOOL_DIR": str(spool), "TOKENPULSE_SINK_RULES_FILE": str(rules)}
    settings = shipper_settings(spool, outputs=["sqlite"])
    with (
        TfServingStandin() as upstream,
        running_gateway(upstream.url, tmp_path / "keys.json", env=env,
                        sample_sink="log_pipeline.sink:make_sink") as gw,
        shipping(settings) as sh,
    ):  # fmt: skip
        resp = httpx.post(
            f"{gw.url}/v1/generate",
            json={"prompt": "my card is 4111 1111 1111 1111, mail me at ann@example.com"},
            headers={"Authorization": f"Bearer {keys['demo']}"},
        )
        assert resp.status_code == 200
        wait_until(lambda: shipped(sh, "sqlite") == 1, "the sample in the embedded store")
    assert main(["samples", "search", "--sqlite-path", str(settings.sqlite_path), "--json",
                 "--text", "mail"]) == 0  # fmt: skip
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert "4111" not in line and "ann@example.com" not in line
    prompt = record["genai_sample"]["prompt"]["text"]
    assert prompt == "my card is [REDACTED:card], mail me at [REDACTED:email]"
    assert record["genai_sample"]["redaction"]["kinds"] == {"card": 1, "email": 1}
    assert record["genai_sample"]["key_id"] == "demo"
