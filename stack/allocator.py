"""tcmalloc under the components `stack.launch` starts, where the machine has it.

TensorFlow allocates and frees tensor buffers at every op. glibc's malloc serves the large ones
with mmap and hands them back with munmap, so each step faults its pages in again. tcmalloc keeps
them. On this project's 2-core machine, tcmalloc took TensorFlow's system time from about a
quarter of its CPU to a twentieth (`tokenpulse bench malloc` measures it side by side). TF
Serving's own builds link it in for the same reason.

A process cannot change its allocator once it runs, so this sets LD_PRELOAD for the processes a
launcher starts (`launch_env`): both zygotes and every exec'd launch get the same variable, so a
launch still forks (stack/zygote.py compares LD_ variables). The library comes with Debian's
libtcmalloc-minimal4 (scripts/ensure-debs.sh installs it). Without it, nothing is preloaded and
glibc's malloc serves, as before.

  TOKENPULSE_TCMALLOC   auto (default: preload it where installed) or off
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from tokenpulse.settings_cli import SettingsError, shown

LIBRARY = "libtcmalloc_minimal.so.4"
# where Debian and others install it; the multiarch folder first
FOLDERS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
           "/usr/local/lib")  # fmt: skip


class AllocatorError(SettingsError):
    """TOKENPULSE_TCMALLOC holds a value it cannot take (`tokenpulse` checks it at start-up)."""


class AllocatorSettings(BaseSettings):
    """Whether launched components run on tcmalloc."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_", extra="ignore")

    tcmalloc: Literal["auto", "off"] = Field(
        default="auto", description="auto: preload tcmalloc where installed; off: glibc's malloc"
    )


def settings() -> AllocatorSettings:
    """AllocatorSettings from the environment; AllocatorError naming the variable otherwise."""
    try:
        return AllocatorSettings()
    except ValidationError as exc:
        raise AllocatorError(
            f"TOKENPULSE_TCMALLOC={shown(os.environ.get('TOKENPULSE_TCMALLOC'))} is not valid: "
            f"{exc.errors()[0]['msg']}"
        ) from None


def tcmalloc_path() -> Path | None:
    """The installed tcmalloc library, or None."""
    for folder in FOLDERS:
        path = Path(folder) / LIBRARY
        if path.is_file():
            return path
    return None


def preloading(env: Mapping[str, str], library: Path | None) -> dict[str, str]:
    """`env` with `library` first in LD_PRELOAD (unchanged when None or already there)."""
    out = dict(env)
    if library is None:
        return out
    present = [p for p in out.get("LD_PRELOAD", "").replace(":", " ").split() if p]
    if str(library) not in present:
        out["LD_PRELOAD"] = " ".join([str(library), *present])
    return out


def with_tcmalloc(env: Mapping[str, str]) -> dict[str, str]:
    """`env` preloading tcmalloc, unless this process's TOKENPULSE_TCMALLOC is off or the library
    is not installed."""
    return preloading(env, tcmalloc_path() if settings().tcmalloc == "auto" else None)


def loaded(pid: int | None = None) -> bool:
    """Whether tcmalloc is mapped into process `pid` (None: this one)."""
    maps = Path(f"/proc/{pid or os.getpid()}/maps")
    return LIBRARY.split(".so")[0] in maps.read_text()
