"""`tokenpulse grafana push|annotate`: dashboards into a Grafana folder; deployment annotations."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="Grafana base URL, e.g. http://grafana:3000")
    auth = parser.add_mutually_exclusive_group(required=True)
    auth.add_argument("--token-file", type=Path, help="file holding a service-account token")
    auth.add_argument("--basic-auth-file", type=Path, help="file holding `user:password`")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per request")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`push` and `annotate` subcommands."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    push = sub.add_parser(
        "push", help="upload or update the dashboards into a folder",
        description="Upload dashboards/*.json into a Grafana folder (created if missing).",
    )  # fmt: skip
    _connection(push)
    push.add_argument("--dir", type=Path, default=DASHBOARDS, help="default: %(default)s")
    push.add_argument("--folder-uid", default="tokenpulse", help="default: %(default)s")
    push.add_argument("--folder-title", default="TokenPulse", help="default: %(default)s")
    push.add_argument(
        "--overwrite", action="store_true",
        help="replace dashboards even if they changed in Grafana since they were read",
    )  # fmt: skip
    annotate = sub.add_parser(
        "annotate", help="add a deployment annotation (e.g. a model version going live)",
        description="Add an annotation tagged `deployment` at now (or --time-ms).",
    )  # fmt: skip
    _connection(annotate)
    annotate.add_argument("--text", required=True, help="e.g. 'gen v3 live'")
    annotate.add_argument(
        "--tag", action="append", default=[], help="extra tag, repeatable (e.g. model:gen)"
    )
    annotate.add_argument("--dashboard-uid", help="only on this dashboard (default: all)")
    annotate.add_argument("--time-ms", type=int, help="epoch milliseconds (default: now)")


def main(args: argparse.Namespace) -> int:
    """Run the action; Grafana problems exit 1 with a one-line message."""
    from monitoring.grafana.push import Credential, GrafanaPushError, annotate, connect, push

    try:
        credential = Credential.from_files(args.token_file, args.basic_auth_file)
        api = connect(args.url, credential, args.timeout)
        if args.action == "push":
            files = sorted(args.dir.glob("*.json"))
            if not files:
                raise GrafanaPushError(f"no dashboards (*.json) in {args.dir}")
            for answer in push(
                api, args.url, files, args.folder_uid, args.folder_title, args.overwrite
            ):
                print(f"{answer.get('uid')} version {answer.get('version')} {answer.get('url')}")
        else:
            ident = annotate(api, args.url, args.text, args.tag, args.dashboard_uid, args.time_ms)
            print(f"annotation {ident}")
    except GrafanaPushError as exc:
        sys.stderr.write(f"tokenpulse grafana {args.action}: {exc}\n")
        return 1
    return 0
