"""`tokenpulse samples search|show`: find sampled generations in the embedded store or ES.

tokenpulse samples search --text "refund" --model gen --reason low_quality --since 2h
tokenpulse samples search --es-url http://127.0.0.1:9200 --nll-min 4 --json
tokenpulse samples show 3f2a...
"""

from __future__ import annotations

import argparse
import json
import sys

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Store flags (SamplesSettings) and the search filters."""
    from log_pipeline.settings import SamplesSettings

    sub = parser.add_subparsers(dest="samples_command", required=True, metavar="ACTION")
    search = sub.add_parser("search", help="records matching filters, newest first")
    show = sub.add_parser("show", help="one record, whole, as JSON")
    for p in (search, show):
        add_settings_arguments(p, SamplesSettings, style=KEBAB)
    search.add_argument("--text", default="", help="free text in the prompt or output")
    search.add_argument("--model", default="", help="model name")
    search.add_argument("--version", default="", help="model version that served")
    search.add_argument("--finish-reason", default="", help="stop | length")
    search.add_argument("--nll-min", type=float, default=None, help="mean NLL at least (nats)")
    search.add_argument("--nll-max", type=float, default=None, help="mean NLL at most (nats)")
    search.add_argument("--since", default="", help="ISO-8601 time or an age (15m, 2h, 7d)")
    search.add_argument("--until", default="", help="ISO-8601 time or an age (15m, 2h, 7d)")
    search.add_argument("--reason", default="", help="error|slow|low_quality|canary|head")
    search.add_argument("--key-id", default="", help="API key id")
    search.add_argument("--limit", type=int, default=20, help="at most this many records")
    search.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    show.add_argument("id", help="record id (event.id)")


def main(args: argparse.Namespace) -> int:
    """Run the search or show one record."""
    from log_pipeline.search import (
        EsStore,
        Filters,
        SearchError,
        SqliteStore,
        Store,
        parse_time,
        table,
    )
    from log_pipeline.settings import SamplesSettings

    settings = settings_from_args(SamplesSettings, args)
    try:
        store: Store = (
            EsStore(settings.es_url, settings.es_index, settings.es_auth())
            if settings.es_url
            else SqliteStore(settings.sqlite_path)
        )
        if args.samples_command == "show":
            record = store.show(args.id)
            if record is None:
                print(f"samples: error: no record {args.id!r}", file=sys.stderr)
                return 1
            print(json.dumps(record, indent=2, ensure_ascii=False))
            return 0
        if args.limit < 1:
            raise SearchError("--limit must be at least 1")
        filters = Filters(
            text=args.text, model=args.model, version=args.version,
            finish_reason=args.finish_reason, nll_min=args.nll_min, nll_max=args.nll_max,
            since=parse_time(args.since) if args.since else "",
            until=parse_time(args.until) if args.until else "",
            reason=args.reason, key_id=args.key_id, limit=args.limit,
        )  # fmt: skip
        records = store.search(filters)
    except SearchError as exc:
        print(f"samples: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        for r in records:
            print(json.dumps(r, ensure_ascii=False))
    else:
        print(table(records))
    return 0
