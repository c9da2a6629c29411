"""The model server launcher for tests: see stack.launch (the one shared launcher)."""

from stack.launch import ModelServerProcess, ModelServerStartError, running_modelserver

__all__ = ["ModelServerProcess", "ModelServerStartError", "running_modelserver"]
