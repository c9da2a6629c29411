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
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
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


ExecModule = Callable[[ModuleType], None]


class _WrappedLoader(importlib.abc.Loader):
    """TensorFlow's own loader, its `exec_module` run through a hook's `run`."""

    def __init__(self, real: Any, run: Callable[[ExecModule, ModuleType], None]) -> None:
        self.real = real
        self.run = run

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)  # resource readers and the like

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        """The real loader's module."""
        module: ModuleType | None = self.real.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The real `exec_module`, as the hook runs it."""
        self.run(self.real.exec_module, module)


class FirstTensorFlowImport(importlib.abc.MetaPathFinder):
    """An import hook: the first `import tensorflow` runs TensorFlow's own loader through
    `run(exec_module, module)`; then the hook steps aside. Hooks compose: each finds the spec
    through the finders left, so another hook's wrapping is kept."""

    def __init__(self, run: Callable[[ExecModule, ModuleType], None]) -> None:
        self.run = run

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """Only `tensorflow` itself; every other import goes on as usual."""
        if fullname != "tensorflow":
            return None
        self.remove()
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _WrappedLoader(spec.loader, self.run)
        return spec

    def install(self) -> None:
        """Hook the first import, where TensorFlow is not imported yet."""
        if "tensorflow" not in sys.modules and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        """Take the hook out (it takes itself out at the first `import tensorflow`)."""
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]


def _quietly(exec_module: ExecModule, module: ModuleType) -> None:
    """Import TensorFlow (without Keras: tokenpulse.tfimport) and start its devices (where
    cuInit and cudart log) quietly."""
    with _chatter_dropped(), keras_refused():
        exec_module(module)
        module.config.list_physical_devices()


_QUIET = FirstTensorFlowImport(_quietly)


def uninstall() -> None:
    """Remove the quiet import hook (it removes itself after the first `import tensorflow`)."""
    _QUIET.remove()


def quiet_tensorflow(level: str) -> None:
    """Map `level` onto TF_CPP_MIN_LOG_LEVEL; below DEBUG, make the first TF import quiet."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = _TF_CPP_LEVEL[level]
    uninstall()
    if level != "DEBUG":
        _QUIET.install()
