"""`tokenpulse samples search|show`: find sampled generations in the embedded store or ES.

tokenpulse samples search --text "退款" --model gen --reason low_quality --since 2h
tokenpulse samples search --es-url http://127.0.0.1:9200 --nll-min 4 --format csv --limit 50000
tokenpulse samples search --status 5xx --count-by model,version,finish_reason
tokenpulse samples show cmpl-3f2a...
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tokenpulse.settings_cli import KEBAB, add_settings_arguments, settings_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Store flags (SamplesSettings); search adds the filters, order and output (SearchSettings)."""
    from log_pipeline.settings import SamplesSettings, SearchSettings

    sub = parser.add_subparsers(dest="samples_command", required=True, metavar="ACTION")
    search = sub.add_parser("search", help="records matching filters, newest first")
    show = sub.add_parser("show", help="the records of one id, whole, as JSON")
    add_settings_arguments(search, SearchSettings, style=KEBAB)
    search.add_argument(
        "--json", dest="format", action="store_const", const="jsonl", default=argparse.SUPPRESS,
        help="JSON lines (the same as --format jsonl)",
    )  # fmt: skip
    add_settings_arguments(show, SamplesSettings, style=KEBAB)
    show.add_argument("id", help="record id (event.id), request id, or response id (cmpl-/gen-)")
    from log_pipeline.commands.replay import add_replay_arguments  # dead letters back

    add_replay_arguments(sub)


def main(args: argparse.Namespace) -> int:
    """Run the search or show one record."""
    if args.samples_command == "replay":
        from log_pipeline.commands.replay import main as replay

        return replay(args)
    from log_pipeline.search import EsStore, Filters, SearchError, SqliteStore, Store, parse_time
    from log_pipeline.search_format import group_table, table, write_csv, write_jsonl
    from log_pipeline.settings import SamplesSettings, SearchSettings

    show = args.samples_command == "show"
    settings = settings_from_args(SamplesSettings if show else SearchSettings, args)
    try:
        store: Store = (
            EsStore(settings.es_url, settings.es_index, settings.es_auth())
            if settings.es_url
            else SqliteStore(settings.sqlite_path)
        )
        if show:
            records = store.show(args.id)
            if not records:
                print(f"samples: error: no record {args.id!r}", file=sys.stderr)
                return 1
            shown = records[0] if len(records) == 1 else records
            print(json.dumps(shown, indent=2, ensure_ascii=False))
            return 0
        s: SearchSettings = settings
        filters = Filters(
            text=s.text, id=s.id, model=s.model, version=s.version, label=s.label,
            finish_reason=s.finish_reason, status=s.status, error_type=s.error_type,
            key_id=s.key_id, reason=s.reason, feedback=s.feedback, nll_min=s.nll_min,
            nll_max=s.nll_max,
            latency_min=s.latency_min, latency_max=s.latency_max,
            since=parse_time(s.since) if s.since else "",
            until=parse_time(s.until) if s.until else "",
            sort=s.sort, ascending=s.ascending, offset=s.offset, limit=s.limit,
        )  # fmt: skip
        if s.count_by:
            print(group_table(s.count_by, store.count(filters, s.count_by)))
            return 0
        records_iter = store.search(filters)
        if s.format == "jsonl":
            write_jsonl(records_iter, sys.stdout)
        elif s.format == "csv":
            write_csv(records_iter, sys.stdout)
        else:
            print(table(records_iter))
    except SearchError as exc:
        print(f"samples: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
