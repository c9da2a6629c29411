"""`tokenpulse model check PATH`: whether the gateway can serve a SavedModel, and how well.

The signatures are judged by the contract (`tokenpulse/tfserving/contract.py`, which the model
server's load path also applies), the ops by what the stock `tensorflow_model_server` runs; then
a greedy smoke predict, the same generation streamed through `continue` chunk by chunk must
equal the unary one, bytes and mean NLL, and the same predict in a TF1 session, loaded as the
stock `tensorflow_model_server` loads it (`session.py`), must give the same answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from serving.model import opcheck, session
from serving.model.settings import CheckSettings
from tokenpulse.tfserving import contract
from tokenpulse.tfserving import signature as sig
from tokenpulse.tfserving.contract import DEGRADED, ERROR, OK, Finding
from tokenpulse.tfserving.ops import load_saved_model

_NUMPY = {"string": object, "int32": np.int32, "float32": np.float32, "int64": np.int64}
_MAX_CALLS = 256  # `continue` calls before a stream that never finishes counts as broken


class NotASavedModel(ValueError):
    """The path is no SavedModel directory at all."""


@dataclass(frozen=True)
class CheckReport:
    """Every finding about one SavedModel."""

    path: str
    findings: list[Finding]

    @property
    def exit_code(self) -> int:
        """0: the gateway can serve it (degradations allowed); 1: a contract break."""
        return 1 if any(f.level == ERROR for f in self.findings) else 0

    def to_json(self) -> dict[str, Any]:
        """The report for machines (`--json`)."""
        return {
            "path": self.path,
            "servable": self.exit_code == 0,
            "supported": [
                f.subject for f in self.findings if f.check == "contract" and f.level == OK
            ],
            "degraded": [f.subject for f in self.findings if f.level == DEGRADED],
            "findings": [asdict(f) for f in self.findings],
        }

    def table(self) -> str:
        """The report for people: one finding a line, then the verdict."""
        rows = [("LEVEL", "CHECK", "SUBJECT", "DETAIL")]
        rows += [(f.level.upper(), f.check, f.subject, f.message) for f in self.findings]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
            for r in rows
        ]
        degraded = [f.subject for f in self.findings if f.level == DEGRADED]
        if self.exit_code:
            verdict = "contract broken: the gateway cannot serve this model"
        elif degraded:
            verdict = f"servable, degraded: {', '.join(degraded)}"
        else:
            verdict = "servable, every feature supported"
        return "\n".join([*lines, "", f"{self.path}: {verdict}"])


def read_specs(path: Path) -> tuple[Any, dict[str, contract.SignatureSpec]]:
    """The `serve` meta graph and its signatures, or NotASavedModel."""
    if not path.is_dir():
        raise NotASavedModel(f"{path} is not a directory")
    pb = path / "saved_model.pb"
    if not pb.is_file():
        versions = sorted(int(p.name) for p in path.iterdir() if p.name.isdigit())
        hint = f" (a base path? check a version: {path / str(versions[-1])})" if versions else ""
        raise NotASavedModel(f"{path} is not a SavedModel: no saved_model.pb{hint}")
    from google.protobuf.message import DecodeError  # heavy: after the cheap refusals
    from tensorflow.core.protobuf import saved_model_pb2

    try:
        proto = saved_model_pb2.SavedModel.FromString(pb.read_bytes())
    except DecodeError as exc:
        raise NotASavedModel(f"{pb} does not parse as a SavedModel: {exc}") from exc
    for meta in proto.meta_graphs:
        if "serve" in meta.meta_info_def.tags:
            return meta, contract.signature_specs(meta)
    return None, {}


def run(settings: CheckSettings) -> CheckReport:
    """Check one SavedModel; raises NotASavedModel for a path that is none."""
    meta, specs = read_specs(settings.path)
    if meta is None:
        return CheckReport(
            str(settings.path),
            [Finding(ERROR, "contract", "serve", "no meta graph tagged `serve`")],
        )
    findings = contract.check_signatures(specs)
    findings += _ops(settings.path, specs)
    if any(f.level == ERROR for f in findings):
        return CheckReport(str(settings.path), findings)  # running it would only fail

    signatures = load_saved_model(settings.path).signatures
    unary = _smoke(signatures[sig.SIGNATURE_NAME], specs, settings)
    findings += unary[0]
    if sig.CONTINUE_SIGNATURE_NAME in specs and unary[1] is not None:
        fn = signatures[sig.CONTINUE_SIGNATURE_NAME]
        findings += _streamed(fn, specs, settings, unary[1])
    if unary[1] is not None:
        findings += _in_session(settings, unary[1])
    return CheckReport(str(settings.path), findings)


def _ops(path: Path, specs: dict[str, contract.SignatureSpec]) -> list[Finding]:
    """An error per op the stock server cannot run, named by the signature that reaches it."""
    by_signature = opcheck.signature_ops(path)
    findings = []
    for op, reason in opcheck.unservable_ops(path).items():
        where = [name for name, ops in sorted(by_signature.items()) if op in ops]
        findings.append(Finding(ERROR, "ops", "/".join(where) or "graph", f"{op}: {reason}"))
    if not findings:
        findings.append(Finding(OK, "ops", "graph", "every op runs in stock TF Serving"))
    return findings


def _row(settings: CheckSettings) -> dict[str, object]:
    return sig.default_row(settings.prompt, settings.max_new_tokens) | {"seed": settings.seed}


def _call(fn: Any, spec: contract.SignatureSpec, row: dict[str, object]) -> dict[str, Any]:
    """One row through a signature, sending the inputs it takes; outputs of that row."""
    import tensorflow as tf

    inputs = {
        name: tf.constant(np.array([row[name]], dtype=_NUMPY[t.dtype]))
        for name, t in spec.inputs.items()
    }
    return {k: v.numpy()[0] for k, v in fn(**inputs).items()}


def _smoke(
    fn: Any, specs: dict[str, contract.SignatureSpec], settings: CheckSettings
) -> tuple[list[Finding], dict[str, Any] | None]:
    """A greedy `serving_default` call: its findings, and the row when it answered sanely."""
    subject = sig.SIGNATURE_NAME
    try:
        out = _call(fn, specs[subject], _row(settings))
    except Exception as exc:  # noqa: BLE001 - whatever the graph raises is the finding
        return [Finding(ERROR, "predict", subject, _one_line(exc))], None
    problems = []
    try:
        out["text"].decode("utf-8")
    except UnicodeDecodeError:
        problems.append("`text` is not valid UTF-8")
    if not 0 <= int(out["output_tokens"]) <= settings.max_new_tokens:
        problems.append(f"output_tokens {int(out['output_tokens'])} outside the budget")
    if out["finish_reason"].decode() not in (sig.FINISH_STOP, sig.FINISH_LENGTH):
        problems.append(f"finish_reason {out['finish_reason']!r} is neither stop nor length")
    if "mean_nll" in out and not float(out["mean_nll"]) >= 0:
        problems.append(f"mean_nll {float(out['mean_nll'])} is not >= 0")
    if problems:
        return [Finding(ERROR, "predict", subject, "; ".join(problems))], None
    detail = f"{int(out['output_tokens'])} tokens, finish_reason {out['finish_reason'].decode()}"
    return [Finding(OK, "predict", subject, f"greedy smoke predict: {detail}")], out


def _streamed(
    fn: Any, specs: dict[str, contract.SignatureSpec], settings: CheckSettings, unary: dict
) -> list[Finding]:
    """The unary generation again, `continue` chunk by chunk: the same bytes, scored the same.

    `continue` streams bytes (`n_tokens` counts them); a model whose tokens are several bytes
    reports fewer `output_tokens`, so the tokens are compared through their NLL instead. Each
    chunk's `token_ids` go back as the next call's `generated_ids` where the model takes them.
    """
    import tensorflow as tf

    from serving.model.vocab import finished_text, sanitize_utf8

    subject = sig.CONTINUE_SIGNATURE_NAME
    resumes = sig.RESUME_INPUTS[0] in specs[subject].inputs
    generated, nll_sum, scored, calls = b"", 0.0, 0, 0
    ids: tuple[int, ...] = ()
    try:
        while calls < _MAX_CALLS:
            calls += 1
            row = _row(settings) | {
                "generated": generated,
                "generated_ids": sig.join_ids(ids),
                "step": len(ids) if resumes else len(generated),
                "chunk": settings.chunk,
            }
            out = _call(fn, specs[subject], row)
            n = int(out["n_tokens"])
            generated += bytes(int(t) for t in out["tokens"][:n])
            ids += sig.parse_ids(out.get("token_ids", b"").decode())
            nll_sum, scored = nll_sum + float(out["nll_sum"]), scored + int(out["n_scored"])
            if out["finish_reason"].decode():
                break
        else:
            return [Finding(ERROR, "stream", subject, f"no finish_reason after {calls} calls")]
    except Exception as exc:  # noqa: BLE001 - whatever the graph raises is the finding
        return [Finding(ERROR, "stream", subject, _one_line(exc))]
    want_tokens, want_nll = int(unary["output_tokens"]), float(unary.get("mean_nll", 0.0))
    nll = nll_sum / scored if scored else 0.0
    # the stream's bytes may split or invent UTF-8 characters; the unary text replaces those,
    # and drops a last character cut short (a model exported before that rule replaces it)
    texts = {
        t.numpy()[0]
        for t in (finished_text(tf.constant([generated])), sanitize_utf8(tf.constant([generated])))
    }
    if unary["text"] not in texts or abs(nll - want_nll) > 1e-3 * max(1.0, want_nll):
        return [
            Finding(
                ERROR,
                "stream",
                subject,
                f"streamed {len(generated)} bytes {generated[:40]!r} (mean nll {nll:.4f}) != "
                f"unary {want_tokens} tokens {bytes(unary['text'][:40])!r} "
                f"(mean nll {want_nll:.4f})",
            )
        ]
    detail = f"{calls} calls of {settings.chunk} tokens equal the unary {want_tokens} tokens"
    return [Finding(OK, "stream", subject, detail)]


def _in_session(settings: CheckSettings, unary: dict[str, Any]) -> list[Finding]:
    """The smoke predict again in a TF1 session, as the stock server restores and runs it."""
    subject = sig.SIGNATURE_NAME
    try:
        with session.load(settings.path) as model:
            out = model.run(subject, [_row(settings)])
    except Exception as exc:  # noqa: BLE001 - whatever the load or run raises is the finding
        return [Finding(ERROR, "tfserving", subject, f"a TF1 session load fails: {_one_line(exc)}")]
    got = {k: v[0] for k, v in out.items()}
    same = all(got[k] == unary[k] for k in ("text", "output_tokens", "finish_reason"))
    if "mean_nll" in unary:
        nll = float(unary["mean_nll"])
        same = same and abs(float(got["mean_nll"]) - nll) <= 1e-3 * max(1.0, nll)
    if not same:
        return [
            Finding(
                ERROR,
                "tfserving",
                subject,
                f"a TF1 session answers {int(got['output_tokens'])} tokens "
                f"{bytes(got['text'][:40])!r}, the TF2 load {int(unary['output_tokens'])} "
                f"tokens {bytes(unary['text'][:40])!r}",
            )
        ]
    detail = "loaded as stock TF Serving loads it (TF1 session): the same greedy answer"
    return [Finding(OK, "tfserving", subject, detail)]


def _one_line(exc: BaseException) -> str:
    """The exception's first telling line (TensorFlow leads with "Graph execution error:")."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    told = [line for line in lines if line and not line.endswith(":") and not line.startswith("[[")]
    return f"{type(exc).__name__}: {(told or lines or [''])[0]}"[:200]
