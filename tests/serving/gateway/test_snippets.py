"""The snippets `make up` prints work as printed: run the curl command and the openai SDK code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.standins.tfserving import TfServingStandin
from serving.gateway.snippets import curl_snippet, openai_snippet
from tests.support.gateway import running_gateway


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_snippet_runs_as_printed(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    with running_gateway(standin.url, keys_file) as gw:
        done = subprocess.run(
            ["bash", "-c", curl_snippet(gw.url, keys["demo"])],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    body = json.loads(done.stdout)
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == "hello world (v1)"


def test_openai_snippet_runs_as_printed(
    standin: TfServingStandin, keys_file: Path, keys: dict[str, str]
) -> None:
    with running_gateway(standin.url, keys_file) as gw:
        done = subprocess.run(
            [sys.executable, "-c", openai_snippet(gw.url, keys["demo"])],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    assert done.stdout.strip() == "hello world (v1)"
