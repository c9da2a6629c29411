"""Where the repository's own files are: one home for every path the components and tools read.

Only a checkout has these folders (the wheel ships the code, not the configs, rules or
dashboards); the image copies what its components read next to the code.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVING_CONFIG = ROOT / "serving" / "config"
MODELS_CONFIG = SERVING_CONFIG / "models.config"
BATCHING_PARAMETERS = SERVING_CONFIG / "batching_parameters.txt"
MONITORING_CONFIG = SERVING_CONFIG / "monitoring.config"
ALERTS = ROOT / "alerts"
RUNBOOKS = ALERTS / "runbooks"
COMPRESSED_ALERTS = ALERTS / "compressed"
DASHBOARDS = ROOT / "dashboards"
