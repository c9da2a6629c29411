"""`tokenpulse up`'s settings and StackConfig for unit tests: free ports, a tmp run directory."""

from __future__ import annotations

from pathlib import Path

from stack.config import StackConfig
from stack.up import plan
from stack.up.settings import PORT_FIELDS, UpSettings
from tokenpulse.procs import free_port


def up_settings(tmp_path: Path, **kw: object) -> UpSettings:
    """UpSettings on free ports, with its run and models folders under `tmp_path`."""
    ports = {name: free_port() for name in PORT_FIELDS}
    return UpSettings(run_dir=tmp_path / "run", models_dir=tmp_path / "models", **{**ports, **kw})


def up_config(s: UpSettings) -> StackConfig:
    """`up`'s StackConfig, with the export metadata it reads in place."""
    meta = s.models_dir / "gen" / "1" / "assets.extra" / "tokenpulse_model.json"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text('{"model": {"context": 64, "d_model": 64}}')
    return plan.stack_config(s)
