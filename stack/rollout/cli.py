"""`tokenpulse rollout`: move a version label or the canary weight on the running stack.

    tokenpulse rollout status                    # versions, labels, canary weight, stable's past
    tokenpulse rollout label stable 2            # refused unless version 2 is AVAILABLE
    tokenpulse rollout rollback                  # stable back to the version it had before
    tokenpulse rollout canary-weight 25          # 25 % of callers to the canary; 0 stops it
    tokenpulse rollout serve 1 2                 # load version 2 beside 1, then label it canary
    tokenpulse rollout progressive 5 25 50 100   # steps judged on Prometheus; rolls back itself
    tokenpulse rollout rollback --deployment compose
    tokenpulse rollout rollback --deployment kubernetes   # then tokenpulse build; kubectl apply

Labels live in the models.config both the model server (TF Serving's config poll: ours or the
stock image) and the gateway poll; the canary weight in the gateway's canary weight file. Both
are files, so the same command works on `tokenpulse up`'s run directory and on compose's
bind-mounted serving/config. The gateway's /readyz (published by compose too, port-forwarded on
Kubernetes) says which versions are AVAILABLE and confirms the label it routes by. On Kubernetes
the file is the source of the tfserving-config ConfigMap: the action writes it and says how to
apply it; the gateway there has no canary weight file (`canary-weight` names the kubectl line).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stack.rollout.actions import PROG, canary_weight, move_label, rollback, serve, status
from stack.rollout.labels import RolloutError
from stack.rollout.progressive import ProgressiveSettings, progressive
from stack.rollout.settings import RolloutSettings
from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args
from tokenpulse.tfserving.config import LABEL_RE


def _label(text: str) -> str:
    if not LABEL_RE.match(text):
        raise argparse.ArgumentTypeError("version labels use [a-zA-Z0-9_]+")
    return text


def _version(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a version is a positive number, got {text!r}")
    return int(text)


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 100, got {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 100, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One action per subcommand, each with the RolloutSettings flags."""
    sub = parser.add_subparsers(dest="rollout_command", required=True, metavar="ACTION")
    status = sub.add_parser("status", help="AVAILABLE versions, labels and canary weight")
    label = sub.add_parser("label", help="point a version label at an AVAILABLE version")
    label.add_argument("label", type=_label, help="the label, e.g. stable or canary")
    label.add_argument("version", type=_version, help="the version it points at from now on")
    rollback = sub.add_parser("rollback", help="the stable label back to its previous version")
    weight = sub.add_parser("canary-weight", help="share of callers the gateway sends to canary")
    weight.add_argument("percent", type=_percent, help="0 to 100 (0: no traffic to the canary)")
    serve = sub.add_parser("serve", help="the versions the model server loads (before labelling)")
    serve.add_argument("versions", type=_version, nargs="+", help="every version to serve")
    for action in (status, label, rollback, weight, serve):
        add_settings_arguments(action, RolloutSettings, style=KEBAB)
    steps = sub.add_parser(
        "progressive", help="raise the canary weight in steps while it holds; roll back if not"
    )
    steps.add_argument("steps", type=_percent, nargs="+", help="weights in percent, e.g. 5 25 50")
    add_settings_arguments(steps, ProgressiveSettings, style=KEBAB)


def main(args: argparse.Namespace) -> int:
    """Run the action; a refusal or failure is one line on stderr and exit 1."""
    if args.rollout_command == "progressive":
        progressive_settings = settings_from_args(ProgressiveSettings, args)
        try:
            progressive(progressive_settings, args.steps, lambda line: print(line, flush=True))
        except RolloutError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 1
        return 0
    settings = settings_from_args(RolloutSettings, args)
    try:
        for line in run(settings, args.rollout_command, vars(args)):
            print(line)
    except RolloutError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0


def run(settings: RolloutSettings, action: str, args: dict[str, Any]) -> list[str]:
    """Do one action; the lines to print. RolloutError when refused or failed."""
    if action == "status":
        return status(settings)
    if action == "label":
        return move_label(settings, args["label"], args["version"])
    if action == "rollback":
        return rollback(settings)
    if action == "canary-weight":
        return canary_weight(settings, args["percent"])
    if action == "serve":
        return serve(settings, args["versions"])
    raise RolloutError(f"unknown action {action!r}")
