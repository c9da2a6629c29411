"""Settings of the model commands (pydantic-settings, env prefix TOKENPULSE_MODEL_)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from serving.model.config import PRESETS
from serving.model.targets import TARGETS_DIR
from serving.model.warmup import SERVING_BATCHING_FILE
from tokenpulse.tfserving.signature import DEFAULT_MODEL_NAME, STOP_SLOTS


def _known_preset(value: str) -> str:
    if value not in PRESETS:
        raise ValueError(f"unknown preset {value!r}; choose one of {sorted(PRESETS)}")
    return value


PresetName = Annotated[str, AfterValidator(_known_preset)]

# a DNS name (RFC 1123 labels): the host of a scrape target, no port or scheme
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*")


def _scrapable_host(value: str) -> str:
    """A host name or IP address Prometheus can scrape: never a wildcard, a port or a URL."""
    try:
        wildcard = ipaddress.ip_address(value).is_unspecified
    except ValueError:  # not an IP address: a host name, or nothing valid
        if not _HOST_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a host name or IP address") from None
        return value
    if wildcard:
        raise ValueError(f"{value} listens everywhere but names no host Prometheus can scrape")
    return value


class VersionSettings(BaseSettings):
    """Where an exported version goes and the warmup records it carries."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    base_path: Path = Field(description="model base path; the version goes to BASE/<version>")
    version: int = Field(gt=0, description="version number to export")
    model_name: str = Field(DEFAULT_MODEL_NAME, description="name written into warmup records")
    warmup_batch_sizes: list[int] | None = Field(
        default=None,
        description="batch sizes of the warmup records; default: what the batching file allows",
    )
    batching_parameters_file: Path | None = Field(
        default=SERVING_BATCHING_FILE,
        description="serving BatchingParameters; warmup records never exceed its max_batch_size",
    )


class BuildSettings(VersionSettings):
    """`tokenpulse model build`: train (or reuse the cached checkpoint) and export one version."""

    preset: PresetName = Field("default", description=f"model size: {' | '.join(PRESETS)}")
    degrade_noise: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="export a deliberately degraded version (noise on the weights)",
    )
    cache_dir: Path = Field(Path(".cache/tokenpulse"), description="trained checkpoint cache")
    progress: bool = Field(True, description="show training progress")
    overwrite: bool = Field(False, description="replace an existing version directory")
    keep_existing: bool = Field(
        False,
        description="an existing version directory is a complete one (exports are renamed into "
        "place whole): keep it and exit 0, so a retried or re-applied build is a no-op",
    )

    @model_validator(mode="after")
    def _one_way_for_an_existing_version(self) -> BuildSettings:
        if self.overwrite and self.keep_existing:
            raise ValueError("--overwrite and --keep-existing contradict each other: pick one")
        return self


class GenerateSettings(BaseSettings):
    """`tokenpulse model generate`: load a SavedModel and run its signature once."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    base_path: Path = Field(description="model base path holding numbered versions")
    version: int | None = Field(default=None, gt=0, description="version to load; none: latest")
    prompt: str = Field(description="text to continue")
    max_new_tokens: int = Field(default=64, ge=0, description="tokens to generate at most")
    temperature: float = Field(default=0.8, ge=0.0, description="sampling temperature; 0: greedy")
    top_k: int = Field(default=0, ge=0, description="sample from the k likeliest; 0: all")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    seed: int = Field(0, description="sampling seed")
    stop: list[str] = Field(
        default_factory=list,
        max_length=STOP_SLOTS,
        description="stop sequences: decoding ends when the text ends with one (left out)",
    )
    ignore_eos: bool = Field(False, description="decode past the end-of-text token")


class RunSettings(BaseSettings):
    """Where a training run lives: its preset's default directory, or one given."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    preset: PresetName = Field("default", description=f"model size: {' | '.join(PRESETS)}")
    run_dir: Path | None = Field(
        default=None,
        description="checkpoints, TensorBoard, worker logs, report; none: CACHE/runs/PRESET",
    )
    cache_dir: Path = Field(Path(".cache/tokenpulse"), description="where runs live by default")

    def run_path(self) -> Path:
        """The run directory, given or the preset's default."""
        return self.run_dir or self.cache_dir / "runs" / self.preset


class TrainSettings(RunSettings):
    """`tokenpulse model train`: train a preset with checkpoints, on one process or several."""

    steps: int | None = Field(
        default=None, gt=0, description="training steps; none: the preset's (changes the recipe)"
    )
    workers: int = Field(
        default=1,
        ge=1,
        description="worker processes (MultiWorkerMirroredStrategy on loopback); 1: in-process",
    )
    strategy: Literal["auto", "mirrored"] = Field(
        "auto",
        description="auto: one process as `build` trains, or several with --workers; mirrored: "
        "MirroredStrategy over --devices in one process",
    )
    devices: int = Field(
        default=0,
        ge=0,
        description="--strategy mirrored: replicas; 0: every GPU (or the CPU); N: N GPUs, or "
        "the CPU split into N logical devices when there are fewer",
    )
    checkpoint_every: int = Field(
        default=100, ge=1, description="steps between checkpoints (one is also written at the end)"
    )
    keep_checkpoints: int = Field(default=3, ge=1, description="checkpoints kept (the newest)")
    max_restarts: int = Field(
        default=3, ge=0, description="job restarts from the latest checkpoint after a worker dies"
    )
    restart_delay_s: float = Field(
        default=0.0,
        ge=0.0,
        le=3600.0,
        description="seconds between a worker's death and the job's restart (a backoff: the "
        "workers stay down meanwhile, as a rescheduled pod would)",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="worker i serves /metrics on this port + i; 0: no metrics server",
    )
    metrics_host: Annotated[str, AfterValidator(_scrapable_host)] = Field(
        "127.0.0.1",
        description="where the workers' metrics servers listen, and the host the run's "
        "Prometheus targets name (compose: the service's name; Kubernetes: the pod's IP)",
    )
    targets_dir: Path | None = Field(
        default=None,
        description=f"where the run registers its workers for Prometheus (file_sd); none: "
        f"CACHE/{TARGETS_DIR}",
    )
    progress: bool = Field(True, description="show training progress (the chief's)")
    worker_hosts: list[str] = Field(
        default_factory=list,
        description="join a cluster started elsewhere (an Indexed Job's pods) as worker "
        "--worker-index of these host:port workers, instead of starting --workers here",
    )
    worker_index: int | None = Field(
        default=None, ge=0, description="this process's index in --worker-hosts (worker 0 is chief)"
    )
    tf_config: bool = Field(
        False,
        description="join the cluster the TF_CONFIG environment variable names, as the Kubeflow "
        "training operator's TFJob sets it",
    )

    @field_validator("worker_hosts", mode="after")
    @classmethod
    def _comma_separated_too(cls, hosts: list[str]) -> list[str]:
        # `--worker-hosts a:1,b:1` as well as `--worker-hosts a:1 b:1`
        return [host.strip() for item in hosts for host in item.split(",") if host.strip()]

    @model_validator(mode="after")
    def _one_layout(self) -> TrainSettings:
        if self.strategy == "mirrored" and self.workers > 1:
            raise ValueError("--strategy mirrored runs in one process: leave --workers at 1")
        joins = bool(self.worker_hosts) or self.worker_index is not None or self.tf_config
        if joins and (self.workers > 1 or self.strategy == "mirrored"):
            raise ValueError("a worker that joins a cluster runs alone: leave --workers at 1")
        if self.tf_config and (self.worker_hosts or self.worker_index is not None):
            raise ValueError("--tf-config names the cluster: drop --worker-hosts/--worker-index")
        if (self.worker_index is None) != (not self.worker_hosts):
            raise ValueError("--worker-hosts and --worker-index go together")
        if self.worker_index is not None and self.worker_index >= len(self.worker_hosts):
            raise ValueError(
                f"--worker-index {self.worker_index} is not one of {len(self.worker_hosts)} hosts"
            )
        if self.devices and self.strategy != "mirrored":
            raise ValueError("--devices needs --strategy mirrored")
        return self

    def targets_path(self) -> Path:
        """The folder of the run's file_sd file, given or the cache's."""
        return self.targets_dir or self.cache_dir / TARGETS_DIR


class ExportSettings(RunSettings, VersionSettings):
    """`tokenpulse model export`: export a training checkpoint as a new SavedModel version
    (`--preset` and `--run-dir` say where `latest` looks)."""

    checkpoint: str = Field(
        description="a checkpoint (its path prefix, or a directory: its newest), or `latest`: "
        "the newest of the run directory"
    )


class ImportSettings(VersionSettings):
    """`tokenpulse model import SOURCE PRESET_DIR`: export a causal LM from outside the project
    into the serving contract, as a new version (local files only: nothing is downloaded)."""

    source: Literal["keras-hub"] = Field(
        "keras-hub", description="where the model comes from: keras-hub (a preset directory)"
    )
    preset_dir: Path = Field(description="the preset directory `save_to_preset` wrote")


class CheckSettings(BaseSettings):
    """`tokenpulse model check`: validate a SavedModel against the serving contract."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_MODEL_", extra="ignore")

    path: Path = Field(description="the SavedModel directory (one version, e.g. models/gen/1)")
    prompt: str = Field("The assert statement", description="prompt of the smoke predict")
    max_new_tokens: int = Field(
        default=24, gt=0, description="tokens the smoke predict and the streamed run generate"
    )
    chunk: int = Field(
        default=5,
        gt=0,
        description="tokens per `continue` call when streaming (5 does not divide the default "
        "budget, so a short last chunk is checked too)",
    )
    seed: int = Field(0, description="sampling seed of the greedy runs")
