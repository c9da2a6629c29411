"""TensorFlow's native start-up lines stay out of our logs unless the log level is DEBUG.

TensorFlow's C++ code writes straight to fd 2 (`E0000 ... cuInit`, oneDNN and CPU-feature notes,
`cudart_stub.cc ... Could not find cuda drivers`, absl's "All log messages before
absl::InitializeLog()" notice). TF_CPP_MIN_LOG_LEVEL silences most of them but not those logged
through absl directly, so the first `import tensorflow` (wherever it happens) also runs with fd 2
captured: TensorFlow's INFO and WARNING lines are dropped and anything else is passed on.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

# TF_CPP_MIN_LOG_LEVEL: 0 shows INFO and up, 3 only FATAL. The cuInit line is an ERROR on every
# machine without a GPU, so anything short of DEBUG keeps TensorFlow's C++ log quiet.
_TF_CPP_LEVEL = {"DEBUG": "0", "INFO": "3", "WARNING": "3", "ERROR": "3"}
# glog/absl lines at INFO or WARNING ("I0000 00:00:1796098437.25  123 file.cc:31] ...") and the
# notice absl prints before them.
NATIVE_CHATTER = re.compile(
    r"^(?:[IW]\d{4} \d\d:\d\d:[\d.]+\s+\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called)"
)


@contextlib.contextmanager
def _chatter_dropped() -> Iterator[None]:
    """Capture fd 2; on the way out, write back every line that is not native chatter."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines():
                if not NATIVE_CHATTER.match(line):
                    sys.stderr.write(line + "\n")
            sys.stderr.flush()


@contextlib.contextmanager
def keras_refused() -> Iterator[None]:
    """For the block, `import keras` fails as a missing module's would, so that TensorFlow leaves
    `tf.keras` to load later (tokenpulse.tfimport); unless Keras is imported already."""
    refused = "keras" not in sys.modules
    if refused:
        sys.modules["keras"] = None  # type: ignore[assignment]  # the import system's "no such module"
    try:
        yield
    finally:
        if refused and sys.modules.get("keras", False) is None:
            del sys.modules["keras"]


class _QuietLoader(importlib.abc.Loader):
    """TensorFlow's own loader, run with the chatter dropped, devices started too."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)  # resource readers and the like

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        """The real loader's module."""
        module: ModuleType | None = self.real.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Import TensorFlow (without Keras: tokenpulse.tfimport) and start its devices (where
        cuInit and cudart log) quietly."""
        with _chatter_dropped(), keras_refused():
            self.real.exec_module(module)
            module.config.list_physical_devices()


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the first `import tensorflow`, then steps aside."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """Only `tensorflow` itself; every other import goes on as usual."""
        if fullname != "tensorflow":
            return None
        uninstall()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


def uninstall() -> None:
    """Remove the import hook (it removes itself after the first `import tensorflow`)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowFinder)]


def quiet_tensorflow(level: str) -> None:
    """Map `level` onto TF_CPP_MIN_LOG_LEVEL; below DEBUG, make the first TF import quiet."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = _TF_CPP_LEVEL[level]
    uninstall()
    if level != "DEBUG" and "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _QuietTensorFlowFinder())
