"""`tokenpulse up`'s settings and StackConfig for unit tests: free ports, a tmp run directory."""

from __future__ import annotations

from pathlib import Path

from stack.config import StackConfig
from stack.up import plan
from stack.up.settings import PORT_FIELDS, UpSettings
from tokenpulse.procs import free_port

# Replica i of the model server listens on the REST and gRPC ports + 2i: ports drawn this far
# apart leave every replica's ports to it, so a test that sets one collision sees only that one.
PORT_GAP = 16


def _spread_ports(n: int) -> list[int]:
    """`n` free ports, each more than PORT_GAP from the others."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if all(abs(port - other) > PORT_GAP for other in ports):
            ports.append(port)
    return ports


def up_settings(tmp_path: Path, **kw: object) -> UpSettings:
    """UpSettings on free ports, with its run and models folders under `tmp_path`."""
    ports = dict(zip(PORT_FIELDS, _spread_ports(len(PORT_FIELDS)), strict=True))
    return UpSettings(run_dir=tmp_path / "run", models_dir=tmp_path / "models", **{**ports, **kw})


def up_config(s: UpSettings) -> StackConfig:
    """`up`'s StackConfig, with the export metadata it reads in place."""
    meta = s.models_dir / "gen" / "1" / "assets.extra" / "tokenpulse_model.json"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text('{"model": {"context": 64, "d_model": 64}}')
    return plan.stack_config(s)
