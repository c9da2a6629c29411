"""`tokenpulse gateway`: flags map 1:1 onto GatewaySettings (also TOKENPULSE_GATEWAY_* env vars).

tokenpulse gateway --upstream-url http://127.0.0.1:8501 --keys-file keys.json
tokenpulse gateway keys add --id demo --file keys.json   # prints the new key once
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenpulse.settings_cli import KEBAB, SettingsError, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per GatewaySettings field, plus the `keys` subcommand."""
    from serving.gateway.settings import GatewaySettings

    add_settings_arguments(parser, GatewaySettings, style=KEBAB)
    sub = parser.add_subparsers(dest="gateway_command", metavar="SUBCOMMAND")
    keys = sub.add_parser("keys", help="manage the hashed API keys file")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    add = keys_sub.add_parser("add", help="mint a key, store its hash, print the key once")
    add.add_argument("--id", dest="key_id", required=True, help="key id (shown in logs)")
    add.add_argument("--file", dest="key_file", type=Path, required=True, help="keys file")
    add.add_argument("--allow-model", dest="allow_models", action="append", help="default: all")
    add.add_argument("--requests-per-minute", type=float, default=None)
    add.add_argument("--tokens-per-minute", type=float, default=None)
    add.add_argument("--replace", action="store_true", help="replace a key with the same id")
    show = keys_sub.add_parser("list", help="list key ids and limits (never keys)")
    show.add_argument("--file", dest="key_file", type=Path, required=True, help="keys file")


def _keys(args: argparse.Namespace) -> int:
    from serving.gateway.keys import KeysFileError, add_key, load_keys

    try:
        if args.keys_command == "add":
            key = add_key(
                args.key_file,
                args.key_id,
                models=args.allow_models,
                requests_per_minute=args.requests_per_minute,
                tokens_per_minute=args.tokens_per_minute,
                replace=args.replace,
            )
            print(key)
            print(f"stored the hash of key {args.key_id!r} in {args.key_file}", file=sys.stderr)
        else:
            for k in load_keys(args.key_file):
                print(
                    f"{k.id}\tmodels={','.join(k.models)}\trpm={k.requests_per_minute or '-'}"
                    f"\ttpm={k.tokens_per_minute or '-'}"
                )
    except KeysFileError as exc:
        print(f"tokenpulse gateway keys: error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(args: argparse.Namespace) -> int:
    """Build the settings from flags and env, then run the gateway."""
    if getattr(args, "gateway_command", None) == "keys":
        return _keys(args)
    from serving.gateway.keys import KeysFileError
    from serving.gateway.server import run
    from serving.gateway.settings import GatewaySettings

    settings = settings_from_args(GatewaySettings, args)
    try:
        return run(settings)
    except KeysFileError as exc:  # read at start-up: a malformed file stops it with one line
        raise SettingsError(str(exc)) from exc
