"""Hand memory freed after a large request back to the operating system.

Decoding a multi-megabyte JSON body allocates millions of small objects; once they are freed,
glibc keeps the pages in its arenas, so the server's RSS stays at its peak. `malloc_trim` returns
them. Elsewhere (no glibc) this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from typing import Any


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_free_memory() -> bool:
    """Collect garbage cycles, then ask glibc to return free heap pages to the OS; True when it
    released some."""
    gc.collect()
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
