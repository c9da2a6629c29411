"""The same filters give the same records from SQLite and from Elasticsearch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from devtools.standins.es import EsStandin
from log_pipeline.search import EsStore, Filters, SearchError, SqliteStore, fts_query, parse_time
from stack.cli import main
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import PATTERN, shipped, shipper_settings, shipping, wait_until

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, EsStandin]]:
    """Both stores filled with the same 40 records."""
    tmp = tmp_path_factory.mktemp("search")
    spool = tmp / "spool"
    samples = [
        make_sample(
            i,
            prompt=f"{'refund my order' if i % 4 == 0 else 'weather today'} number {i}",
            mean_nll=1.0 + i / 10,
            finish_reason="length" if i % 5 == 0 else "stop",
            version=str(1 + i % 2),
            key_id="key-b" if i % 3 == 0 else "key-a",
            status=500 if i == 7 else 200,
            timestamp=T0 + i * 60,
        )
        for i in range(40)
    ]
    write_samples(spool, samples)
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == shipped(sh, "elasticsearch") == 40, "fill")
        yield settings.sqlite_path, es


def _ids(records: list[dict[str, object]]) -> list[str]:
    return [r["genai_sample"]["request_id"] for r in records]  # type: ignore[index]


FILTERS = [
    (Filters(text="refund"), 10),
    (Filters(text="refund order", key_id="key-b"), 4),
    (Filters(model="gen", finish_reason="length"), 8),
    (Filters(nll_min=3.0, nll_max=4.0), 11),
    (Filters(since="2026-05-28T20:36:40.000Z", until="2026-05-28T20:45:40.000Z"), 9),
    (Filters(reason="error"), 1),
    (Filters(reason="low_quality", key_id="key-b"), 6),
    (Filters(limit=3), 3),
]


@pytest.mark.parametrize(("filters", "count"), FILTERS)
def test_same_results_from_both_stores(
    stores: tuple[Path, EsStandin], filters: Filters, count: int
) -> None:
    db, es = stores
    from_sqlite = SqliteStore(db).search(filters)
    from_es = EsStore(es.url, "genai-samples-*").search(filters)
    assert len(from_sqlite) == count
    assert _ids(from_sqlite) == _ids(from_es)


def test_newest_first_and_show(stores: tuple[Path, EsStandin]) -> None:
    db, es = stores
    records = SqliteStore(db).search(Filters(limit=40))
    assert _ids(records)[:2] == ["req-39", "req-38"]
    rid = records[5]["event"]["id"]
    assert SqliteStore(db).show(rid) == EsStore(es.url, "genai-samples-*").show(rid) == records[5]
    assert SqliteStore(db).show("nope") is None


def test_cli_table_json_and_show(
    stores: tuple[Path, EsStandin], capsys: pytest.CaptureFixture[str]
) -> None:
    db, es = stores

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["samples", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("search", "--sqlite-path", str(db), "--text", "refund", "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) == 10
    code, table, _ = run("search", "--es-url", es.url, "--reason", "error")
    assert code == 0 and table.splitlines()[0].split()[:3] == ["TIME", "ID", "MODEL"]
    assert len(table.splitlines()) == 2
    code, shown, _ = run("show", "--sqlite-path", str(db), lines[0]["event"]["id"])
    assert code == 0 and json.loads(shown) == lines[0]
    code, _, err = run("search", "--sqlite-path", str(db), "--since", "yesterday")
    assert code == 2 and "bad time" in err
    code, _, err = run("search", "--sqlite-path", str(db.parent / "none.db"))
    assert code == 2 and "no sample store" in err
    code, _, err = run("show", "--sqlite-path", str(db), "nope")
    assert code == 1 and "no record" in err


def test_parse_time_and_fts_quoting() -> None:
    now = datetime(2026, 5, 28, 12, 0, tzinfo=UTC)
    assert parse_time("2h", now) == "2026-05-28T10:00:00.000Z"
    assert parse_time("2026-05-28T12:00:00", now) == "2026-05-28T12:00:00.000Z"
    with pytest.raises(SearchError):
        parse_time("soon", now)
    assert fts_query('a "b" OR') == '"a" """b""" "OR"'
