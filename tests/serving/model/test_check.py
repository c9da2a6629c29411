"""`tokenpulse model check`: the contract, ops, smoke predict and streamed-equals-unary."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.model.check import CheckReport, NotASavedModel, run
from serving.model.settings import CheckSettings
from tests.support.models import contract_model
from tokenpulse.tfserving.contract import DEGRADED, ERROR, OK, Finding


def check(path: Path, **kw: object) -> tuple[int, list[Finding]]:
    report = run(CheckSettings(path=path, max_new_tokens=8, chunk=3, **kw))
    return report.exit_code, report.findings


def levels(findings: list[Finding], level: str) -> dict[str, str]:
    return {f.subject: f.message for f in findings if f.level == level}


def test_the_tiny_export_supports_every_feature(tiny_export: Path) -> None:
    code, findings = check(tiny_export)
    assert levels(findings, ERROR) == {} and levels(findings, DEGRADED) == {}
    assert code == 0
    ok = {(f.check, f.subject) for f in findings if f.level == OK}
    assert {("contract", s) for s in ("required", "streaming", "stop_in_graph")} <= ok
    assert {("ops", "graph"), ("predict", "serving_default"), ("stream", "continue")} <= ok
    assert ("tfserving", "serving_default") in ok  # as the stock server loads it, same answer
    stream = next(f for f in findings if f.check == "stream")
    assert "equal the unary 8 tokens" in stream.message  # greedy, 8 tokens, in chunks of 3
    table = CheckReport(str(tiny_export), findings).table()
    assert table.endswith(f"{tiny_export}: servable, every feature supported")


@pytest.mark.parametrize(
    ("broken", "subject", "message"),
    [
        ({"signatures": ("continue",)}, "serving_default", "missing signature"),
        ({"dtypes": {"max_new_tokens": "int64"}}, "serving_default.max_new_tokens", "int64"),
        ({"drop": ("serving_default.text",)}, "serving_default.text", "output missing"),
        ({"drop": ("mean_nll",)}, "serving_default.mean_nll", "output missing"),
        ({"drop": ("continue.n_tokens",)}, "continue.n_tokens", "output missing"),
        ({"drop": ("ignore_eos",)}, "serving_default.ignore_eos", "input missing"),
        ({"py_function": True}, "serving_default", "EagerPyFunc"),
    ],
)
def test_a_contract_break_is_an_error_naming_it(
    tmp_path: Path, broken: dict, subject: str, message: str
) -> None:
    code, findings = check(contract_model(tmp_path / "m", **broken))
    assert code == 1
    errors = levels(findings, ERROR)
    assert subject in errors and message in errors[subject], errors


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({"finish_reason": "done"}, "finish_reason b'done' is neither stop nor length"),
        ({"output_tokens": 9}, "output_tokens 9 outside the budget"),
        ({"text": b"\xff"}, "`text` is not valid UTF-8"),
    ],
)
def test_a_smoke_predict_with_a_wrong_answer_is_an_error(
    tmp_path: Path, answers: dict, message: str
) -> None:
    code, findings = check(contract_model(tmp_path / "m", answers=answers))
    assert code == 1
    assert levels(findings, ERROR) == {"serving_default": message}


def test_a_model_a_tf1_session_cannot_restore_is_an_error(tmp_path: Path) -> None:
    """TF2's loader runs it; the stock server's loader (a TF1 session) finds a weight unset."""
    code, findings = check(contract_model(tmp_path / "m", keras_weight=True))
    assert code == 1
    assert ("predict", "serving_default") in {(f.check, f.subject) for f in findings}
    message = levels(findings, ERROR)["serving_default"]
    assert message.startswith("a TF1 session load fails: FailedPreconditionError: Could not find")


def test_a_model_without_continue_serves_without_streaming(tmp_path: Path) -> None:
    code, findings = check(contract_model(tmp_path / "m", signatures=("serving_default",)))
    assert code == 0, levels(findings, ERROR)
    assert set(levels(findings, DEGRADED)) == {"streaming"}
    assert "no streaming" in levels(findings, DEGRADED)["streaming"]
    assert ("predict", "serving_default") in {(f.check, f.subject) for f in findings}
    assert CheckReport("m", findings).table().endswith("m: servable, degraded: streaming")


def test_a_path_that_is_no_saved_model_is_refused(tmp_path: Path) -> None:
    (tmp_path / "3").mkdir()
    with pytest.raises(NotASavedModel, match="no saved_model.pb .*check a version: .*3"):
        run(CheckSettings(path=tmp_path))
    (tmp_path / "3" / "saved_model.pb").write_bytes(b"\xff" * 8)
    with pytest.raises(NotASavedModel, match="does not parse as a SavedModel"):
        run(CheckSettings(path=tmp_path / "3"))


def test_a_stream_that_differs_from_unary_is_an_error(tmp_path: Path) -> None:
    code, findings = check(contract_model(tmp_path / "m", continue_tokens=2))
    assert code == 1
    message = levels(findings, ERROR)["continue"]
    assert "streamed 2 bytes b'aa' (mean nll 0.0000) != unary 0 tokens b''" in message
