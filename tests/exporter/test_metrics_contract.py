"""Contract: the metrics the exporter exposes are exactly those its README documents."""

from __future__ import annotations

import re

import pytest

from devtools.standins.tfserving import TfServingStandin
from exporter.server import build_registry
from exporter.settings import ExporterSettings
from exporter.sources import Sources
from tests.support.exporter import write_golden
from tokenpulse import paths

README = paths.ROOT / "exporter" / "README.md"


@pytest.fixture
def exposed(tmp_path) -> dict[str, str]:
    base = tmp_path / "gen"
    write_golden(base, 1, [("a", "b", 1.0)])
    with TfServingStandin() as tfs:
        tfs.state.versions["gen"] = {1: "AVAILABLE"}
        tfs.state.answers[("gen", 1)] = {"a": ("b", 1.0)}
        settings = ExporterSettings(
            nvml_backend="fake", nvml_fake_gpus=1, tfserving_url=tfs.url, model_base_path=base
        )
        sources = Sources(settings)
        registry = build_registry(settings, sources)
        sources.status_tracker().poll()
        sources.canary_runner().run_once()
        families = list(registry.collect())
        sources.close()
    return {
        m.name + ("_total" if m.type == "counter" else ""): m.type
        for m in families
        if m.name.startswith("tokenpulse_")
    }


def test_readme_documents_every_exposed_metric(exposed):
    documented = dict(re.findall(r"^\| `(tokenpulse_\w+)` \| (\w+) \|", README.read_text(), re.M))
    assert documented == exposed
