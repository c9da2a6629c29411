"""`tokenpulse grafana push|annotate`: dashboards into a Grafana folder; deployment annotations."""

from __future__ import annotations

import argparse
import sys

from monitoring.grafana.settings import AnnotateSettings, PushSettings
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`push` and `annotate` subcommands, one flag per settings field."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    push = sub.add_parser(
        "push", help="upload or update the dashboards into a folder",
        description="Upload dashboards/*.json into a Grafana folder (created if missing). A "
        "dashboard changed in Grafana since it was read is a version conflict (exit 1).",
    )  # fmt: skip
    add_settings_arguments(push, PushSettings, style=KEBAB)
    annotate = sub.add_parser(
        "annotate", help="add a deployment annotation (e.g. a model version going live)",
        description="Add an annotation tagged `deployment`, at now or --time-ms.",
    )  # fmt: skip
    add_settings_arguments(annotate, AnnotateSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Run the action; Grafana problems exit 1 with a one-line message."""
    from monitoring.grafana.push import Credential, GrafanaPushError, annotate, connect, push

    settings = settings_from_args(PushSettings if args.action == "push" else AnnotateSettings, args)
    try:
        credential = Credential.from_files(settings.token_file, settings.basic_auth_file)
        api = connect(settings.url, credential, settings.timeout_s)
        if isinstance(settings, PushSettings):
            files = sorted(settings.dir.glob("*.json"))
            if not files:
                raise GrafanaPushError(f"no dashboards (*.json) in {settings.dir}")
            answers = push(
                api, settings.url, files, settings.folder_uid, settings.folder_title,
                settings.overwrite,
            )  # fmt: skip
            for answer in answers:
                print(f"{answer.get('uid')} version {answer.get('version')} {answer.get('url')}")
        else:
            ident = annotate(
                api, settings.url, settings.text, settings.tags, settings.dashboard_uid,
                settings.time_ms,
            )  # fmt: skip
            print(f"annotation {ident}")
    except GrafanaPushError as exc:
        sys.stderr.write(f"tokenpulse grafana {args.action}: {exc}\n")
        return 1
    return 0
