"""The models.config renderer writes what the parser (and TF Serving's validation) reads back."""

from __future__ import annotations

import pytest

from tokenpulse.paths import MODELS_CONFIG
from tokenpulse.tfserving.config import (
    ModelConfig,
    ModelServerConfig,
    VersionPolicy,
    parse_model_server_config,
    validate_model_server_config,
)
from tokenpulse.tfserving.render import render, render_models_config


@pytest.mark.parametrize(
    "policy",
    [
        None,
        VersionPolicy("latest", num_versions=2),
        VersionPolicy("specific", versions=(1, 2)),
        VersionPolicy("all"),
        VersionPolicy(""),
    ],
)
def test_render_then_parse_gives_the_same_config(policy: VersionPolicy | None) -> None:
    labels = {"stable": 1, "canary": 2} if policy and policy.choice == "specific" else {}
    config = ModelServerConfig(
        (
            ModelConfig("gen", "/models/gen", "tensorflow", 0, policy, labels),
            ModelConfig('odd "name" \\ é', "rel/path", "", 0, None, {}),
        )
    )
    assert parse_model_server_config(render(config)) == config


def test_two_versions_labelled_pass_tf_servings_checks() -> None:
    text = render_models_config("gen", "/m/gen", (1, 2), {"stable": 1, "canary": 2}, "# hi\n")
    parsed = parse_model_server_config(text)
    validate_model_server_config(parsed)
    assert text.startswith("# hi\nmodel_config_list {")
    assert parsed.labels() == {"gen": {"stable": 1, "canary": 2}}
    assert parsed.models[0].version_policy == VersionPolicy("specific", versions=(1, 2))


def test_without_versions_it_serves_the_newest_as_the_committed_file_does() -> None:
    committed = parse_model_server_config(MODELS_CONFIG.read_text())
    rendered = parse_model_server_config(render_models_config("gen", "models/gen"))
    assert rendered == committed
