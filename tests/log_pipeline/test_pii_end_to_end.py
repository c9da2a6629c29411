"""Seeded personal data never reaches the spool, the embedded store or Elasticsearch."""

from __future__ import annotations

import json
from pathlib import Path

from devtools.corpus import clean_corpus, pii_corpus
from devtools.standins.es import EsStandin
from log_pipeline.spool import list_segments
from tests.log_pipeline.conftest import make_sample, write_samples
from tests.log_pipeline.support import (
    PATTERN,
    STREAM,
    shipped,
    shipper_settings,
    shipping,
    wait_until,
)


def test_seeded_values_are_absent_everywhere_and_clean_text_survives(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    corpus = pii_corpus(seed=99, size=150)
    clean = clean_corpus(seed=98, size=50)
    samples = [make_sample(i, prompt=e.text, output=e.text[::-1]) for i, e in enumerate(corpus)]
    samples += [make_sample(1000 + i, prompt=t, output=t) for i, t in enumerate(clean)]
    write_samples(spool, samples)
    spool_bytes = b"".join(p.read_bytes() for p in list_segments(spool))
    with EsStandin(stream_patterns=(PATTERN,)) as es:
        settings = shipper_settings(spool, outputs=["sqlite", "elasticsearch"], es_url=es.url)
        with shipping(settings) as sh:
            wait_until(lambda: shipped(sh, "sqlite") == shipped(sh, "elasticsearch") == 200, "all")
        es_text = json.dumps(es.docs(STREAM), ensure_ascii=False)
    db = settings.sqlite_path
    store_bytes = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    for entry in corpus:
        for _kind, value in entry.planted:
            assert value.encode() not in spool_bytes, value
            assert value.encode() not in store_bytes, value
            assert value not in es_text, value
    for text in clean:  # left alone: stored exactly as written
        assert json.dumps(text, ensure_ascii=False) in es_text
