"""The data sources collectors read, built lazily from settings and shared between collectors.

The tfserving and canary collectors share one status tracker; only sources some enabled
collector asked for are created and started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from exporter.tfserving.models import ModelEntry

if TYPE_CHECKING:
    from exporter.nvml.fields import MetricSpec
    from exporter.nvml.session import NvmlSession
    from exporter.settings import ExporterSettings
    from exporter.tfserving.canary import CanaryRunner
    from exporter.tfserving.client import TfServingClient
    from exporter.tfserving.status import StatusTracker


class Sources:
    """Lazily built, shared data sources; `start()` and `close()` run their threads."""

    def __init__(self, settings: ExporterSettings) -> None:
        self.settings = settings
        self._client: TfServingClient | None = None
        self._tracker: StatusTracker | None = None
        self._canary: CanaryRunner | None = None
        self._nvml: NvmlSession | None = None

    def client(self) -> TfServingClient:
        """The REST client for TF Serving."""
        from exporter.tfserving.client import TfServingClient

        if self._client is None:
            s = self.settings
            self._client = TfServingClient(s.tfserving_url, s.request_timeout_seconds)
        return self._client

    def status_tracker(self) -> StatusTracker:
        """The shared model status poller."""
        from exporter.tfserving.models import ConfigTargets, StaticTargets
        from exporter.tfserving.status import StatusTracker

        if self._tracker is None:
            s = self.settings
            targets: ConfigTargets | StaticTargets
            if s.model_config_file is not None:
                targets = ConfigTargets(s.model_config_file)
            else:
                targets = StaticTargets([ModelEntry(s.model_name, s.model_base_path, {})])
            self._tracker = StatusTracker(self.client(), targets)
        return self._tracker

    def status_stale_after_s(self) -> float:
        """How old a status poll may get before the tfserving collector reports a failure."""
        s = self.settings
        return 3 * s.status_poll_interval_seconds + s.request_timeout_seconds

    def canary_runner(self) -> CanaryRunner:
        """The shared canary runner (it follows the status tracker)."""
        from exporter.tfserving.canary import CanaryRunner

        if self._canary is None:
            s = self.settings
            self._canary = CanaryRunner(
                self.client(),
                self.status_tracker(),
                s.canary_interval_seconds,
                s.canary_timeout_seconds,
            )
        return self._canary

    def canary_stale_after_s(self) -> float:
        """A cycle may take a while (every prompt of every version): allow for timeouts."""
        s = self.settings
        return 3 * s.canary_interval_seconds + 10 * s.canary_timeout_seconds

    def nvml_session(self) -> NvmlSession:
        """The NVML session over the configured backend (initialised on first scrape)."""
        from exporter.nvml.session import NvmlSession

        if self._nvml is None:
            s = self.settings
            if s.nvml_backend == "fake":
                from exporter.nvml.fake import demo_backend

                backend = demo_backend(s.nvml_fake_gpus, faults_file=s.nvml_fake_faults)
            else:
                from exporter.nvml.real import RealNvmlBackend

                backend = RealNvmlBackend()  # type: ignore[assignment]
            self._nvml = NvmlSession(backend, retry_s=s.nvml_retry_seconds)
        return self._nvml

    def nvml_fields(self) -> list[MetricSpec]:
        """The parsed NVML fields file (a bad file fails start-up)."""
        from exporter.nvml.fields import load_fields

        return load_fields(self.settings.nvml_fields_file)

    def start(self) -> None:
        """Start the background threads of the sources in use."""
        if self._tracker is not None:
            self._tracker.start(self.settings.status_poll_interval_seconds)
        if self._canary is not None:
            self._canary.start()
        # NVML is initialised by the first scrape, under the nvml collector's deadline: a driver
        # that hangs in nvmlInit must not keep the exporter from serving.

    def close(self) -> None:
        """Stop every thread started by `start()`."""
        if self._canary is not None:
            self._canary.stop()
        if self._tracker is not None:
            self._tracker.stop()
        if self._nvml is not None:
            self._nvml.close()
