"""The model server launcher for tests: see tokenpulse.testing.launch (the one shared launcher)."""

from tokenpulse.testing.launch import ModelServerProcess, ModelServerStartError, running_modelserver

__all__ = ["ModelServerProcess", "ModelServerStartError", "running_modelserver"]
