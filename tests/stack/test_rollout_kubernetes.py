"""`tokenpulse rollout --deployment kubernetes`: the models.config is the tfserving-config
ConfigMap's source, so a move is written and the way to apply it printed (nothing polls it), and
the canary weight, which no file holds there, is refused with the kubectl line that sets it.
The gateway is a stand-in answering /readyz as the real one does (a port-forward's address)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from serving.gateway.settings import GatewaySettings
from stack.cli import main
from stack.rollout.labels import ModelsConfig
from stack.rollout.settings import K8S_CANARY_WEIGHT, RolloutSettings
from tokenpulse import paths
from tokenpulse.tfserving.render import render_models_config

READY = {"models": {"gen": {"available_versions": ["1", "2"], "labels": {"stable": 1}}}}


@pytest.fixture
def gateway() -> Iterator[str]:
    """A gateway whose /readyz routes stable to 1 whatever the file says (nothing applied)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.dumps(READY).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def models_config(tmp_path: Path) -> Path:
    path = tmp_path / "models.container.config"
    path.write_text(render_models_config("gen", "/models/gen", (1, 2), {"stable": 1}))
    return path


def rollout(capsys: pytest.CaptureFixture[str], gateway: str, *argv: str) -> tuple:
    capsys.readouterr()
    code = main(["rollout", *argv, "--deployment=kubernetes", f"--gateway-url={gateway}"])
    out, err = capsys.readouterr()
    return code, out, err


def test_kubernetes_moves_the_config_maps_source() -> None:
    settings = RolloutSettings(deployment="kubernetes")
    assert settings.models_config == paths.SERVING_CONFIG / "models.container.config"
    kustomization = paths.ROOT / "deploy/k8s/components/serving-config/kustomization.yaml"
    (generator,) = yaml.safe_load(kustomization.read_text())["configMapGenerator"]
    assert generator["name"] == "tfserving-config"
    assert settings.models_config.name in generator["files"]
    assert settings.canary_weight_path is None


def test_a_label_move_is_written_with_how_to_apply_it_without_waiting(
    capsys: pytest.CaptureFixture[str], gateway: str, models_config: Path
) -> None:
    start = time.monotonic()
    code, out, err = rollout(
        capsys, gateway, "label", "stable", "2", f"--model-config-file={models_config}"
    )
    assert (code, err) == (0, "")
    assert time.monotonic() - start < 5  # local would wait wait_s (15 s) for the gateway
    assert "stable -> version 2 (was version 1)" in out
    assert "kubectl apply --server-side -k deploy/k8s/overlays/" in out
    assert ModelsConfig.read(models_config).labels("gen") == {"stable": 2}
    code, out, _ = rollout(capsys, gateway, "status", f"--model-config-file={models_config}")
    assert code == 0
    assert "labels the gateway routes by: stable -> 1" in out
    assert "labels in the file (not applied yet): stable -> 2" in out
    assert "TOKENPULSE_GATEWAY_CANARY_WEIGHT" in out
    code, out, _ = rollout(capsys, gateway, "rollback", f"--model-config-file={models_config}")
    assert code == 0 and "stable back to version 1 (from 2)" in out
    assert ModelsConfig.read(models_config).labels("gen") == {"stable": 1}


def test_the_canary_weight_is_refused_with_the_kubectl_line(
    capsys: pytest.CaptureFixture[str], gateway: str
) -> None:
    code, out, err = rollout(capsys, gateway, "canary-weight", "0")
    assert code == 1 and out == ""
    assert err.startswith("tokenpulse rollout: error: ") and err.count("\n") == 1
    assert K8S_CANARY_WEIGHT in err
    variable = K8S_CANARY_WEIGHT.split()[-1].split("=")[0]
    prefix = GatewaySettings.model_config["env_prefix"]
    assert variable.removeprefix(prefix).lower() in GatewaySettings.model_fields
