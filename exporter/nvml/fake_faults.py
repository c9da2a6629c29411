"""Drill faults for the fake NVML backend: a JSON file it re-reads whenever the file changes.

`tokenpulse exporter --collector.nvml.backend=fake --collector.nvml.fake-faults FILE` (and
`tokenpulse up --gpu-backend fake`, which passes RUN_DIR/gpu-faults.json) lets a running drill
reach the simulated GPUs, which otherwise only tests can (through Python calls):

    {"xids": [{"id": "drill-1", "gpu": 0, "xid": 79}], "thermal_throttle": [1]}

- `xids`: each entry is reported once per `id`, as the driver reports an event once; an id seen
  before is never reported again, even after the file was cleared and written back.
- `thermal_throttle`: the GPUs held down by heat now; a GPU left out is not throttled.

A missing file means no faults. A file that is not JSON or breaks the schema (an unknown key, a
GPU the node does not have) is logged and counted, and the faults in force stay as they were: a
drill's typo never fails a scrape. Only the fake backend reads it; the exporter's settings refuse
the flag with the real backend, so no file can fake a real GPU's state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tokenpulse.logging import get_logger

log = get_logger(__name__).bind(component="exporter")


class FaultsFileError(ValueError):
    """The fault file is not JSON, breaks the schema or names a GPU the node does not have."""


class XidFault(BaseModel):
    """One XID event to report once: its id (never reported twice), the GPU and the code."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    gpu: int = Field(ge=0)
    xid: int = Field(ge=1, le=65535)


class Faults(BaseModel):
    """What the fault file asks for."""

    model_config = ConfigDict(extra="forbid")

    xids: list[XidFault] = Field(default_factory=list)
    thermal_throttle: list[int] = Field(default_factory=list)

    def check(self, n_gpus: int) -> None:
        """FaultsFileError unless every GPU index exists and every id is used once."""
        bad = sorted({x.gpu for x in self.xids} | set(self.thermal_throttle))
        bad = [i for i in bad if not 0 <= i < n_gpus]
        if bad:
            raise FaultsFileError(f"no GPU {', '.join(map(str, bad))} (the node has {n_gpus})")
        ids = [x.id for x in self.xids]
        if len(ids) != len(set(ids)):
            raise FaultsFileError("an xid id is used twice")


def parse_faults(text: str, n_gpus: int) -> Faults:
    """The faults of one file's text; FaultsFileError naming what is wrong."""
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise FaultsFileError(f"not JSON: {exc}") from exc
    try:
        faults = Faults.model_validate(doc)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise FaultsFileError(where) from exc
    faults.check(n_gpus)
    return faults


class FaultFile:
    """Watches one fault file: `poll()` returns its faults when it changed, else None."""

    def __init__(self, path: Path, n_gpus: int) -> None:
        self.path = path
        self.n_gpus = n_gpus
        self.rejected = 0  # changes of the file that were not applied
        self._seen: tuple[int, int, int] | None = None

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino  # a rename-into-place changes the inode

    def poll(self) -> Faults | None:
        """The new faults if the file changed since the last poll and is valid; else None."""
        stamp = self._stamp()
        if stamp == self._seen:
            return None
        self._seen = stamp
        if stamp is None:
            log.info("gpu fault file removed: no faults", path=str(self.path))
            return Faults()
        try:
            faults = parse_faults(self.path.read_text(encoding="utf-8"), self.n_gpus)
        except (OSError, UnicodeDecodeError, FaultsFileError) as exc:
            self.rejected += 1
            log.error("gpu fault file rejected, faults unchanged", path=str(self.path),
                      error=str(exc), rejected=self.rejected)  # fmt: skip
            return None
        log.warning("gpu faults applied", path=str(self.path), xids=len(faults.xids),
                    thermal_throttle=faults.thermal_throttle)  # fmt: skip
        return faults
