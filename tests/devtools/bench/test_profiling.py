"""py-spy's raw output read back as top entries: self, inclusive and by area."""

from __future__ import annotations

import pytest

from devtools.bench.profiling import area_of, parse_raw, report

RAW = """\
process 42:"python -m stack.cli gateway";<module> (stack/cli.py:9);run (asyncio/runners.py:118);\
_serve (/work/main/serving/gateway/app.py:260);dumps (json/encoder.py:200) 3
process 42:"python -m stack.cli gateway";<module> (stack/cli.py:9);run (asyncio/runners.py:118);\
_serve (/work/main/serving/gateway/app.py:262);_request (x/site-packages/aiohttp/client.py:500) 5
process 42:"python -m stack.cli gateway";<module> (stack/cli.py:9);run (asyncio/runners.py:120) 2
process 42:"python -m stack.cli gateway";<module> (stack/cli.py:9);\
_find_and_load (<frozen importlib._bootstrap>:1176);<module> (aiohttp/web.py:1) 7
not a sample line
"""


def test_samples_are_split_into_self_inclusive_and_areas() -> None:
    prof = parse_raw(RAW)
    assert prof.samples == 10
    assert prof.importing == 7  # taken during an import: start-up, not in the shares below
    assert prof.top("self", 1) == [(0.5, "_request (aiohttp/client.py)")]
    inclusive = {name: share for share, name in prof.top("inclusive", 10)}
    # lines of one function count once per sample; the pid frame is not a function
    assert inclusive["_serve (serving/gateway/app.py)"] == pytest.approx(0.8)
    assert inclusive["run (asyncio/runners.py)"] == pytest.approx(1.0)
    assert not any(name.startswith("process") for name in inclusive)
    assert {n: s for s, n in prof.top("areas", 5)} == {
        "aiohttp client": 0.5, "json": 0.3, "event loop": 0.2,
    }  # fmt: skip
    assert prof.as_dict(2)["samples"] == 10 and prof.as_dict(2)["importing_samples"] == 7
    assert report(prof, 3)[0].startswith("profile: 10 samples")
    assert "7 more while it imported its modules (left out)" in report(prof, 3)[0]


def test_areas_name_where_the_code_lives() -> None:
    assert area_of("/x/serving/gateway/pipeline.py") == "gateway code"
    assert area_of("/v/site-packages/aiohttp/web_protocol.py") == "aiohttp server"
    assert area_of("/v/site-packages/aiohttp/streams.py") == "aiohttp shared"
    assert area_of("/v/site-packages/prometheus_client/metrics.py") == "prometheus_client"
    assert area_of("somewhere/else.py") == "other"
