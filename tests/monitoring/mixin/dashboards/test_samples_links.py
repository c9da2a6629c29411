"""The quality panels link the samples behind a spike: Kibana Discover, and the local command."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urlsplit

from log_pipeline.assets import DATA_VIEW_ID, FIELD_TYPES
from log_pipeline.commands.samples import add_arguments
from monitoring.mixin.config import DEFAULT as cfg
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.dashboards import quality
from monitoring.mixin.dashboards.panels import SAMPLES_COMMAND

LINKED = {"Mean NLL per token", "Repetition", "Empty outputs", "Truncation", "Negative feedback",
          "NLL drift from the mean"}  # fmt: skip


def _panels() -> dict[str, dict[str, object]]:
    model = json.loads(json.dumps(quality.build(config).build(), default=lambda o: o.__dict__))
    return {p["title"]: p for p in model["panels"] if p.get("type") != "row"}


def _kibana_links(panel: dict[str, object]) -> list[str]:
    links = panel.get("links") or []
    assert isinstance(links, list)
    return [link["url"] for link in links if link["url"].startswith(cfg.links.kibana_url)]


def test_quality_panels_link_kibana_discover_for_model_version_and_time_range() -> None:
    panels = _panels()
    assert {t for t, p in panels.items() if _kibana_links(p)} == LINKED
    (url,) = _kibana_links(panels["Truncation"])
    parts = urlsplit(url)
    assert parts.path == "/app/discover"
    fragment = unquote(parts.fragment)
    assert "_g=(time:(from:'${__from:date:iso}',to:'${__to:date:iso}'))" in fragment
    assert f"index:'{DATA_VIEW_ID}'" in fragment
    query = re.search(r"query:\(language:lucene,query:'([^']*)'\)", fragment)
    assert query is not None
    filters = dict(re.findall(r"([\w.]+):/(\$\{\w+:regex\})/", query.group(1)))
    assert filters == {"genai_sample.model": "${model:regex}",
                       "genai_sample.version": "${version:regex}"}  # fmt: skip
    assert all(FIELD_TYPES[field] == "keyword" for field in filters)
    assert " " not in url  # encoded


def test_the_local_command_parses_and_is_in_the_description() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    words = SAMPLES_COMMAND.split()[2:]  # after "tokenpulse samples"
    args = parser.parse_args(words)
    assert (args.model, args.version) == ("$model", "$version")
    assert (args.since, args.until) == ("${__from:date:iso}", "${__to:date:iso}")
    assert SAMPLES_COMMAND in str(_panels()["Empty outputs"]["description"])
