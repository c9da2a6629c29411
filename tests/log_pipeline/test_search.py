"""One query, one answer: the same records, in the same order, from SQLite and Elasticsearch."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.standins.es import EsStandin
from log_pipeline import assets
from log_pipeline.search import EsStore, Filters, SearchError, SqliteStore, parse_time
from log_pipeline.settings import SinkSettings
from log_pipeline.writer import SampleWriter
from stack.cli import main
from tests.log_pipeline.conftest import keep_all_rules, make_sample, write_samples
from tests.log_pipeline.support import shipped, shipper_settings, shipping, wait_until
from tokenpulse.samples import Feedback, Sample

T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
# (prompt, output): Chinese (simplified and traditional), English, and the two mixed
TEXTS = [
    ("我要申请退款", "好的，已为您提交退款申请"),
    ("退款什么时候到账", "一般3到5个工作日到账"),
    ("我的iPhone退款了吗", "您的 iPhone 退款已处理"),
    ("iPhone 退款", "refund issued"),
    ("請問退貨流程", "請到訂單頁面申請退貨"),
    ("账户被锁定了", "请重置密码"),
    ("退了款没有", "没有"),
    ("refund my order please", "Your refund is on its way"),
    ("Refund status?", "processing"),
    ("weather today", "sunny"),
    ("refunds processed", "yes, all refunds"),
    ("订单 order 12345 退款", "order refunded"),
    ("Café crème", "très bon"),
    ("", ""),
]
N = 60
PROMOTED = 1  # a skipped request kept for its feedback
FEEDBACK_RECORDS = 3  # two on kept samples (attached), one late
RECORDS = N + PROMOTED + FEEDBACK_RECORDS


def _feedback(i: int, score: float, t: float) -> Feedback:
    return Feedback(f"req-{i}", f"cmpl-req-{i}", "key-a", score, "thumbs", "not what I asked",
                    t, "gen", "9", "stable")  # fmt: skip


def _write_feedback(spool: Path) -> None:
    """Feedback in all its outcomes, after the samples: attached, late and promoted."""
    writer = SampleWriter(SinkSettings.model_validate({"spool_dir": spool}))
    writer.sampler.rules = keep_all_rules()
    for i in range(N):  # known to the writer as kept (the samples are in the spool already)
        writer._remember_kept(f"req-{i}")
    writer.feedback(_feedback(3, -1, T0 + 3600))
    writer.feedback(_feedback(4, 1, T0 + 3601))
    writer.feedback(_feedback(999, -1, T0 + 3602))
    writer.sampler.rules = writer.sampler.rules.model_copy(update={"head_rate": 0.0})
    held = make_sample(100, prompt="the answer was rude", version="9", timestamp=T0 + 3000)
    writer.write(held)  # skipped, held
    assert writer.held == 1
    writer.feedback(_feedback(100, -1, T0 + 3603))
    writer.close()


def _samples() -> list[Sample]:
    out = []
    for i in range(N):
        prompt, output = TEXTS[i % len(TEXTS)]
        status = (500, 429, 503)[i % 3] if i % 11 == 5 else 200
        s = make_sample(
            i,
            prompt=prompt or f"plain prompt {i}",
            output=output or f"plain output {i}",
            mean_nll=round(1.0 + (i * 37 % 50) / 10, 3),
            finish_reason="length" if i % 5 == 0 else "stop",
            version=str((9, 10, 2)[i % 3]),
            version_label="canary" if i % 4 == 0 else "stable",
            key_id="key-b" if i % 3 == 0 else "key-a",
            status=status,
            total_s=round(0.05 + (i * 13 % 40) / 20, 3),
            timestamp=T0 + (i // 2) * 60,  # two records a minute: ties broken by the record id
        )
        if status == 429:
            s.stats.error_code = "rate_limited"
        out.append(s)
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqliteStore, EsStore]]:
    """Both stores filled with the same records by one shipper."""
    tmp = tmp_path_factory.mktemp("search")
    spool = tmp / "spool"
    write_samples(spool, _samples())
    _write_feedback(spool)
    with EsStandin(stream_patterns=(assets.PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(
                lambda: shipped(sh, "sqlite") == shipped(sh, "elasticsearch") == RECORDS, "fill"
            )
        yield SqliteStore(settings.sqlite_path), EsStore(es.url, assets.PATTERN)


def _ids(records: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> list[str]:
    return [r["event"]["id"] for r in records]


def _prompts(records: list[dict[str, Any]]) -> set[str]:
    return {r["genai_sample"]["prompt"]["text"] for r in records}


ALL = 1000
# (filters, the prompts every match must have, or None: only compare the stores)
QUERIES: list[tuple[Filters, set[str] | None]] = [
    # Chinese: one, two, three and more characters, found inside a run of Chinese
    (Filters(text="退款", limit=ALL),
     {"我要申请退款", "退款什么时候到账", "我的iPhone退款了吗", "iPhone 退款",
      "订单 order 12345 退款"}),
    (Filters(text="退", limit=ALL), None),
    (Filters(text="申请退款", limit=ALL), {"我要申请退款"}),
    (Filters(text="到账", limit=ALL), {"退款什么时候到账"}),
    (Filters(text="什么时候", limit=ALL), {"退款什么时候到账"}),
    (Filters(text="退貨", limit=ALL), {"請問退貨流程"}),  # traditional is its own text
    (Filters(text="锁", limit=ALL), {"账户被锁定了"}),
    (Filters(text="款退", limit=ALL), set()),  # characters in a row, not anywhere
    # mixed
    (Filters(text="iPhone退款", limit=ALL), {"我的iPhone退款了吗", "iPhone 退款"}),
    (Filters(text="iphone 已处理", limit=ALL), {"我的iPhone退款了吗"}),
    (Filters(text="order 退款", limit=ALL), {"订单 order 12345 退款"}),
    # English: whole words, any case, every word somewhere in the prompt or the output
    (Filters(text="REFUND", limit=ALL),
     {"refund my order please", "Refund status?", "iPhone 退款"}),
    (Filters(text="refund processing", limit=ALL), {"Refund status?"}),  # across the two
    (Filters(text='"my order"', limit=ALL), {"refund my order please"}),
    (Filters(text='"order my"', limit=ALL), set()),
    (Filters(text="refunds", limit=ALL), {"refunds processed"}),
    (Filters(text="café", limit=ALL), {"Café crème"}),
    (Filters(text="cafe", limit=ALL), set()),
    (Filters(text="!!! ...", limit=ALL), None),  # no letters: no text filter
    # filters, alone and with text
    (Filters(text="退款", key_id="key-b", limit=ALL), None),
    (Filters(status="5xx", limit=ALL), None),
    (Filters(status="429", limit=ALL), None),
    (Filters(error_type="rate_limited", limit=ALL), None),
    (Filters(error_type="upstream_error", status="500", limit=ALL), None),
    (Filters(label="canary", finish_reason="length", limit=ALL), None),
    (Filters(version="10", model="gen", limit=ALL), None),
    (Filters(latency_min=0.5, latency_max=1.2, limit=ALL), None),
    (Filters(nll_min=3.0, nll_max=4.5, limit=ALL), None),
    (Filters(since="2026-05-28T20:36:40.000Z", until="2026-05-28T20:45:40.000Z", limit=ALL), None),
    (Filters(reason="error", limit=ALL), None),
    (Filters(id="req-7", limit=ALL), None),
    (Filters(id="cmpl-req-7", limit=ALL), None),
    (Filters(id="gen-req-8", limit=ALL), None),
    # order and pages
    (Filters(sort="nll", ascending=True, limit=ALL), None),  # failures have no NLL: last
    (Filters(sort="latency", limit=ALL), None),
    (Filters(sort="version", limit=ALL), None),
    (Filters(sort="status", ascending=True, limit=ALL), None),
    (Filters(sort="time", ascending=True, limit=ALL), None),
    (Filters(limit=7, offset=14), None),
    (Filters(text="refund", limit=2, offset=1), None),
    # feedback: samples kept for it, and feedback stored on its own; plain searches leave the
    # latter out, id lookups list a sample with its feedback
    (Filters(feedback="negative", limit=ALL), None),
    (Filters(feedback="positive", limit=ALL), None),
    (Filters(feedback="any", limit=ALL), None),
    (Filters(feedback="neutral", limit=ALL), None),
    (Filters(feedback="negative", text="rude", limit=ALL), {"the answer was rude"}),
    (Filters(feedback="any", key_id="key-a", sort="nll", limit=ALL), None),
    (Filters(id="cmpl-req-3", limit=ALL), None),
    (Filters(reason="feedback", limit=ALL), {"the answer was rude"}),
]  # fmt: skip


@pytest.mark.parametrize(("filters", "expected"), QUERIES, ids=[repr(q[0].text) for q in QUERIES])
def test_one_query_one_answer(
    stores: tuple[SqliteStore, EsStore], filters: Filters, expected: set[str] | None
) -> None:
    sqlite, es = stores
    from_sqlite = list(sqlite.search(filters))
    assert _ids(from_sqlite) == _ids(es.search(filters))
    if expected is not None:
        assert _prompts(from_sqlite) == expected
        if expected:
            assert from_sqlite
    else:
        assert from_sqlite or filters.offset or filters.feedback == "neutral"


def test_feedback_is_found_with_its_sample(stores: tuple[SqliteStore, EsStore]) -> None:
    sqlite, es = stores
    negative = list(sqlite.search(Filters(feedback="negative", limit=ALL)))
    by_id = {r["genai_sample"]["request_id"]: r["genai_sample"] for r in negative}
    assert set(by_id) == {"req-3", "req-999", "req-100"}
    assert by_id["req-100"]["feedback"]["outcome"] == "promoted"
    assert by_id["req-100"]["sampling"]["reasons"] == ["feedback"]
    assert by_id["req-3"]["kind"] == "feedback" and by_id["req-3"]["feedback"]["outcome"] == (
        "attached")  # fmt: skip
    assert by_id["req-999"]["feedback"]["outcome"] == "late"
    shown = sqlite.show("cmpl-req-3")
    assert shown == es.show("cmpl-req-3")
    assert [r["genai_sample"].get("kind", "sample") for r in shown] == ["sample", "feedback"]
    assert len(list(sqlite.search(Filters(limit=ALL)))) == N + PROMOTED
    assert (
        sqlite.count(Filters(feedback="any"), ["feedback"])
        == es.count(Filters(feedback="any"), ["feedback"])
        == [(("negative",), 3), (("positive",), 1)]
    )


def test_the_filters_mean_what_they_say(stores: tuple[SqliteStore, EsStore]) -> None:
    sqlite, _ = stores
    every = list(sqlite.search(Filters(limit=ALL)))
    assert len(every) == N + PROMOTED

    def where(**kw: Any) -> list[dict[str, Any]]:
        return list(sqlite.search(Filters(limit=ALL, **kw)))

    assert {r["http"]["response"]["status_code"] for r in where(status="5xx")} == {500, 503}
    assert {r["error"]["type"] for r in where(status="4xx")} == {"rate_limited"}
    assert all(0.5 <= r["genai_sample"]["timings"]["total_s"] <= 1.2 for r in where(
        latency_min=0.5, latency_max=1.2))  # fmt: skip
    assert {r["genai_sample"]["version_label"] for r in where(label="canary")} == {"canary"}
    looked_up = where(id="cmpl-req-7")
    assert [r["genai_sample"]["request_id"] for r in looked_up] == ["req-7"]
    assert _ids(where(id=looked_up[0]["event"]["id"])) == _ids(looked_up)
    newest = [r["@timestamp"] for r in every]
    assert newest == sorted(newest, reverse=True)
    by_version = [r["genai_sample"]["version_number"] for r in where(sort="version")]
    assert by_version[0] == 10 and by_version[-1] == 2  # numeric, not "9" > "10"
    nll = [r["genai_sample"]["quality"].get("mean_nll") for r in where(sort="nll", ascending=True)]
    present = [v for v in nll if v is not None]
    assert present == sorted(present) and nll[len(present) :] == [None] * (len(nll) - len(present))
    pages = [_ids(sqlite.search(Filters(limit=9, offset=o))) for o in range(0, len(every), 9)]
    assert sum(pages, []) == _ids(every)


def test_count_by_is_the_same_in_both(stores: tuple[SqliteStore, EsStore]) -> None:
    sqlite, es = stores
    for by, f in ((["model", "version", "finish_reason"], Filters()),
                  (["status", "error_type"], Filters()),
                  (["label"], Filters(text="退款"))):  # fmt: skip
        groups = sqlite.count(f, by)
        assert groups == es.count(f, by)
        assert sum(n for _key, n in groups) == len(list(sqlite.search(
            Filters(text=f.text, limit=ALL))))  # fmt: skip
    (failed,) = sqlite.count(Filters(status="5xx"), ["finish_reason"])
    assert failed[0] == ("",)  # no finish reason on failures, in both stores


def test_show_by_any_id(stores: tuple[SqliteStore, EsStore]) -> None:
    sqlite, es = stores
    (record,) = sqlite.show("cmpl-req-5")
    assert record["genai_sample"]["request_id"] == "req-5"
    for key in (record["event"]["id"], "req-5", "gen-req-5"):
        assert sqlite.show(key) == es.show(key) == [record]
    assert sqlite.show("nope") == es.show("nope") == []


def test_past_the_result_window_pages_with_a_point_in_time(
    stores: tuple[SqliteStore, EsStore],
) -> None:
    sqlite, es = stores
    es.page = 7  # several search_after pages over 60 records
    try:
        for f in (Filters(limit=10_001), Filters(limit=10_001, offset=11, sort="nll"),
                  Filters(text="退款", limit=20_000, ascending=True)):  # fmt: skip
            assert _ids(es.search(f)) == _ids(sqlite.search(f))
        assert list(es.search(Filters(offset=9_995, limit=10))) == []
    finally:
        es.page = EsStore.page


def test_ten_thousand_and_more_from_elasticsearch() -> None:
    def doc(i: int) -> dict[str, Any]:
        moment = f"2026-05-28T20:{i // 6000:02d}:{i // 100 % 60:02d}.{i % 100:03d}Z"
        return {"@timestamp": moment, "event": {"id": f"{i:06d}"}, "genai_sample": {"model": "g"}}

    docs = [doc(i) for i in range(10_050)]
    body = "".join(
        json.dumps({"create": {"_id": d["event"]["id"]}}) + "\n" + json.dumps(d) + "\n"
        for d in docs
    )
    with EsStandin(stream_patterns=(assets.PATTERN,)) as es:
        httpx.post(f"{es.url}/{assets.DEFAULT_STREAM}/_bulk", content=body,
                   headers={"Content-Type": "application/x-ndjson"}, timeout=60)  # fmt: skip
        store = EsStore(es.url, assets.PATTERN)
        found = _ids(store.search(Filters(limit=20_000)))
        assert found == [d["event"]["id"] for d in reversed(docs)]
        with pytest.raises(SearchError, match="Result window is too large"):
            store._call("search", store.client.search, index=assets.PATTERN, size=10_001)


def test_cli(stores: tuple[SqliteStore, EsStore], capsys: pytest.CaptureFixture[str]) -> None:
    sqlite, es = stores
    db = str(sqlite.conn.execute("PRAGMA database_list").fetchone()[2])

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["samples", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("search", "--sqlite-path", db, "--text", "退款", "--json", "--limit", "100")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and lines and all("退款" in json.dumps(x, ensure_ascii=False) for x in lines)
    code, out_es, _ = run("search", "--es-url", es.url,
                          "--text", "退款", "--format", "jsonl", "--limit", "100")  # fmt: skip
    assert code == 0 and out_es == out
    code, table, _ = run("search", "--sqlite-path", db, "--reason", "error", "--status", "5xx")
    assert code == 0 and table.splitlines()[0].split()[:3] == ["TIME", "REQUEST", "MODEL"]
    code, out, _ = run("search", "--sqlite-path", db, "--format", "csv", "--limit", "5",
                       "--sort", "latency", "--ascending")  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 5 and rows[0]["request_id"].startswith("req-")
    assert [float(r["total_s"]) for r in rows] == sorted(float(r["total_s"]) for r in rows)
    code, out, _ = run("search", "--sqlite-path", db, "--count-by", "model,version,finish_reason")
    assert code == 0 and out.splitlines()[0].split() == ["MODEL", "VERSION", "FINISH_REASON",
                                                         "COUNT"]  # fmt: skip
    assert sum(int(line.split()[-1]) for line in out.splitlines()[1:]) == N + PROMOTED
    code, shown, _ = run("show", "--sqlite-path", db, "cmpl-req-3")  # the sample and its feedback
    assert code == 0 and [r["genai_sample"]["request_id"] for r in json.loads(shown)] == [
        "req-3", "req-3"]  # fmt: skip
    code, out, _ = run("search", "--sqlite-path", db, "--feedback", "negative", "--format", "jsonl")
    code_es, out_es, _ = run("search", "--es-url", es.url, "--feedback", "negative",
                             "--format", "jsonl")  # fmt: skip
    assert code == code_es == 0 and out == out_es and len(out.splitlines()) == 3
    code, table, _ = run("search", "--sqlite-path", db, "--feedback", "positive")
    assert code == 0 and "FEEDBACK" in table.splitlines()[0] and "positive" in table
    code, _, err = run("show", "--sqlite-path", db, "nope")
    assert code == 1 and "no record" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "bad time"),
        (["--status", "5x"], "bad status"),
        (["--sort", "size"], "--sort"),
        (["--count-by", "model,colour"], "unknown group"),
        (["--limit", "0"], "--limit"),
        (["--format", "xml"], "--format"),
        (["--nll-min", "high"], "--nll-min"),
        (["--feedback", "bad"], "--feedback"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    stores: tuple[SqliteStore, EsStore],
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    db = str(stores[0].conn.execute("PRAGMA database_list").fetchone()[2])
    assert main(["samples", "search", "--sqlite-path", db, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["samples", "search", "--sqlite-path", str(tmp_path / "none.db")]) == 2
    assert "no sample store" in capsys.readouterr().err


def test_parse_time() -> None:
    now = datetime(2026, 5, 28, 12, 0, tzinfo=UTC)
    assert parse_time("2h", now) == "2026-05-28T10:00:00.000Z"
    assert parse_time("2026-05-28T12:00:00", now) == "2026-05-28T12:00:00.000Z"
    with pytest.raises(SearchError):
        parse_time("soon", now)
