"""The collector registry: names, defaults and the generated flags."""

from __future__ import annotations

import argparse

import pytest

from exporter.cli import add_arguments
from exporter.registry import enabled_names, register, specs


def test_every_collector_is_registered_and_on_by_default():
    assert set(specs()) == {"nvml", "tfserving", "canary"}
    assert set(enabled_names({})) == {"nvml", "tfserving", "canary"}


def test_overrides_and_unknown_names():
    assert "nvml" not in enabled_names({"nvml": False})
    with pytest.raises(ValueError, match="unknown collector"):
        enabled_names({"gpu": True})


def test_duplicate_registration_is_refused():
    with pytest.raises(ValueError, match="registered twice"):
        register("nvml", default_enabled=True, help="again")(lambda sources: None)


def test_flags_are_generated_from_the_registry():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--no-collector.nvml", "--collector.canary"])
    assert args.collector__nvml is False
    assert args.collector__canary is True
    assert args.collector__tfserving is None  # not given: the collector's default applies
