"""One renderer for TF Serving's `--model_config_file` text: the inverse of the config parser.

`up`, the test stack and the benches write their models.config through `render_models_config`,
so the text every model server reads (ours or the stock `tensorflow_model_server`) has one shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from tokenpulse.tfserving.config import ModelConfig, ModelServerConfig, VersionPolicy


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a text-proto string literal for these values


def _policy(p: VersionPolicy) -> str:
    if p.choice == "specific":
        inner = " ".join(f"versions: {v}" for v in p.versions)
    elif p.choice == "latest" and p.num_versions:
        inner = f"num_versions: {p.num_versions}"
    else:
        inner = ""
    body = f"{p.choice} {{ {inner} }}" if p.choice else ""
    return f"    model_version_policy {{ {body} }}\n"


def render_model(m: ModelConfig) -> str:
    """One `config { ... }` entry."""
    text = f"  config {{\n    name: {_quote(m.name)}\n    base_path: {_quote(m.base_path)}\n"
    if m.model_platform:
        text += f"    model_platform: {_quote(m.model_platform)}\n"
    if m.version_policy is not None:
        text += _policy(m.version_policy)
    for label, version in m.version_labels.items():
        text += f"    version_labels {{ key: {_quote(label)} value: {version} }}\n"
    return text + "  }\n"


def render(config: ModelServerConfig, header: str = "") -> str:
    """A whole ModelServerConfig as TF Serving's text format (`header`: leading comment lines)."""
    body = "".join(render_model(m) for m in config.models)
    return f"{header}model_config_list {{\n{body}}}\n"


def render_models_config(
    name: str,
    base_path: Path | str,
    versions: Sequence[int] = (),
    labels: Mapping[str, int] | None = None,
    header: str = "",
) -> str:
    """One tensorflow model: `versions` served exactly (none given: the newest one), labelled."""
    policy = VersionPolicy("specific", versions=tuple(versions)) if versions else None
    policy = policy or VersionPolicy("latest", num_versions=1)
    model = ModelConfig(
        name=name,
        base_path=str(base_path),
        model_platform="tensorflow",
        version_policy=policy,
        version_labels=dict(labels or {}),
    )
    return render(ModelServerConfig((model,)), header)
