"""A SavedModel loaded and run in a TF1 session, as the stock server does (`session.py`)."""

from __future__ import annotations

from pathlib import Path

from serving.model import session
from tests.support.models import contract_model
from tokenpulse.tfserving import signature as sig


def test_a_batch_runs_with_the_inputs_the_signature_takes(tmp_path: Path) -> None:
    path = contract_model(tmp_path / "m", signatures=(sig.SIGNATURE_NAME,), drop=("ignore_eos",))
    rows = [sig.default_row(p, 4) for p in ("a", "bc")]  # ignore_eos too: the signature has none
    with session.load(path) as model:
        out = model.run(sig.SIGNATURE_NAME, rows)
    assert set(out) == set(sig.OUTPUTS)
    assert out["finish_reason"].tolist() == [b"stop", b"stop"]
