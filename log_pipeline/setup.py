"""`tokenpulse es setup`: install the ILM policy, templates, data stream and Kibana saved objects.

Every step is a PUT or an overwrite import, so running it again changes nothing. Then it checks
what exists: the name must be a data stream made from this index template (a plain index under
that name, auto-created by a shipper before setup, is reported, never taken for the stream), and
its write index must carry the current mappings and settings. Templates apply only to backing
indices created after them, so when the write index was made from older ones (its mappings'
`_meta.tokenpulse_assets` fingerprint differs) the stream is rolled over once. Authentication
failures and version mismatches end with one clear line, never a traceback.

With `shipper_user`/`reader_user` it also creates (or updates: a PUT again) two roles and their
users, so that nothing but this setup job signs in as the `elastic` superuser:
- `tokenpulse_shipper` on the data stream only: `create_doc` (bulk `create`, never overwrite or
  delete), `read` (the id lookup before a resend searches the stream's backing indices) and
  `maintenance` (the refresh before that lookup). No cluster privilege; no `auto_configure`: the
  stream exists before the shipper writes (`require_data_stream`) and its mappings are
  `dynamic: false`, so a write never creates an index or changes a mapping.
- `tokenpulse_samples_reader` on `genai-samples-*`: `read` and `view_index_metadata` (searches
  and the field list), and the `monitor` cluster privilege (Grafana reads the version with it).
"""

from __future__ import annotations

import copy
import hashlib
import json
import ssl
from typing import Any

import httpx
from elastic_transport import TransportError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    BadRequestError,
    Elasticsearch,
    NotFoundError,
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


def _components(replicas: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The mappings and settings component bodies, and their fingerprint (kept in the mappings'
    `_meta`, so each backing index tells which assets it was made from)."""
    settings = copy.deepcopy(assets.settings_component())
    settings["settings"]["index.number_of_replicas"] = replicas
    mappings = copy.deepcopy(assets.mappings())
    fingerprint = hashlib.sha256(
        json.dumps([mappings, settings], sort_keys=True).encode()
    ).hexdigest()[:16]
    mappings["_meta"] = {**mappings.get("_meta", {}), "tokenpulse_assets": fingerprint}
    return {"mappings": mappings}, settings, fingerprint


def _verify_stream(client: Elasticsearch, url: str, data_stream: str, fingerprint: str) -> str:
    """Check that the data stream exists as one, from this template; roll it over when its write
    index predates the current assets. The step's line for the log."""
    try:
        info = client.indices.get_data_stream(name=data_stream)
    except NotFoundError as exc:
        try:
            plain = bool(client.indices.exists(index=data_stream))
        except (ApiError, TransportError):
            plain = False
        if plain:
            raise SetupError(
                f"elasticsearch at {url}: {data_stream} is a plain index, not a data stream "
                "(a shipper wrote before `es setup`); reindex it into a data stream of another "
                "name or delete it, then run setup again"
            ) from exc
        raise SetupError(f"elasticsearch at {url}: data stream {data_stream} missing") from exc
    except (ApiError, TransportError) as exc:
        raise SetupError(f"elasticsearch at {url}: cannot read data stream: {exc}") from exc
    (stream,) = info.body.get("data_streams", [{}])[:1] or [{}]
    template = stream.get("template", "")
    if template != assets.INDEX_TEMPLATE:
        raise SetupError(
            f"elasticsearch at {url}: data stream {data_stream} comes from index template "
            f"{template!r}, not {assets.INDEX_TEMPLATE!r} (one of higher priority matches)"
        )
    write_index = stream["indices"][-1]["index_name"]
    got = _es_call("read the write index's mappings", url, client.indices.get_mapping,
                   index=write_index)  # fmt: skip
    meta = got.body.get(write_index, {}).get("mappings", {}).get("_meta", {})
    if meta.get("tokenpulse_assets") == fingerprint:
        return f"data stream {data_stream} verified (write index {write_index})"
    rolled = _es_call("roll the data stream over", url, client.indices.rollover,
                      alias=data_stream)  # fmt: skip
    new = rolled.body.get("new_index", "?")
    log.info("data stream rolled over for new mappings", data_stream=data_stream, old=write_index,
             new=new)  # fmt: skip
    return f"data stream {data_stream} rolled over to {new} (mappings or settings changed)"


def setup_elasticsearch(
    client: Elasticsearch, url: str, data_stream: str, replicas: int = 0
) -> list[str]:
    """Install the ES side and check what exists; the steps done, for the log."""
    info = _es_call("read the cluster info", url, client.info)
    number = str(info.body.get("version", {}).get("number", "0"))
    if int(number.split(".")[0]) < 9:
        raise SetupError(f"elasticsearch at {url} is {number}; version 9 or later is required")
    _es_call("install the ILM policy", url, client.ilm.put_lifecycle,
             name=assets.ILM_POLICY, policy=assets.ilm_policy())  # fmt: skip
    mappings, settings, fingerprint = _components(replicas)
    _es_call("install the settings component template", url,
             client.cluster.put_component_template,
             name=assets.SETTINGS_COMPONENT, template=settings)  # fmt: skip
    _es_call("install the mappings component template", url,
             client.cluster.put_component_template,
             name=assets.MAPPINGS_COMPONENT, template=mappings)  # fmt: skip
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
    verified = _verify_stream(client, url, data_stream, fingerprint)
    return [f"elasticsearch {number}", "ILM policy", "component templates", "index template",
            created, verified]  # fmt: skip


SHIPPER_ROLE = "tokenpulse_shipper"
READER_ROLE = "tokenpulse_samples_reader"


def shipper_role(data_stream: str) -> dict[str, Any]:
    """The shipper's role: create documents in one data stream and look their ids up."""
    grant = {"names": [data_stream], "privileges": ["create_doc", "read", "maintenance"]}
    return {"cluster": [], "indices": [grant]}


def reader_role() -> dict[str, Any]:
    """A read-only role over every samples stream (Grafana's datasource, analysts)."""
    grant = {"names": [assets.PATTERN], "privileges": ["read", "view_index_metadata"]}
    return {"cluster": ["monitor"], "indices": [grant]}


def setup_users(
    client: Elasticsearch, url: str, data_stream: str, users: dict[str, tuple[str, str]]
) -> list[str]:
    """Create or update the roles and the users given as role name -> (user, password); the
    steps done. A PUT again sets the same privileges and password: idempotent."""
    roles = {SHIPPER_ROLE: shipper_role(data_stream), READER_ROLE: reader_role()}
    steps = []
    for role, (user, password) in users.items():
        body = roles[role]
        _es_call(f"create the role {role}", url, client.security.put_role, name=role,
                 cluster=body["cluster"], indices=body["indices"])  # fmt: skip
        _es_call(f"create the user {user}", url, client.security.put_user, username=user,
                 password=password, roles=[role], full_name=f"TokenPulse {role}")  # fmt: skip
        privileges = ", ".join(p for grant in body["indices"] for p in grant["privileges"])
        steps.append(f"user {user} with role {role} ({privileges})")
    return steps


def setup_kibana(url: str, auth: EsAuth | None = None, timeout_s: float = 30.0) -> int:
    """Import the saved objects (overwrite); the number imported."""
    headers = {"kbn-xsrf": "true", **(auth or EsAuth()).header()}
    try:
        ca_file = (auth or EsAuth()).ca_file  # ECK's self-signed CA, when given
        verify = ssl.create_default_context(cafile=ca_file) if ca_file else True
        with httpx.Client(base_url=url, headers=headers, timeout=timeout_s, verify=verify) as http:
            status = http.get("/api/status")
            if status.status_code in (401, 403):
                raise SetupError(f"kibana at {url}: authentication failed (check the credentials)")
            status.raise_for_status()
            number = str(status.json().get("version", {}).get("number", "0"))
            if assets.kibana_version(number) < assets.KIBANA_MIN_VERSION:
                least = ".".join(map(str, assets.KIBANA_MIN_VERSION))
                raise SetupError(
                    f"kibana at {url} is {number}; saved objects need {least} or later "
                    "(objects import only into the same or a newer version)"
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
        steps = setup_elasticsearch(
            client, settings.es_url, settings.data_stream, settings.replicas
        )
        users = {
            role: (user, password.get_secret_value())
            for role, user, password in (
                (SHIPPER_ROLE, settings.shipper_user, settings.shipper_password),
                (READER_ROLE, settings.reader_user, settings.reader_password),
            )
            if user
        }
        steps += setup_users(client, settings.es_url, settings.data_stream, users)
    finally:
        client.close()
    if settings.kibana_url:
        auth = (EsAuth(api_key=settings.kibana_api_key, ca_file=settings.es_ca_file)
                if settings.kibana_api_key else None)  # fmt: skip
        count = setup_kibana(settings.kibana_url, auth or settings.es_auth(), settings.timeout_s)
        steps.append(f"kibana: {count} saved objects")
    return steps
