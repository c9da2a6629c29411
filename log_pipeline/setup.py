"""`tokenpulse es setup`: install the ILM policy, templates, data stream and Kibana saved objects.

Every step is a PUT or an overwrite import, so running it again changes nothing. Authentication
failures and version mismatches end with one clear line, never a traceback.
"""

from __future__ import annotations

from typing import Any

import httpx
from elastic_transport import TransportError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    BadRequestError,
    Elasticsearch,
)

from log_pipeline import assets
from log_pipeline.settings import EsAuth, EsSetupSettings
from tokenpulse.logging import get_logger

log = get_logger(__name__)


class SetupError(Exception):
    """Setup could not finish; the message says why, for the user."""


def _es_call(what: str, url: str, fn: Any, **kwargs: Any) -> Any:
    try:
        return fn(**kwargs)
    except AuthenticationException as exc:
        raise SetupError(
            f"elasticsearch at {url}: authentication failed (check the credentials)"
        ) from exc
    except AuthorizationException as exc:
        raise SetupError(f"elasticsearch at {url}: not allowed to {what}: {exc.message}") from exc
    except BadRequestError as exc:
        if "media_type_header_exception" in str(exc):
            raise SetupError(
                f"elasticsearch at {url} does not accept 9.x clients: Elasticsearch 9 is required"
            ) from exc
        raise SetupError(f"elasticsearch at {url}: {what} rejected: {exc.message}") from exc
    except ApiError as exc:
        raise SetupError(f"elasticsearch at {url}: {what} failed: {exc.message}") from exc
    except TransportError as exc:
        raise SetupError(f"elasticsearch at {url} unreachable: {exc}") from exc


def setup_elasticsearch(client: Elasticsearch, url: str, data_stream: str) -> list[str]:
    """Install the ES side; the steps done, for the log."""
    info = _es_call("read the cluster info", url, client.info)
    number = str(info.body.get("version", {}).get("number", "0"))
    if int(number.split(".")[0]) < 9:
        raise SetupError(f"elasticsearch at {url} is {number}; version 9 or later is required")
    _es_call("install the ILM policy", url, client.ilm.put_lifecycle,
             name=assets.ILM_POLICY, policy=assets.ilm_policy())  # fmt: skip
    _es_call("install the settings component template", url,
             client.cluster.put_component_template,
             name=assets.SETTINGS_COMPONENT, template=assets.settings_component())  # fmt: skip
    _es_call("install the mappings component template", url,
             client.cluster.put_component_template,
             name=assets.MAPPINGS_COMPONENT, template={"mappings": assets.mappings()})  # fmt: skip
    tmpl = assets.index_template()
    _es_call("install the index template", url, client.indices.put_index_template,
             name=assets.INDEX_TEMPLATE, index_patterns=tmpl["index_patterns"],
             data_stream=tmpl["data_stream"], composed_of=tmpl["composed_of"],
             priority=tmpl["priority"], meta=tmpl["_meta"])  # fmt: skip
    try:
        _es_call("create the data stream", url, client.indices.create_data_stream, name=data_stream)
        created = f"data stream {data_stream} created"
    except SetupError as exc:
        if "resource_already_exists_exception" not in str(exc.__cause__):
            raise
        created = f"data stream {data_stream} already there"
    return [f"elasticsearch {number}", "ILM policy", "component templates", "index template",
            created]  # fmt: skip


def setup_kibana(url: str, auth: EsAuth | None = None, timeout_s: float = 30.0) -> int:
    """Import the saved objects (overwrite); the number imported."""
    headers = {"kbn-xsrf": "true", **(auth or EsAuth()).header()}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=timeout_s) as http:
            status = http.get("/api/status")
            if status.status_code in (401, 403):
                raise SetupError(f"kibana at {url}: authentication failed (check the credentials)")
            status.raise_for_status()
            number = str(status.json().get("version", {}).get("number", "0"))
            if int(number.split(".")[0]) < assets.KIBANA_MIN_MAJOR:
                raise SetupError(
                    f"kibana at {url} is {number}; saved objects need {assets.KIBANA_MIN_MAJOR} "
                    "or later (objects import only into the same or a newer version)"
                )
            body = assets.ndjson(assets.kibana_objects()).encode()
            resp = http.post(
                "/api/saved_objects/_import",
                params={"overwrite": "true"},
                files={"file": ("genai-samples.ndjson", body, "application/ndjson")},
            )
            if resp.status_code in (401, 403):
                raise SetupError(f"kibana at {url}: authentication failed (check the credentials)")
            resp.raise_for_status()
            result = resp.json()
    except httpx.HTTPError as exc:
        raise SetupError(f"kibana at {url}: {exc}") from exc
    except ValueError as exc:
        raise SetupError(f"kibana at {url} answered something that is not JSON") from exc
    if not result.get("success"):
        errors = [f"{e.get('type')}/{e.get('id')}: {e.get('error', {}).get('type')}"
                  for e in result.get("errors", [])]  # fmt: skip
        raise SetupError(f"kibana import failed: {', '.join(errors) or result}")
    return int(result.get("successCount", 0))


def run(settings: EsSetupSettings) -> list[str]:
    """Install everything the settings point at; the steps done."""
    from log_pipeline.outputs.elasticsearch import make_client

    client = make_client(settings.es_url, settings.es_auth(), settings.timeout_s)
    try:
        steps = setup_elasticsearch(client, settings.es_url, settings.data_stream)
    finally:
        client.close()
    if settings.kibana_url:
        auth = EsAuth(api_key=settings.kibana_api_key) if settings.kibana_api_key else None
        count = setup_kibana(settings.kibana_url, auth or settings.es_auth(), settings.timeout_s)
        steps.append(f"kibana: {count} saved objects")
    return steps
