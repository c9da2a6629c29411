"""The fake backend's drill fault file: parsed strictly, re-read on change, never fatal."""

from __future__ import annotations

import json

import pytest

from exporter.nvml.fake_faults import FaultFile, FaultsFileError, parse_faults
from tokenpulse.atomic import atomic_write


def test_parse_reads_xids_and_thermal_throttle():
    faults = parse_faults(
        '{"xids": [{"id": "a", "gpu": 0, "xid": 79}], "thermal_throttle": [1]}', n_gpus=2
    )
    assert [(x.id, x.gpu, x.xid) for x in faults.xids] == [("a", 0, 79)]
    assert faults.thermal_throttle == [1]
    assert parse_faults("", 2).xids == [] and parse_faults("{}", 2).thermal_throttle == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "not JSON"),
        ('{"thermal": [1]}', "thermal: Extra inputs are not permitted"),
        ('{"xids": [{"id": "a", "gpu": 0, "xid": 79, "when": 1}]}', "xids.0.when"),
        ('{"xids": [{"id": "a", "gpu": 0}]}', "xids.0.xid: Field required"),
        ('{"xids": [{"id": "", "gpu": 0, "xid": 79}]}', "xids.0.id"),
        ('{"thermal_throttle": [2]}', "no GPU 2 (the node has 2)"),
        ('{"xids": [{"id": "a", "gpu": 5, "xid": 79}]}', "no GPU 5"),
        ('{"xids": [{"id": "a", "gpu": 0, "xid": 79}, {"id": "a", "gpu": 1, "xid": 48}]}',
         "an xid id is used twice"),
        ("[1, 2]", "file: Input should be a valid dictionary"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_naming_the_problem(text, message):
    with pytest.raises(FaultsFileError) as info:
        parse_faults(text, n_gpus=2)
    assert message in str(info.value)


def _write(path, doc) -> None:
    # as the drill writes it: a reader never sees half a file
    atomic_write(path, doc if isinstance(doc, str) else json.dumps(doc))


def test_poll_returns_faults_only_when_the_file_changed(tmp_path):
    path = tmp_path / "gpu-faults.json"
    watch = FaultFile(path, n_gpus=2)
    assert watch.poll() is None  # missing from the start: no faults, nothing to apply
    _write(path, {"thermal_throttle": [0]})
    assert watch.poll().thermal_throttle == [0]
    assert watch.poll() is None  # unchanged
    _write(path, {"thermal_throttle": [0, 1]})
    assert watch.poll().thermal_throttle == [0, 1]
    path.unlink()
    assert watch.poll().thermal_throttle == []  # removed: the faults end
    assert watch.rejected == 0


def test_a_bad_file_is_counted_and_changes_nothing(tmp_path):
    path = tmp_path / "gpu-faults.json"
    watch = FaultFile(path, n_gpus=2)
    _write(path, {"thermal_throttle": [1]})
    assert watch.poll() is not None
    _write(path, '{"thermal_throttle": [1], "typo": true}')
    assert watch.poll() is None and watch.rejected == 1
    assert watch.poll() is None and watch.rejected == 1  # counted once per change, not per poll
    _write(path, "{}")
    assert watch.poll().thermal_throttle == [] and watch.rejected == 1
