"""SQLite retention: records older than `sqlite_retention_days` leave the store and its index."""

from __future__ import annotations

import json
import time
from pathlib import Path

from log_pipeline.outputs import Item
from log_pipeline.outputs.sqlite import SqliteOutput
from log_pipeline.record import iso_utc
from log_pipeline.search import Filters, SqliteStore
from log_pipeline.settings import ShipperSettings
from log_pipeline.shipper import build_outputs

DAY = 86_400.0


def _item(i: int, age_days: float, text: str) -> Item:
    ts = iso_utc(time.time() - age_days * DAY)
    doc = {"@timestamp": ts, "event": {"id": f"{i:032d}"},
           "genai_sample": {"prompt": {"text": text}, "output": {"text": "ok"}}}  # fmt: skip
    return Item(f"{i:032d}", None, json.dumps(doc, ensure_ascii=False).encode(), ts)


def test_records_past_retention_are_deleted_with_their_index(tmp_path: Path) -> None:
    db = tmp_path / "samples.db"
    old = [_item(i, 31 + i, f"ancient refund 退款 {i}") for i in range(5)]
    old.append(_item(5, 31, "old with a nul \u0000 refund"))
    new = [_item(10 + i, 29 - i, f"recent refund 退款 {i}") for i in range(5)]
    keep_all = SqliteOutput(db)
    assert len(keep_all.send(old + new)) == 11
    keep_all.close()
    out = SqliteOutput(db, retention_days=30)
    assert out.prune() == 6
    store = SqliteStore(db)
    found = list(store.search(Filters(text="refund", limit=100)))
    assert sorted(r["event"]["id"] for r in found) == sorted(i.id for i in new)
    assert len(list(store.search(Filters(text="退款", limit=100)))) == 5
    assert out.prune() == 0
    out.close()
    fresh = SqliteOutput(db, retention_days=30)  # the shipper's: prunes at its first batch
    fresh.send([_item(20, 40, "stored late, past retention already")])
    assert len(list(SqliteStore(db).search(Filters(limit=100)))) == 5
    fresh.close()


def test_retention_is_a_shipper_setting_and_0_keeps_forever(tmp_path: Path) -> None:
    settings = ShipperSettings.model_validate(
        {"spool_dir": tmp_path / "spool", "sqlite_path": tmp_path / "s.db"}
    )
    (out,) = build_outputs(settings)
    assert isinstance(out, SqliteOutput) and out.retention_days == 30
    keep = SqliteOutput(tmp_path / "k.db", retention_days=0)
    keep.send([_item(1, 400, "very old")])
    assert keep.prune() == 0
    keep.close()
