"""The model server launcher for tests: see stack.launch (the one shared launcher).

MODELSERVER_TEST_ENV is what every model server the suite starts runs with (tests/conftest.py puts
it in the suite's environment, tests/e2e/upstack.py in `up`'s): no Grappler rewrites. They cost
about 2 CPU-s of each version's first calls, and the tiny exports the suite serves decode no faster
for them (serving/modelserver/server.py, configure_tensorflow).
"""

from stack.launch import ModelServerProcess, ModelServerStartError, running_modelserver

MODELSERVER_TEST_ENV = {"TOKENPULSE_MODELSERVER_GRAPH_REWRITES": "false"}

__all__ = [
    "MODELSERVER_TEST_ENV",
    "ModelServerProcess",
    "ModelServerStartError",
    "running_modelserver",
]
