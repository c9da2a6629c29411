"""The running stack a drill acts on: its notifications, its Prometheus, its processes, traffic.

Built from RUN_DIR/stack.json (written by `tokenpulse up`, see stack/up/state.py), so a drill is a
separate process that needs nothing but the run directory. Standard library only: the drill ships
with the stack layer and must not pull an HTTP client into it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from signal import Signals
from typing import Any

from stack.rollout.labels import ModelsConfig, RolloutError
from stack.rollout.settings import LOCAL_MODELS_CONFIG
from stack.up.state import StackState, read_state

PAGE_RECEIVERS = frozenset({"pager"})  # the routes that wake someone up


class DrillError(RuntimeError):
    """The stack cannot run a drill (missing piece, unreachable component)."""


def is_watchdog(alertname: str) -> bool:
    """The always-firing dead-man's switch, which arrives by design."""
    return alertname.endswith("Watchdog")


@dataclass(frozen=True)
class Note:
    """One alert of one notification, as the on-call receiver recorded it."""

    at: float  # unix time the receiver got it
    receiver: str
    status: str  # firing | resolved
    alertname: str
    labels: dict[str, str]

    @property
    def is_page(self) -> bool:
        """A firing alert on a paging route (or critical wherever it went), the Watchdog aside."""
        critical = self.labels.get("severity") == "critical"
        return (
            self.status == "firing"
            and (self.receiver in PAGE_RECEIVERS or critical)
            and not is_watchdog(self.alertname)
        )


def _unix(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@dataclass
class Traffic:
    """Status codes of the background requests (0: no answer)."""

    codes: list[int] = field(default_factory=list)

    def failures(self) -> int:
        """Requests that got neither a 200 nor an intended 429."""
        return sum(1 for c in self.codes if c not in (200, 429))


@dataclass
class ServedModel:
    """One model of the stack's models config: its entry, base path and versions on disk."""

    name: str
    config: ModelsConfig
    entry: Any  # the config's ModelConfig entry
    base: Path
    on_disk: list[int]


class Target:
    """Handles on the stack of one run directory."""

    def __init__(self, run_dir: Path, timeout_s: float = 10.0) -> None:
        self.run_dir = run_dir
        self.timeout_s = timeout_s
        self.state: StackState = read_state(run_dir)
        self.key = (run_dir / "demo-key.txt").read_text().strip()

    def refresh(self) -> StackState:
        """Re-read stack.json (pids change when `up` restarts a component)."""
        self.state = read_state(self.run_dir)
        return self.state

    # --- HTTP ----------------------------------------------------------------------------------
    def _call(self, url: str, body: Any = None, method: str = "GET") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Authorization", f"Bearer {self.key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            return status, json.loads(raw or b"null")
        except ValueError:
            return status, None

    def prometheus(self, path: str, **params: str) -> Any:
        """One Prometheus API call; DrillError when it is unreachable or refuses."""
        url = self.state.url("prometheus_port", f"{path}?{urllib.parse.urlencode(params)}")
        try:
            status, doc = self._call(url)
        except OSError as exc:
            raise DrillError(f"prometheus unreachable: {exc}") from exc
        if status != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
            raise DrillError(f"prometheus {path} answered {status}: {doc}")
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query -> result list."""
        return list(self.prometheus("/api/v1/query", query=expr)["result"])

    def query_range(self, expr: str, start: float, end: float, step: str) -> list[dict[str, Any]]:
        """Range query -> result list (matrix)."""
        data = self.prometheus(
            "/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=step
        )
        return list(data["result"])

    def alert_rules(self) -> dict[str, dict[str, Any]]:
        """Every loaded alerting rule by name (the first of each name)."""
        out: dict[str, dict[str, Any]] = {}
        for group in self.prometheus("/api/v1/rules", type="alert")["groups"]:
            for rule in group["rules"]:
                out.setdefault(rule["name"], rule)
        return out

    def recording_rules(self) -> list[str]:
        """Every loaded recording rule's name."""
        groups = self.prometheus("/api/v1/rules", type="record")["groups"]
        return [r["name"] for g in groups for r in g["rules"]]

    def firing(self, pending: bool = False) -> list[dict[str, str]]:
        """Labels of the alerts firing in Prometheus now (and pending ones, with `pending`)."""
        alerts = self.prometheus("/api/v1/alerts")["alerts"]
        states = ("firing", "pending") if pending else ("firing",)
        return [a["labels"] for a in alerts if a["state"] in states]

    def set_fault(self, delay_s: float = 0.0, error_ratio: float = 0.0, **error: Any) -> None:
        """Set the fault proxy's delay and error ratio (0, 0: pass everything through); `error`
        shapes the injected errors (error_status, error_message, scope: stack/drill/proxy.py)."""
        if not self.state.config.fault_proxy_port:
            raise DrillError("the stack runs without a fault proxy: start up --fault-proxy-port")
        url = f"http://127.0.0.1:{self.state.config.fault_proxy_port}/-/fault"
        fault = {"delay_s": delay_s, "error_ratio": error_ratio, **error}
        status, doc = self._call(url, fault, "PUT")
        if status != 200:
            raise DrillError(f"fault proxy answered {status}: {doc}")

    def alertmanager_reload(self) -> None:
        """Make Alertmanager re-read its config file; DrillError when it refuses it."""
        status, doc = self._call(self.state.url("alertmanager_port", "/-/reload"), {}, "POST")
        if status != 200:
            raise DrillError(f"alertmanager refused its config ({status}): {doc}")

    def post_alert(self, alertname: str, ends_in_s: float, severity: str = "critical") -> None:
        """Post one alert straight to Alertmanager (labels drill="true"); 0 s ends it."""
        ends = datetime.now(UTC) + timedelta(seconds=ends_in_s)
        alert = {
            "labels": {"alertname": alertname, "severity": severity, "drill": "true"},
            "annotations": {"summary": "A drill's synthetic alert."},
            "endsAt": ends.isoformat(),
        }
        url = self.state.url("alertmanager_port", "/api/v2/alerts")
        status, doc = self._call(url, [alert], "POST")
        if status != 200:
            raise DrillError(f"alertmanager refused an alert ({status}): {doc}")

    # --- on-call -------------------------------------------------------------------------------
    def notes(self) -> list[Note]:
        """Every alert of every notification the on-call receiver recorded, in arrival order."""
        path = self.state.path("oncall.jsonl")
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            doc = json.loads(line)
            at = _unix(doc["received_at"])
            for alert in doc.get("alerts", []):
                labels = dict(alert.get("labels") or {})
                out.append(
                    Note(
                        at,
                        doc["receiver"],
                        alert.get("status", ""),
                        labels.get("alertname", ""),
                        labels,
                    )  # fmt: skip
                )
        return out

    # --- the served model ----------------------------------------------------------------------
    def served_model(self, path: Path | None = None) -> ServedModel:
        """The stack's model as its models config (`path`, or the stack's own) has it, and its
        version directories on disk."""
        path = path or self.run_dir / LOCAL_MODELS_CONFIG
        model = self.state.config.model
        try:
            config = ModelsConfig.read(path)
            entry = next(m for m in config.config.models if m.name == model)
        except (RolloutError, StopIteration) as exc:
            raise DrillError(f"cannot read model {model!r} from {path}: {exc}") from exc
        base = Path(entry.base_path)
        try:
            on_disk = sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())
        except OSError as exc:
            raise DrillError(f"cannot list the versions of {model!r}: {exc}") from exc
        return ServedModel(model, config, entry, base, on_disk)

    # --- processes -----------------------------------------------------------------------------
    def pid(self, component: str) -> int:
        """The current pid of one component."""
        pids = self.refresh().pids
        if component not in pids:
            raise DrillError(f"no component {component!r} in this stack ({', '.join(pids)})")
        return pids[component]

    def signal(self, component: str, sig: Signals) -> int:
        """Send `sig` to one component's process; its pid."""
        pid = self.pid(component)
        os.kill(pid, sig)
        return pid

    def signal_every(self, component: str, sig: Signals) -> list[int]:
        """Send `sig` to every instance of a component (`prometheus` and, with --ha,
        `prometheus-2`); their pids."""
        names = sorted(n for n in self.refresh().pids if n.split("-")[0] == component)
        if not names:
            raise DrillError(f"no component {component!r} in this stack")
        return [self.signal(n, sig) for n in names]

    def wait_restarted(self, component: str, old_pid: int, timeout_s: float) -> int:
        """Wait until `up` has restarted `component` (healthy, a new pid); the new pid."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid = self.refresh().pids.get(component, old_pid)
            if pid != old_pid:
                return pid
            time.sleep(0.5)
        raise DrillError(f"{component} was not restarted within {timeout_s:.0f} s")

    # --- traffic -------------------------------------------------------------------------------
    def generate(
        self, prompt: str = "drill traffic", max_new_tokens: int = 4, label: str | None = None
    ) -> int:
        """One POST /v1/generate through the gateway (to version `label`, if given); its status
        (0: no answer)."""
        url = self.state.url("gateway_port", "/v1/generate")
        try:
            body: dict[str, Any] = {"prompt": prompt, "max_new_tokens": max_new_tokens}
            if label is not None:
                body["version_label"] = label
            status, _ = self._call(url, body, "POST")
        except OSError:
            return 0
        return status

    @contextlib.contextmanager
    def traffic(
        self, rps: float, max_in_flight: int = 16, label: str | None = None
    ) -> Iterator[Traffic]:
        """About `rps` requests a second for the block, each on its own thread (a slow upstream
        does not slow the arrivals), at most `max_in_flight` at once; rps 0: none."""
        seen = Traffic()
        stop = threading.Event()
        slots = threading.BoundedSemaphore(max_in_flight)
        lock = threading.Lock()

        def one() -> None:
            try:
                code = self.generate(label=label)
                with lock:
                    seen.codes.append(code)
            finally:
                slots.release()

        def loop() -> None:
            while rps > 0 and not stop.wait(1.0 / rps):
                if slots.acquire(blocking=False):
                    threading.Thread(target=one, daemon=True).start()

        thread = threading.Thread(target=loop, name="drill-traffic", daemon=True)
        thread.start()
        try:
            yield seen
        finally:
            stop.set()
            thread.join()
            for _ in range(max_in_flight):  # the requests in flight finish
                slots.acquire(timeout=self.timeout_s * 6)


def wait_for(predicate: Callable[[], Any], timeout_s: float, every_s: float = 0.5) -> Any:
    """Poll until `predicate()` is truthy; its value, or None after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every_s)
