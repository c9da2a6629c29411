"""B8 end to end: the exporter's /metrics while the model server dies and comes back."""

from __future__ import annotations

from pathlib import Path

from devtools.standins.tfserving import TfServingStandin
from exporter.server import Exporter
from exporter.settings import ExporterSettings
from tests.support.exporter import scrape, scrape_until, write_golden

SUCCESS = 'tokenpulse_canary_success{model="gen",version="1"}'
RUNS = 'tokenpulse_canary_runs_total{model="gen",result="%s",version="1"}'


def _value(text: str, series: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def test_outage_shows_as_failing_versions_with_growing_counters(tmp_path: Path) -> None:
    base = tmp_path / "gen"
    write_golden(base, 1, [("Hi", " there", 0.7)])
    with TfServingStandin() as tfs:
        tfs.state.versions["gen"] = {1: "AVAILABLE"}
        tfs.state.answers[("gen", 1)] = {"Hi": (" there", 0.7)}
        settings = ExporterSettings(
            listen_address="127.0.0.1:0",
            tfserving_url=tfs.url,
            model_name="gen",
            model_base_path=base,
            status_poll_interval_seconds=0.2,
            canary_interval_seconds=3600,  # only the outage itself can trigger the next run
            collectors={"nvml": False},
        )
        exporter = Exporter(settings)
        exporter.start()
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        try:
            before = scrape_until(url, f"{SUCCESS} 1.0")
            ok_runs = _value(before, RUNS % "ok")
            assert ok_runs is not None and ok_runs >= 1

            tfs.stop()  # the model server dies
            during = scrape_until(url, f"{SUCCESS} 0.0")  # the first run after it failed
            assert _value(during, RUNS % "ok") == ok_runs  # never lower
            assert (_value(during, RUNS % "error") or 0) >= 1
            state = (
                'tokenpulse_tfserving_model_version_state{model="gen",state="UNKNOWN",version="1"}'
            )
            assert _value(during, state) == 1.0

            tfs.start()
            after = scrape_until(url, f"{SUCCESS} 1.0")
            assert (_value(after, RUNS % "ok") or 0) > ok_runs
            assert _value(scrape(url), RUNS % "error") == _value(during, RUNS % "error")
        finally:
            exporter.stop()
