"""Markers for tests that need programs from Debian packages (scripts/ensure-debs.sh)."""

from __future__ import annotations

import shutil

import pytest

needs_prometheus = pytest.mark.skipif(
    not all(shutil.which(b) for b in ("prometheus", "prometheus-alertmanager")),
    reason="needs the prometheus and prometheus-alertmanager binaries",
)
