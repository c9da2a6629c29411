"""`tokenpulse links`: a deployment's links from settings, and compose's pages moved to them.

The committed rules and Alertmanager config link the local stack's loopback addresses
(config.LINKS). Compose and Kubernetes link what the on-call engineer's browser reaches, one
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
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from monitoring.mixin.config import Links
from monitoring.mixin.relink import LinkError, check, relink
from tokenpulse import paths
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args

PROG = "tokenpulse links"
Deployment = Literal["local", "compose", "kubernetes"]
K8S_LINKS_FILE = paths.ROOT / "deploy" / "k8s" / "links.env"
HEADER = "# Written by `tokenpulse links` at start, from {src}, linking this deployment's hosts.\n"


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
    allow_loopback: bool = Field(
        False, description="accept loopback links: a stack used on this machine only"
    )

    def links(self, deployment: Deployment) -> Links:
        """The deployment's Links; LinkError (one line) when malformed or refused."""
        links = Links(
            self.runbook_url_pattern.strip(),
            self.grafana_url.strip().rstrip("/"),
            self.kibana_url.strip().rstrip("/"),
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


class RenderSettings(LinksSettings):
    """`tokenpulse links`: where compose's rule files and Alertmanager config are, and go."""

    rules_dir: Path = Field(
        Path("/src/alerts"), description="the committed rule files (*.rules.yml) to move"
    )
    alertmanager_config: Path = Field(
        Path("/src/alertmanager.yml"), description="the committed Alertmanager config to move"
    )
    out_dir: Path = Field(
        Path("/links"), description="where to write them (Prometheus' and Alertmanager's volume)"
    )


def render(settings: RenderSettings) -> list[Path]:
    """Write compose's rule files and Alertmanager config, moved to its links; the paths."""
    links = settings.links("compose")
    sources = sorted(settings.rules_dir.glob("*.rules.yml")) + [settings.alertmanager_config]
    if len(sources) == 1:
        raise LinkError(f"compose: no *.rules.yml in {settings.rules_dir}")
    texts = {src: src.read_text(encoding="utf-8") for src in sources}
    settings.out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src, text in texts.items():
        dst = settings.out_dir / src.name
        tmp = dst.with_name(f".{dst.name}.tmp")
        tmp.write_text(relink(text, links, HEADER.format(src=src)), encoding="utf-8")
        tmp.replace(dst)  # Prometheus never reads half a file
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
    """Move compose's rule files and Alertmanager config to the configured links."""
    return run(settings_from_args(RenderSettings, args))
