"""Version policies, labels and warmup, on the manager in-process.

The versions are `lifecycle_export`s: the whole contract and an export's warmup records, with
trivial answers, since nothing here reads what a model generates (a tiny export costs about 7
CPU-s a load and warmup; these tests load some 25 versions)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format
from structlog.testing import capture_logs

from serving.modelserver.manager import ModelManager, aspired_versions, list_versions
from serving.modelserver.metrics import ServingMetrics
from serving.modelserver.predict import Predictor
from serving.modelserver.servable import read_warmup_records
from serving.modelserver.status import ServingError
from tests.support.models import contract_model, install_version
from tokenpulse.tfserving.signature import WARMUP_FILE


def policy(text: str):  # type: ignore[no-untyped-def]
    from tensorflow_serving.config import model_server_config_pb2

    msg = model_server_config_pb2.ModelConfig()
    text_format.Parse(f"model_version_policy {{ {text} }}", msg)
    return msg.model_version_policy


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {5}),
        ("latest { num_versions: 2 }", {3, 5}),
        ("all {}", {1, 3, 5}),
        ("specific { versions: 1 versions: 4 }", {1}),
    ],
)
def test_version_policies_pick_aspired_versions(text: str, expected: set[int]) -> None:
    assert aspired_versions(policy(text), [1, 3, 5]) == expected


def test_only_numeric_directories_are_versions(tmp_path: Path) -> None:
    for name in ("1", "12", ".deploy-3-abc", "latest"):
        (tmp_path / name).mkdir()
    (tmp_path / "7").write_text("a file, not a version")
    assert list_versions(tmp_path) == [1, 12]
    assert list_versions(tmp_path / "missing") == []


def config(base: Path, extra: str = "") -> object:
    from tensorflow_serving.config import model_server_config_pb2

    msg = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(
        f"model_config_list {{ config {{ name: 'gen' base_path: '{base}' "
        f"model_platform: 'tensorflow' {extra} }} }}",
        msg,
    )
    return msg


@pytest.fixture
def manager() -> ModelManager:
    metrics = ServingMetrics()
    predictor = Predictor(metrics, None)
    return ModelManager(metrics, warmup=predictor.warmup, on_unload=predictor.forget)


def states(manager: ModelManager) -> dict[int, str]:
    return {v: s.state for v, s in manager.version_states("gen").items()}


def test_policy_changes_load_and_unload_versions(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    install_version(lifecycle_export, base, 2)
    manager.apply_config(config(base, "model_version_policy { specific { versions: 1 } }"))
    assert states(manager) == {1: "AVAILABLE"}
    manager.apply_config(
        config(base, "model_version_policy { all {} } version_labels { key: 'canary' value: 2 }")
    )
    assert states(manager) == {1: "AVAILABLE", 2: "AVAILABLE"}
    servable = manager.resolve("gen", label="canary")
    assert servable.version == 2
    servable.release()
    manager.apply_config(config(base))  # latest 1: version 1 unloads, its state stays as END
    assert states(manager) == {1: "END", 2: "AVAILABLE"}
    with pytest.raises(ServingError) as err:
        manager.resolve("gen", version=1)
    assert err.value.code == "NOT_FOUND"
    manager.shutdown()


def test_a_policy_no_version_on_disk_matches_unloads_every_version(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    # TF Serving's source aspires nothing, and its AvailabilityPreservingPolicy unloads every
    # version nothing aspires: the server stays up with no AVAILABLE version
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    install_version(lifecycle_export, base, 2)
    manager.apply_config(
        config(base, "model_version_policy { specific { versions: 1 versions: 2 } }")
    )
    manager.apply_config(config(base, "model_version_policy { specific { versions: 7 } }"))
    assert states(manager) == {1: "END", 2: "END"}
    assert manager.available("gen") == []
    manager.apply_config(config(base, "model_version_policy { specific { versions: 2 } }"))
    assert states(manager) == {1: "END", 2: "AVAILABLE"}
    manager.shutdown()


def test_a_failing_new_version_leaves_the_old_ones_serving(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    shutil.copytree(lifecycle_export, base / "3", ignore=shutil.ignore_patterns("saved_model.pb"))
    manager.apply_config(config(base, "model_version_policy { specific { versions: 1 } }"))
    manager.apply_config(config(base, "model_version_policy { specific { versions: 3 } }"))
    assert states(manager) == {1: "AVAILABLE", 3: "END"}
    assert manager.version_states("gen")[3].error_code != "OK"
    manager.shutdown()


def test_a_version_the_gateway_could_not_serve_is_refused_in_one_line(tmp_path: Path) -> None:
    # a complete SavedModel: retrying it could not help, so the one refusal is the last word
    manager = ModelManager(ServingMetrics(), load_retries=2, load_retry_interval_s=0.01)
    contract_model(tmp_path / "gen" / "1", drop=("serving_default.text",))
    with capture_logs() as logs:
        manager.apply_config(config(tmp_path / "gen"))
    state = manager.version_states("gen")[1]
    assert state.state == "END" and state.error_code != "OK"
    assert state.error_message == (
        "the gateway could not serve this version: serving_default.text output missing"
    )
    assert [(e["log_level"], e["event"], e["error"]) for e in logs if "error" in e] == [
        ("error", "loading servable failed", state.error_message)
    ]
    manager.shutdown()


def test_a_specific_version_whose_directory_went_keeps_serving(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    manager.apply_config(config(base, "model_version_policy { specific { versions: 1 } }"))
    shutil.rmtree(base / "1")
    manager.poll()
    assert states(manager) == {1: "AVAILABLE"}
    manager.shutdown()


def test_unload_waits_for_requests_holding_the_version(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    import threading
    import time

    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    manager.apply_config(config(base))
    held = manager.resolve("gen")
    install_version(lifecycle_export, base, 2)
    poll = threading.Thread(target=manager.poll)
    poll.start()
    # version 2 turns AVAILABLE and serves new requests while version 1 waits for its request
    deadline = time.monotonic() + 120
    while states(manager) != {1: "UNLOADING", 2: "AVAILABLE"}:
        assert time.monotonic() < deadline and poll.is_alive(), states(manager)
        time.sleep(0.05)
    fresh = manager.resolve("gen")
    assert fresh.version == 2
    fresh.release()
    assert poll.is_alive()  # still waiting on the held request
    held.release()
    poll.join(timeout=60)
    assert states(manager) == {1: "END", 2: "AVAILABLE"}
    manager.shutdown()


def test_too_many_warmup_records_fail_the_load(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    import tensorflow as tf

    base = tmp_path / "gen"
    version = install_version(lifecycle_export, base, 1)
    warmup = version / WARMUP_FILE
    record = read_warmup_records(warmup)[0]
    with tf.io.TFRecordWriter(str(warmup)) as writer:
        for _ in range(1001):
            writer.write(record)
    manager.apply_config(config(base))
    state = manager.version_states("gen")[1]
    assert state.state == "END"
    assert state.error_message == (
        f"Number of warmup records exceeds the maximum (1000) at {warmup}"
    )


def test_warmup_runs_before_available_and_is_recorded(
    tmp_path: Path, lifecycle_export: Path
) -> None:
    metrics = ServingMetrics()
    predictor = Predictor(metrics, None)
    seen: list[str] = []
    manager = ModelManager(
        metrics, warmup=lambda s: (seen.append(states_now(s)), predictor.warmup(s))
    )

    def states_now(servable: object) -> str:
        return manager.version_states("gen")[1].state

    base = tmp_path / "gen"
    version = install_version(lifecycle_export, base, 1)
    manager.apply_config(config(base))
    assert seen == ["LOADING"]
    records = len(read_warmup_records(version / WARMUP_FILE))
    assert metrics.model_warmup_records_read.value(str(version), "OK") == records
    assert metrics.model_warmup_latency.count(str(version), "OK") == 1
    # warmup runs are recorded under the record's model name, like TF Serving
    assert metrics.runtime_latency.count("gen", "Predict", "TF1") == records
    assert metrics.request_count.value("gen", "OK") == 0
    manager.shutdown()


def test_missing_warmup_file_is_fine(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    base = tmp_path / "gen"
    version = install_version(lifecycle_export, base, 1)
    (version / WARMUP_FILE).unlink()
    manager.apply_config(config(base))
    assert states(manager) == {1: "AVAILABLE"}
    manager.shutdown()


def test_label_on_unavailable_version_is_refused(
    manager: ModelManager, tmp_path: Path, lifecycle_export: Path
) -> None:
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    with pytest.raises(ServingError) as err:
        manager.apply_config(config(base, "version_labels { key: 'stable' value: 3 }"))
    assert err.value.code == "FAILED_PRECONDITION"
    manager.shutdown()
    shutil.rmtree(base)


def test_flag_allows_new_labels_on_unavailable_versions(
    tmp_path: Path, lifecycle_export: Path
) -> None:
    metrics = ServingMetrics()
    manager = ModelManager(metrics, allow_labels_for_unavailable=True)
    base = tmp_path / "gen"
    install_version(lifecycle_export, base, 1)
    manager.apply_config(config(base, "version_labels { key: 'next' value: 2 }"))
    with pytest.raises(ServingError) as err:  # the label exists, its version does not serve yet
        manager.resolve("gen", label="next")
    assert err.value.code == "NOT_FOUND"
    # moving an existing label onto an unavailable version is still refused
    with pytest.raises(ServingError, match="not currently available"):
        manager.apply_config(config(base, "version_labels { key: 'next' value: 3 }"))
    manager.shutdown()


def test_a_version_copied_in_two_steps_turns_available_on_a_retry(
    tmp_path: Path, lifecycle_export: Path
) -> None:
    import threading

    metrics = ServingMetrics()
    manager = ModelManager(metrics, load_retries=600, load_retry_interval_s=0.05)
    base = tmp_path / "gen"
    version = base / "1"
    # variables and assets first; saved_model.pb only after the first load attempt failed
    shutil.copytree(lifecycle_export, version, ignore=shutil.ignore_patterns("saved_model.pb"))
    seen_while_retrying: list[str] = []

    def finish_copy() -> None:
        while metrics.load_attempt_count.value(str(version), "fail") < 2:
            threading.Event().wait(0.02)
        seen_while_retrying.append(manager.version_states("gen")[1].state)
        shutil.copy2(lifecycle_export / "saved_model.pb", version / "saved_model.pb")

    copier = threading.Thread(target=finish_copy)
    copier.start()
    manager.apply_config(config(base))
    copier.join(timeout=60)
    assert seen_while_retrying == ["LOADING"]
    assert states(manager) == {1: "AVAILABLE"}
    assert metrics.load_attempt_count.value(str(version), "success") == 1
    manager.shutdown()


def test_without_retries_a_failed_load_ends_at_once(tmp_path: Path, lifecycle_export: Path) -> None:
    manager = ModelManager(ServingMetrics(), load_retries=0)
    base = tmp_path / "gen"
    shutil.copytree(lifecycle_export, base / "1", ignore=shutil.ignore_patterns("saved_model.pb"))
    manager.apply_config(config(base))
    state = manager.version_states("gen")[1]
    assert state.state == "END" and "SavedModel load" in state.error_message


def test_warmup_record_over_max_batch_size_fails_the_load_with_the_fix(
    tmp_path: Path, lifecycle_export: Path
) -> None:
    from serving.modelserver.batching import BatchScheduler
    from serving.modelserver.config_files import BatchingParameters

    metrics = ServingMetrics()
    scheduler = BatchScheduler(BatchingParameters(max_batch_size=16, num_batch_threads=1), metrics)
    predictor = Predictor(metrics, scheduler)
    manager = ModelManager(metrics, warmup=predictor.warmup, on_unload=predictor.forget)
    base = tmp_path / "gen"
    version = install_version(lifecycle_export, base, 1)
    try:
        manager.apply_config(config(base))
        state = manager.version_states("gen")[1]
    finally:
        scheduler.stop()
    assert state.state == "END"
    message = state.error_message
    assert "Task size 32 is larger than maximum input batch size 16" in message
    # records come in pairs per batch size (serving_default, continue): 1, 1, 2, 2, ... 32
    assert f"warmup record 11 of {version / WARMUP_FILE}" in message
    assert "--warmup-batch-sizes" in message
