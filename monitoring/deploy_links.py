"""`tokenpulse links`: a deployment's links from settings, and compose's pages moved to them.

The committed rules and Alertmanager config link the local stack's loopback addresses
(cfg.links). Compose and Kubernetes link what the on-call engineer's browser reaches, one
setting each (TOKENPULSE_LINKS_RUNBOOK_URL_PATTERN, _GRAFANA_URL, _KIBANA_URL), refused when
loopback unless TOKENPULSE_LINKS_ALLOW_LOOPBACK is true:

- compose: from `.env`; this command runs as the `links` one-shot before Prometheus and
  Alertmanager and writes their rule files and config, moved to those links, into the volume
  they read (monitoring/README.md says why at start, not at build);
- Kubernetes: from deploy/k8s/links.env (that file only, never the environment, so the
  committed resources do not depend on the shell that built them), read by `tokenpulse build`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from monitoring.mixin import alertmanager, rulefiles
from monitoring.mixin.config import Links, MixinConfig
from monitoring.mixin.links import LinkError, check
from tokenpulse import paths
from tokenpulse.atomic import atomic_write
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

PROG = "tokenpulse links"
Deployment = Literal["local", "compose", "kubernetes"]
K8S_LINKS_FILE = paths.ROOT / "deploy" / "k8s" / "links.env"
HEADER = "# Written by `tokenpulse links` at start, linking this deployment's hosts.\n"


class LinksSettings(BaseSettings):
    """The three addresses a deployment's pages link, and whether loopback is allowed."""

    model_config = SettingsConfigDict(env_prefix="TOKENPULSE_LINKS_", extra="ignore")

    runbook_url_pattern: str = Field(
        description="each alert's runbook, {alertname} replaced (e.g. "
        "https://ops.example.com/runbooks/{alertname}: the on-call receiver, published there)"
    )
    grafana_url: str = Field(
        description="Grafana as the on-call engineer's browser reaches it (no trailing slash)"
    )
    kibana_url: str = Field(
        description="Kibana as the on-call engineer's browser reaches it (no trailing slash)"
    )
    tensorboard_url: str = Field(
        "",
        description="TensorBoard over the training runs' RUN/tensorboard, as the browser reaches "
        "it (no trailing slash); empty: the training dashboard links no TensorBoard",
    )
    allow_loopback: bool = Field(
        False, description="accept loopback links: a stack used on this machine only"
    )

    def links(self, deployment: Deployment) -> Links:
        """The deployment's Links; LinkError (one line) when malformed or refused."""
        links = Links(
            self.runbook_url_pattern.strip(),
            self.grafana_url.strip().rstrip("/"),
            self.kibana_url.strip().rstrip("/"),
            self.tensorboard_url.strip().rstrip("/"),
        )
        return check(links, deployment, allow_loopback=self.allow_loopback)


class _FileOnly(LinksSettings):
    """LinksSettings from one env file, the environment ignored."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def kubernetes_links(path: Path = K8S_LINKS_FILE) -> Links:
    """The Kubernetes deployment's Links, from its links file only."""
    if not path.is_file():
        raise LinkError(f"kubernetes: no links file {path}")
    source = DotEnvSettingsSource(LinksSettings, env_file=path)
    values = {k: v for k, v in source().items() if v is not None}
    try:
        settings = _FileOnly(**values)
    except ValidationError as exc:
        bad = ", ".join(f"TOKENPULSE_LINKS_{str(e['loc'][0]).upper()}" for e in exc.errors())
        raise LinkError(f"kubernetes: {path}: missing or invalid {bad}") from exc
    return settings.links("kubernetes")


def kubernetes_config(path: Path = K8S_LINKS_FILE) -> MixinConfig:
    """The config the Kubernetes resources are rendered with: the cluster's links."""
    return MixinConfig.local().with_links(kubernetes_links(path))


class RenderSettings(LinksSettings):
    """`tokenpulse links`: where the committed dashboards are, and where compose's files go."""

    dashboards_dir: Path = Field(
        Path("/src/dashboards"),
        description="the committed dashboards (<uid>.json), whose panels the alerts link",
    )
    out_dir: Path = Field(
        Path("/links"), description="where to write them (Prometheus' and Alertmanager's volume)"
    )


def dashboard_models(cfg: MixinConfig, folder: Path) -> dict[str, dict[str, Any]]:
    """The committed dashboards' models by key, read from `<uid>.json` in `folder`."""
    models = {}
    for key, uid in cfg.dashboard_uids.items():
        path = folder / f"{uid}.json"
        try:
            models[key] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LinkError(f"compose: cannot read dashboard {path}: {exc}") from exc
    return models


def render(settings: RenderSettings) -> list[Path]:
    """Write compose's rule files and Alertmanager config, rendered with its links; the paths."""
    cfg = MixinConfig.local().with_links(settings.links("compose"))
    texts = rulefiles.render_files(cfg, dashboard_models(cfg, settings.dashboards_dir))
    texts["alertmanager.yml"] = alertmanager.render(cfg)
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        dst = settings.out_dir / name
        atomic_write(dst, HEADER + text)  # Prometheus never reads half a file
        written.append(dst)
    return written


def run(settings: RenderSettings) -> int:
    """0 with one line per file written; else one error line, 2."""
    try:
        written = render(settings)
    except (LinkError, OSError) as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    for path in written:
        sys.stdout.write(f"wrote {path}\n")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags from RenderSettings (each also TOKENPULSE_LINKS_<NAME>)."""
    add_settings_arguments(parser, RenderSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Render compose's rule files and Alertmanager config with the configured links."""
    return run(settings_from_args(RenderSettings, args))
