"""Models, versions and labels: TF Serving's ServerCore + AspiredVersionsManager, in one place.

Each configured model's base path is polled for numeric version directories; its version policy
picks the aspired versions; new ones load (SavedModel, then warmup) and turn AVAILABLE before the
versions they replace start UNLOADING (availability-preserving). When no version on disk matches
the policy at all (a config naming a version whose files are missing, an emptied base path), every
version unloads but those a `specific` policy still names: TF Serving's file-system source then
aspires an empty list, and its AvailabilityPreservingPolicy unloads what nothing aspires. An
unloading version leaves the routing table first and is dropped only when no request holds it any
more, so no in-flight request fails. Version states are kept for GetModelStatus, including END for
unloaded and failed versions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serving.modelserver.config_files import (
    ConfigFileError,
    resolve_base_path,
    validate_model_config_list,
)
from serving.modelserver.metrics import UNKNOWN_MODEL, ServingMetrics
from serving.modelserver.servable import ContractError, LoadError, Servable
from serving.modelserver.status import (
    ServingError,
    failed_precondition,
    invalid_argument,
    not_found,
)
from tokenpulse.logging import get_logger

log = get_logger(__name__)

# ModelVersionStatus.State (get_model_status.proto)
LOADING, AVAILABLE, UNLOADING, END = "LOADING", "AVAILABLE", "UNLOADING", "END"

Warmup = Callable[[Servable], None]
Unloaded = Callable[[Servable], None]


@dataclass
class VersionState:
    """What GetModelStatus reports for one version."""

    state: str
    error_code: str = "OK"
    error_message: str = ""


@dataclass
class _Model:
    config: Any  # ModelConfig proto
    base_path: Path
    states: dict[int, VersionState] = field(default_factory=dict)
    ready: dict[int, Servable] = field(default_factory=dict)  # AVAILABLE versions only
    labels: dict[str, int] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    warned_empty: bool = False


def list_versions(base_path: Path) -> list[int]:
    """Numeric subdirectories of a base path, i.e. the versions on disk."""
    try:
        entries = list(base_path.iterdir())
    except OSError:
        return []
    return sorted(int(p.name) for p in entries if p.name.isdigit() and p.is_dir())


def aspired_versions(policy: Any, on_disk: list[int]) -> set[int]:
    """Which versions a ModelVersionPolicy keeps: latest N (default 1), all, or specific."""
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return set(on_disk)
    if choice == "specific":
        return set(policy.specific.versions) & set(on_disk)
    n = policy.latest.num_versions if choice == "latest" else 1
    return set(sorted(on_disk)[-max(n, 1) :]) if on_disk else set()


def named_versions(policy: Any) -> set[int]:
    """The versions a `specific` policy names (none for the other policies)."""
    if policy.WhichOneof("policy_choice") != "specific":
        return set()
    return set(policy.specific.versions)


class ModelManager:
    """Loads, routes and unloads versions for the configured models."""

    def __init__(
        self,
        metrics: ServingMetrics,
        *,
        warmup: Warmup | None = None,
        on_unload: Unloaded | None = None,
        allow_labels_for_unavailable: bool = False,
        load_retries: int = 0,
        load_retry_interval_s: float = 60.0,
    ) -> None:
        self._metrics = metrics
        self._load_retries = load_retries
        self._load_retry_interval_s = load_retry_interval_s
        self._stopping = threading.Event()  # cuts a retry wait short at shutdown
        self._warmup = warmup
        self._on_unload = on_unload
        self._allow_unavailable_labels = allow_labels_for_unavailable
        self._models: dict[str, _Model] = {}
        # states of models dropped from the config stay visible (END), as in TF's state monitor
        self._retired: dict[str, dict[int, VersionState]] = {}
        self._lock = threading.Lock()  # guards _models and routing
        self._apply = threading.RLock()  # one poll/reload at a time

    # ------------------------------------------------------------ routing

    def resolve(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """The version a request asks for, acquired (call `release()` when done)."""
        if not name:
            raise invalid_argument("ModelSpec has no name specified.")
        with self._lock:
            model = self._models.get(name)
            if label:
                if model is None or label not in model.labels:
                    raise invalid_argument(f"Unrecognized servable version label: {label}")
                version = model.labels[label]
            if version is not None:
                servable = model.ready.get(version) if model else None
                if servable is None:
                    raise not_found(f"Servable not found for request: Specific({name}, {version})")
            else:
                if model is None or not model.ready:
                    raise not_found(f"Servable not found for request: Latest({name})")
                servable = model.ready[max(model.ready)]
            servable.acquire()
            return servable

    def version_states(self, name: str, version: int | None = None) -> dict[int, VersionState]:
        """GetModelStatus: every known version's state (or one), NOT_FOUND as TF words it."""
        with self._lock:
            model = self._models.get(name)
            states = dict(model.states) if model else dict(self._retired.get(name, {}))
        if version is not None:
            if version not in states:
                raise not_found(f"Could not find version {version} of model {name}")
            return {version: states[version]}
        if not states:
            raise not_found(f"Could not find any versions of model {name}")
        return states

    def version_states_or_empty(self, name: str) -> dict[int, VersionState]:
        """Every known version's state; empty when none (no error)."""
        with self._lock:
            model = self._models.get(name)
            return dict(model.states) if model else {}

    def model_names(self) -> list[str]:
        """The configured model names."""
        with self._lock:
            return sorted(self._models)

    def metric_label(self, name: str) -> str:
        """`name` as a `model_name` label value: configured names and "" as they are, any
        other name folded into one fixed value so requests cannot mint new series."""
        with self._lock:
            known = not name or name in self._models
        return name if known else UNKNOWN_MODEL

    def available(self, name: str) -> list[int]:
        """AVAILABLE versions of a model."""
        with self._lock:
            model = self._models.get(name)
            return sorted(model.ready) if model else []

    # ------------------------------------------------------------ config

    def apply_config(self, config: Any) -> None:
        """Replace the model list (startup, config-file poll, HandleReloadConfigRequest).

        Omitted models unload; new ones load their aspired versions before this returns; labels
        are checked against AVAILABLE versions last, as TF Serving does.
        """
        try:
            validate_model_config_list(config)
        except ValueError as exc:
            raise invalid_argument(str(exc)) from exc
        with self._apply:
            wanted = {m.name: m for m in config.model_config_list.config}
            with self._lock:
                removed = [self._models.pop(n) for n in list(self._models) if n not in wanted]
                for name, mc in wanted.items():
                    model = self._models.get(name)
                    base = resolve_base_path(mc.base_path)
                    if model is None:
                        self._retired.pop(name, None)
                        self._models[name] = _Model(mc, base)
                    else:
                        model.config, model.base_path = mc, base
            for model in removed:
                self._unload_all(model)
                with self._lock:
                    self._retired[model.config.name] = {
                        v: VersionState(END, st.error_code, st.error_message)
                        for v, st in model.states.items()
                    }
            self.poll()
            self._apply_labels(wanted)

    def _apply_labels(self, wanted: dict[str, Any]) -> None:
        new_labels: dict[str, dict[str, int]] = {}
        with self._lock:
            for name, mc in wanted.items():
                model = self._models[name]
                labels: dict[str, int] = {}
                for label, version in mc.version_labels.items():
                    old = model.labels.get(label)
                    allowed = self._allow_unavailable_labels and (old is None or old == version)
                    if version not in model.ready and not allowed:
                        raise failed_precondition(
                            f"Request to assign label to version {version} of model {name}, "
                            "which is not currently available for inference"
                        )
                    labels[label] = version
                new_labels[name] = labels
            for name, labels in new_labels.items():
                self._models[name].labels = labels

    # ------------------------------------------------------------ versions

    def poll(self) -> None:
        """One pass over every base path: load what the policy wants, then unload the rest."""
        with self._apply:
            with self._lock:
                models = list(self._models.items())
            for name, model in models:
                on_disk = list_versions(model.base_path)
                if not on_disk and not model.warned_empty:
                    log.warning(
                        "no versions found under base path; did you forget to name the "
                        "version directory as a number?",
                        model=name,
                        base_path=str(model.base_path),
                    )
                model.warned_empty = not on_disk
                aspired = aspired_versions(model.config.model_version_policy, on_disk)
                for version in sorted(aspired):
                    if version not in model.ready and version not in model.failed:
                        self._load(name, model, version)
                with self._lock:
                    if aspired and not any(v in model.ready for v in aspired):
                        continue  # availability-preserving: the old serve while the new fail
                    # versions a `specific` policy names stay even when their directory went
                    keep = aspired | named_versions(model.config.model_version_policy)
                    stale = [v for v in model.ready if v not in keep]
                if stale and not aspired:
                    log.warning(
                        "no version on disk matches the version policy; unloading every "
                        "version, as TF Serving does",
                        model=name,
                        base_path=str(model.base_path),
                        on_disk=on_disk,
                    )
                for version in stale:
                    self._unload(name, model, version)

    def _set_state(self, model: _Model, version: int, state: VersionState) -> None:
        with self._lock:
            model.states[version] = state

    def _load(self, name: str, model: _Model, version: int) -> None:
        """Load one version, retrying a failed attempt like TF Serving's `--max_num_load_retries`
        (a version copied non-atomically loads once its last file lands); LOADING meanwhile."""
        path = model.base_path / str(version)
        self._set_state(model, version, VersionState(LOADING))
        attempt = 0
        while True:
            log.info("loading servable", model=name, version=version, path=str(path))
            failure = self._load_once(name, model, version, path)
            if failure is None:
                return
            code, message, retryable = failure
            if not retryable or attempt >= self._load_retries or self._stopping.is_set():
                break
            attempt += 1
            log.warning(
                "retrying servable load",
                model=name,
                version=version,
                attempt=attempt,
                of=self._load_retries,
                error=message,
            )
            if self._stopping.wait(self._load_retry_interval_s):
                break
        with self._lock:
            model.failed.add(version)
            model.states[version] = VersionState(END, code, message)

    def _load_once(
        self, name: str, model: _Model, version: int, path: Path
    ) -> tuple[str, str, bool] | None:
        """One load attempt (SavedModel, then warmup); if it failed, the error code and message
        and whether a retry could succeed (a contract refusal cannot: the files are complete)."""
        servable = Servable(name, version, path, self._metrics)
        try:
            servable.load()
            if self._warmup is not None:
                self._warmup(servable)
        except (LoadError, ServingError, OSError) as exc:
            code = exc.code if isinstance(exc, ServingError) else "UNKNOWN"
            message = exc.message if isinstance(exc, ServingError) else str(exc)
            log.error("loading servable failed", model=name, version=version, error=message)
            if self._on_unload is not None:
                self._on_unload(servable)
            servable.unload()
            return code, message, not isinstance(exc, ContractError)
        with self._lock:
            model.ready[version] = servable
            model.states[version] = VersionState(AVAILABLE)
        log.info("servable available", model=name, version=version)
        return None

    def _unload(self, name: str, model: _Model, version: int) -> None:
        with self._lock:
            servable = model.ready.pop(version, None)
            model.states[version] = VersionState(UNLOADING)
        if servable is None:
            return
        log.info("unloading servable", model=name, version=version)
        servable.wait_idle()
        if self._on_unload is not None:
            self._on_unload(servable)
        servable.unload()
        self._set_state(model, version, VersionState(END))
        log.info("servable unloaded", model=name, version=version)

    def _unload_all(self, model: _Model) -> None:
        for version in list(model.ready):
            self._unload(model.config.name, model, version)

    def cancel_retries(self) -> None:
        """Shutting down: a load waiting to retry gives up now."""
        self._stopping.set()

    def shutdown(self) -> None:
        """Unload everything (waiting for in-flight requests)."""
        self.cancel_retries()
        with self._apply:
            with self._lock:
                models = list(self._models.values())
            for model in models:
                self._unload_all(model)


class Poller:
    """Background file-system and config-file polling, TF Serving's two poll flags."""

    def __init__(
        self,
        manager: ModelManager,
        fs_interval_s: float,
        config_file: Path | None = None,
        config_interval_s: float = 0.0,
        read_config: Callable[[Path], Any] | None = None,
    ) -> None:
        self._manager = manager
        self._fs_interval = fs_interval_s
        self._config_file = config_file
        self._config_interval = config_interval_s
        self._read_config = read_config
        self._last_config_text: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start whichever polls are enabled (interval > 0)."""
        if self._fs_interval > 0:
            self._spawn(self._fs_loop, "fs-poll")
        if self._config_file is not None and self._config_interval > 0:
            self._last_config_text = self._config_file.read_text()
            self._spawn(self._config_loop, "config-poll")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _fs_loop(self) -> None:
        while not self._stop.wait(self._fs_interval):
            try:
                self._manager.poll()
            except Exception:  # a poll must never kill the poller
                log.exception("file system poll failed")

    def _config_loop(self) -> None:
        if self._config_file is None or self._read_config is None:
            return
        while not self._stop.wait(self._config_interval):
            try:
                text = self._config_file.read_text()
                if text == self._last_config_text:
                    continue
                self._last_config_text = text
                self._manager.apply_config(self._read_config(self._config_file))
                log.info("model config reloaded", file=str(self._config_file))
            except (ConfigFileError, ServingError, OSError) as exc:
                log.error("model config reload failed", file=str(self._config_file), error=str(exc))

    def stop(self) -> None:
        """Stop polling and wait for the threads."""
        self._stop.set()
        self._manager.cancel_retries()
        for thread in self._threads:
            thread.join(timeout=60)
