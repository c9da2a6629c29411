"""The NVML fields file: the packaged one is valid, bad ones fail with line numbers."""

from __future__ import annotations

import pytest

from exporter.nvml.fields import FIELDS, FieldsFileError, load_fields, parse_fields


def test_packaged_file_covers_every_field_once():
    specs = load_fields()
    fields = [row.field for spec in specs for row in spec.rows]
    assert sorted(fields) == sorted(FIELDS)
    for spec in specs:
        assert spec.name.startswith("tokenpulse_gpu_")
        assert (spec.type == "counter") == spec.name.endswith("_total")


def test_a_commented_line_stops_that_field():
    text = (
        "utilization_ratio, gauge, utilization.gpu, 0.01, , Busy.\n"
        "# power_usage_watts, gauge, power.usage, 0.001, , Power.\n"
    )
    [spec] = parse_fields(text)
    assert spec.name == "tokenpulse_gpu_utilization_ratio"
    assert spec.rows[0].scale == 0.01


def test_help_may_contain_commas():
    [spec] = parse_fields("a_ratio, gauge, utilization.gpu, 1, , Busy, or not, really.")
    assert spec.help == "Busy, or not, really."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a, gauge, utilization.gpu, 1, ", "line 1: expected 6 comma-separated columns"),
        ("\n\nA_bad, gauge, utilization.gpu, 1, , x", "line 3: bad metric name"),
        ("a, summary, utilization.gpu, 1, , x", "line 1: type must be gauge or counter"),
        ("a, counter, utilization.gpu, 1, , x", "line 1: counters, and only counters"),
        ("a_total, gauge, utilization.gpu, 1, , x", "line 1: counters, and only counters"),
        ("a, gauge, no.such.field, 1, , x", "line 1: unknown field 'no.such.field'"),
        ("a, gauge, utilization.gpu, lots, , x", "line 1: scale 'lots' is not a number"),
        ("a, gauge, utilization.gpu, 1, Reason=x, x", "line 1: labels must be k=v"),
        ("a, gauge, utilization.gpu, 1, gpu=3, x", "line 1: label 'gpu' is set by the collector"),
        ("a, gauge, utilization.gpu, 1, ,", "line 1: first line of tokenpulse_gpu_a needs a help"),
        (
            "a, gauge, utilization.gpu, 1, k=1, x\na, gauge, utilization.memory, 1, k=1,",
            "line 2: duplicate series",
        ),
        (
            "a, gauge, utilization.gpu, 1, k=1, x\na, gauge, utilization.memory, 1, j=2,",
            r"line 2: tokenpulse_gpu_a needs labels \['k'\]",
        ),
        ("# only comments\n", "no fields"),
    ],
)
def test_bad_lines_name_the_line(text, message):
    with pytest.raises(FieldsFileError, match=message):
        parse_fields(text)


def test_missing_file(tmp_path):
    with pytest.raises(FieldsFileError, match="cannot read nvml fields file"):
        load_fields(tmp_path / "nope.csv")
