"""An Elasticsearch stand-in for tests and benchmarks: NOT Elasticsearch, it speaks the subset the
9.x client and the log pipeline need, on 127.0.0.1 only.

- every 2xx carries `X-Elastic-Product: Elasticsearch` (the client refuses a response without it);
- `_bulk` (PUT/POST, NDJSON) with per-item results: 201, 409 for an existing `create` id, 400 for
  `index` on a data stream or a missing `@timestamp`; `require_data_stream=true` answers 404 for a
  target that is not (and would not become) a data stream; bodies over `max_content_length`
  (ES's `http.max_content_length`, 100 MiB) get a bare 413 as from ES's HTTP layer;
- data streams as ES keeps them: backing indices `.ds-<stream>-<yyyy.mm.dd>-<generation>`, made
  from the matching index template (its composed mappings kept per backing index), a write to the
  newest one only, `_id` unique per backing index only (so a `create` resent after a rollover
  stores a second copy, as in ES), `POST <stream>/_rollover`, `GET /_data_stream/<name>` listing
  the indices, `GET <target>/_mapping`, `POST <target>/_refresh`, searches across every backing
  index; a write to a name no data-stream template matches auto-creates a plain index;
- `PUT` of ILM policies, component/index templates, ingest pipelines and data streams;
- `_search`/`_count` with the query DSL subset of `devtools.standins.es_query` (text fields
  analyzed as the samples mapping analyzes them; sort, search_after, the 10,000 result window,
  collapse, terms and composite aggregations), point in time (`POST <target>/_pit`, `pit` in a
  `/_search` body, `DELETE /_pit`);
- a Kibana subset (`/api/status`, `/api/saved_objects/_import`) so `es setup` can be tested;
- native users and roles (`PUT /_security/role/<name>`, `PUT /_security/user/<name>`): a user
  signs in with its password next to `basic_auth` (the superuser), and its roles' privileges are
  checked per request for the calls above (a coarse map of API to privilege; `_bulk` needs
  `create_doc` or a privilege that implies it on its target; a call outside the map needs the
  `all` cluster privilege);
- faults on demand: whole-request 429/503, per-item 429 and 400, refused connections, slow
  responses, 2xx without the product header, and garbage bodies.

The production path is a real Elasticsearch and Kibana (docker-compose.yml).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import fnmatch
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from devtools.standins import es_query
from devtools.standins.background import BackgroundServer, BackgroundStandin
from devtools.standins.es_query import Hit, QueryError, matches

PRODUCT = {"X-Elastic-Product": "Elasticsearch"}


@dataclass
class Faults:
    """What to break; tests set these between requests (plain attributes, read per request)."""

    request_status: int = 0  # 429 or 503: every request answers this while > 0 ...
    request_status_count: int = -1  # ... for this many requests (-1: until cleared)
    item_429: dict[str, int] = field(default_factory=dict)  # id -> times to answer 429
    item_400: set[str] = field(default_factory=set)  # ids always rejected with a mapping error
    delay_s: float = 0.0
    # `_bulk` requests that are applied and then answered with this status (a proxy's 504 after
    # Elasticsearch stored the documents: the client cannot know)
    applied_then_status: int = 0
    applied_then_status_count: int = 0
    no_product_header: bool = False
    garbage: bool = False  # 200 with a body that is not JSON


class EsStandin(BackgroundStandin):
    """The stand-in server on a background thread: `start()`, `.url`, `.faults`, `stop()`."""

    def __init__(
        self,
        port: int = 0,
        version: str = "9.1.0",
        api_key: str = "",
        basic_auth: str = "",
        stream_patterns: tuple[str, ...] = (),
        max_content_length: int = 100 << 20,
    ) -> None:
        self.version = version
        self.max_content_length = max_content_length  # ES's http.max_content_length
        self.api_key = api_key
        self.basic_auth = basic_auth  # "user:password" that Elasticsearch and Kibana accept
        self.faults = Faults()
        self.streams: dict[str, list[str]] = {}  # data stream -> backing indices, oldest first
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}  # concrete index -> docs by _id
        self.index_mappings: dict[str, dict[str, Any]] = {}  # concrete index -> its mappings
        self.resources: dict[str, dict[str, Any]] = {}  # "<kind>/<name>" -> body
        for pattern in stream_patterns:  # as if `es setup` had installed a data-stream template
            self.resources[f"_index_template/standin-{pattern}"] = {
                "index_patterns": [pattern], "data_stream": {}, "priority": 1}  # fmt: skip
        self.saved_objects: dict[str, dict[str, Any]] = {}  # "<type>/<id>" -> object
        self.roles: dict[str, dict[str, Any]] = {}  # role name -> body of PUT _security/role
        self.users: dict[str, dict[str, Any]] = {}  # user name -> body of PUT _security/user
        self.pits: dict[str, list[Hit]] = {}  # point in time id -> the documents it saw
        self.requests = 0
        self.bulk_requests = 0
        self.item_attempts: collections.Counter[str] = collections.Counter()  # _id -> bulk items
        self.created = 0  # documents created (a resend that answers 409 is not counted)
        self.too_large = 0  # requests refused with 413 (over max_content_length)
        self._lock = threading.Lock()
        self._server = BackgroundServer(self._app, port, name="es-standin")

    def _app(self) -> web.Application:
        size = max(256 << 20, self.max_content_length + 1)  # the 413 is ES's, not aiohttp's
        app = web.Application(client_max_size=size, middlewares=[self._middleware])
        r = app.router
        r.add_get("/", self._info)
        r.add_route("*", "/_bulk", self._bulk)
        r.add_route("*", "/{target}/_bulk", self._bulk)
        r.add_put("/_ilm/policy/{name}", self._put_resource)
        r.add_put("/_component_template/{name}", self._put_resource)
        r.add_put("/_index_template/{name}", self._put_resource)
        r.add_put("/_ingest/pipeline/{name}", self._put_resource)
        r.add_put("/_data_stream/{name}", self._put_stream)
        r.add_get("/_data_stream/{name}", self._get_stream)
        r.add_post("/{target}/_rollover", self._rollover)
        r.add_route("*", "/{target}/_refresh", self._refresh)
        r.add_get("/{target}/_mapping", self._get_mapping)
        r.add_route("HEAD", "/{target}", self._exists)
        r.add_route("*", "/{target}/_search", self._search)
        r.add_route("*", "/{target}/_count", self._count)
        r.add_route("*", "/_search", self._search)
        r.add_post("/{target}/_pit", self._open_pit)
        r.add_delete("/_pit", self._close_pit)
        r.add_put("/_security/role/{name}", self._put_role)
        r.add_post("/_security/role/{name}", self._put_role)
        r.add_put("/_security/user/{name}", self._put_user)
        r.add_post("/_security/user/{name}", self._put_user)
        r.add_get("/api/status", self._kibana_status)
        r.add_post("/api/saved_objects/_import", self._kibana_import)
        return app

    def refuse(self) -> None:
        """Stop listening and close open connections: clients see refused connections."""
        self._server.stop()

    def accept(self) -> None:
        """Listen again on the same port (the documents stay)."""
        self._server.start()

    # views for tests ----------------------------------------------------------------------------
    def docs(self, stream: str) -> dict[str, dict[str, Any]]:
        """A copy of the documents of one data stream (or plain index), by id; an id stored in
        several backing indices appears once here: `copies` counts them."""
        with self._lock:
            out: dict[str, dict[str, Any]] = {}
            for index in self._concrete(stream):
                out.update(self.indices[index])
            return out

    def copies(self, stream: str) -> collections.Counter[str]:
        """How many backing indices of a stream hold each `_id` (above 1: stored twice)."""
        with self._lock:
            return collections.Counter(
                doc_id for index in self._concrete(stream) for doc_id in self.indices[index]
            )

    def rollover(self, stream: str) -> str:
        """Roll a data stream over now (as ILM's daily rollover would); the new write index."""
        with self._lock:
            return self._new_backing(stream)

    def _concrete(self, name: str) -> list[str]:
        """The concrete indices behind a name: a stream's backing indices, or the index itself."""
        if name in self.streams:
            return list(self.streams[name])
        return [name] if name in self.indices else []

    def _template_for(self, name: str) -> dict[str, Any] | None:
        """The highest-priority index template matching a name (as ES picks one)."""
        found = [
            t for k, t in self.resources.items()
            if k.startswith("_index_template/")
            and any(fnmatch.fnmatch(name, p) for p in t.get("index_patterns", []))
        ]  # fmt: skip
        return max(found, key=lambda t: int(t.get("priority", 0)), default=None)

    def _template_mappings(self, template: dict[str, Any]) -> dict[str, Any]:
        """A template's mappings: its composed component templates' in order, then its own."""
        merged: dict[str, Any] = {}
        for name in template.get("composed_of", []):
            component = self.resources.get(f"_component_template/{name}", {})
            merged.update(component.get("template", {}).get("mappings", {}))
        merged.update(template.get("template", {}).get("mappings", {}))
        return merged

    def _new_backing(self, stream: str) -> str:
        """Add a backing index (the next generation, named by today) and make it the write index;
        called with the lock held, for a stream whose template exists."""
        backing = self.streams.setdefault(stream, [])
        name = f".ds-{stream}-{datetime.now(UTC):%Y.%m.%d}-{len(backing) + 1:06d}"
        backing.append(name)
        self.indices[name] = {}
        template = self._template_for(stream)
        self.index_mappings[name] = self._template_mappings(template) if template else {}
        return name

    # plumbing -----------------------------------------------------------------------------------
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests += 1
        if (request.content_length or 0) > self.max_content_length:
            self.too_large += 1  # ES's HTTP layer answers before anything else: no body, no header
            return web.Response(status=413)
        f = self.faults
        if f.delay_s:
            await asyncio.sleep(f.delay_s)
        if self.api_key and not request.path.startswith("/api/"):
            if request.headers.get("Authorization") != f"ApiKey {self.api_key}":
                return _error(401, "security_exception", "unable to authenticate with api key")
        if self.basic_auth:
            wanted = "Basic " + base64.b64encode(self.basic_auth.encode()).decode()
            given = request.headers.get("Authorization", "")
            if given != wanted:
                user = self._native_user(given)
                if user is None:
                    return _error(401, "security_exception", "unable to authenticate user")
                denied = self._denied(user, request)
                if denied:
                    return _error(403, "security_exception", denied)
        accept = request.headers.get("Accept", "")
        major = int(self.version.split(".")[0])
        if "compatible-with=" in accept and int(accept.rsplit("=", 1)[1]) > major:
            return _error(
                400, "media_type_header_exception", f"Accept version must be {major} or {major - 1}"
            )
        if (
            f.request_status
            and f.request_status_count != 0
            and not request.path.startswith("/api/")
        ):
            if f.request_status_count > 0:
                f.request_status_count -= 1
            kind = "es_rejected_execution_exception" if f.request_status == 429 else "unavailable"
            return _error(f.request_status, kind, "injected by the stand-in")
        if f.garbage:
            return web.Response(status=200, body=b"<html>proxy error</html>", headers=PRODUCT)
        response = await handler(request)
        if not f.no_product_header and 200 <= response.status < 300:
            response.headers.update(PRODUCT)
        return response

    async def _info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"name": "es-standin", "cluster_name": "standin", "tagline": "You Know, for Search",
             "version": {"number": self.version, "build_flavor": "default"}}
        )  # fmt: skip

    async def _put_resource(self, request: web.Request) -> web.Response:
        kind = request.path.strip("/").split("/")[0]
        body = await request.json()
        with self._lock:
            self.resources[f"{kind}/{request.match_info['name']}"] = body
        return web.json_response({"acknowledged": True})

    async def _put_role(self, request: web.Request) -> web.Response:
        name, body = request.match_info["name"], await request.json()
        with self._lock:
            created = name not in self.roles
            self.roles[name] = body
        return web.json_response({"role": {"created": created}})

    async def _put_user(self, request: web.Request) -> web.Response:
        name, body = request.match_info["name"], await request.json()
        with self._lock:
            created = name not in self.users
            self.users[name] = {**self.users.get(name, {}), **body}
        return web.json_response({"created": created})

    def _native_user(self, authorization: str) -> str | None:
        """The native user a Basic header signs in (None: none, or a wrong password)."""
        if not authorization.startswith("Basic "):
            return None
        try:
            name, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        except ValueError:
            return None
        user = self.users.get(name)
        return name if user is not None and user.get("password") == password else None

    def _denied(self, user: str, request: web.Request) -> str:
        """Why a native user may not make this call ("" when its roles allow it)."""
        roles = [self.roles.get(r, {}) for r in self.users[user].get("roles", [])]
        cluster = {p for r in roles for p in r.get("cluster", [])}
        if "all" in cluster:
            return ""
        path, parts = request.path, request.path.strip("/").split("/")
        target = request.match_info.get("target", "")
        if path == "/":
            wanted, kind = "monitor", "cluster"
        elif path.endswith("/_bulk") and target:
            wanted, kind = "create_doc", "index"
        elif parts[-1] in ("_search", "_count", "_pit") or request.method == "HEAD":
            wanted, kind = "read", "index"
        elif parts[-1] == "_refresh":
            wanted, kind = "maintenance", "index"
        elif parts[-1] == "_mapping" or (parts[0] == "_data_stream" and request.method == "GET"):
            wanted, kind = "view_index_metadata", "index"
            target = target or request.match_info.get("name", "")
        else:
            return f"action [{request.method} {path}] is unauthorized for user [{user}]"
        if kind == "cluster":
            ok = bool({wanted, "all", "manage"} & cluster)
        else:
            implied = {wanted, "all"} | _IMPLIED_BY.get(wanted, set())
            ok = any(
                implied & set(grant.get("privileges", []))
                and all(
                    any(fnmatch.fnmatch(t, n) or t == n for n in grant.get("names", []))
                    for t in (target or "*").split(",")
                )
                for r in roles
                for grant in r.get("indices", [])
            )
        return "" if ok else f"action [{request.method} {path}] is unauthorized for user [{user}]"

    async def _put_stream(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        with self._lock:
            if name in self.streams or name in self.indices:
                return _error(400, "resource_already_exists_exception", f"[{name}] exists")
            template = self._template_for(name)
            if template is None or "data_stream" not in template:
                reason = f"no matching index template found for data stream [{name}]"
                return _error(400, "illegal_argument_exception", reason)
            self._new_backing(name)
        return web.json_response({"acknowledged": True})

    async def _get_stream(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        with self._lock:
            if name not in self.streams:
                return _error(404, "index_not_found_exception", f"no such index [{name}]")
            template = self._template_for(name) or {}
            template_name = next(
                (k.split("/", 1)[1] for k, t in self.resources.items()
                 if k.startswith("_index_template/") and t is template), ""
            )  # fmt: skip
            indices = [{"index_name": i, "index_uuid": i} for i in self.streams[name]]
        ilm = ""
        for component in template.get("composed_of", []):
            body = self.resources.get(f"_component_template/{component}", {})
            ilm = body.get("template", {}).get("settings", {}).get("index.lifecycle.name", ilm)
        return web.json_response({"data_streams": [{
            "name": name, "timestamp_field": {"name": "@timestamp"}, "indices": indices,
            "generation": len(indices), "status": "GREEN", "template": template_name,
            "ilm_policy": ilm, "hidden": False, "system": False,
        }]})  # fmt: skip

    async def _rollover(self, request: web.Request) -> web.Response:
        name = request.match_info["target"]
        with self._lock:
            if name not in self.streams:
                return _error(404, "index_not_found_exception", f"no such index [{name}]")
            old = self.streams[name][-1]
            new = self._new_backing(name)
        return web.json_response(
            {"acknowledged": True, "shards_acknowledged": True, "old_index": old,
             "new_index": new, "rolled_over": True, "dry_run": False, "lazy": False,
             "conditions": {}}
        )  # fmt: skip

    async def _refresh(self, request: web.Request) -> web.Response:
        with self._lock:
            n = len(self._resolve(request.match_info["target"]))
        return web.json_response({"_shards": {"total": n, "successful": n, "failed": 0}})

    async def _get_mapping(self, request: web.Request) -> web.Response:
        with self._lock:
            found = self._resolve(request.match_info["target"])
            body = {i: {"mappings": self.index_mappings.get(i, {})} for i in found}
        if not found and "*" not in request.match_info["target"]:
            return _error(404, "index_not_found_exception", "no such index")
        return web.json_response(body)

    async def _exists(self, request: web.Request) -> web.Response:
        with self._lock:
            found = bool(self._resolve(request.match_info["target"]))
        return web.Response(status=200 if found else 404)

    def _resolve(self, target: str) -> list[str]:
        """Concrete indices a comma-separated target with wildcards names (streams expanded)."""
        out: list[str] = []
        for part in target.split(","):
            for name in [*self.streams, *self.indices]:
                if fnmatch.fnmatch(name, part) and not (name.startswith(".") and "*" in part):
                    out += [i for i in self._concrete(name) if i not in out]
        return out

    def _is_stream(self, name: str) -> bool:
        """A data stream now, or one a write would create (a data-stream template matches)."""
        if name in self.streams:
            return True
        if name in self.indices:
            return False
        template = self._template_for(name)
        return template is not None and "data_stream" in template

    async def _bulk(self, request: web.Request) -> web.Response:
        if request.method not in ("PUT", "POST"):
            return _error(405, "method_not_allowed", request.method)
        self.bulk_requests += 1
        lines = [ln for ln in (await request.read()).split(b"\n") if ln.strip()]
        default = request.match_info.get("target", "")
        require_stream = request.query.get("require_data_stream", "false") == "true"
        items, errors = [], False
        with self._lock:
            for i in range(0, len(lines) - 1, 2):
                action = json.loads(lines[i])
                op, meta = next(iter(action.items()))
                item = self._bulk_item(op, meta, lines[i + 1], default, require_stream)
                errors = errors or item["status"] >= 300
                items.append({op: item})
        f = self.faults
        if f.applied_then_status and f.applied_then_status_count > 0:
            f.applied_then_status_count -= 1
            return _error(f.applied_then_status, "gateway_timeout", "applied, then lost (injected)")
        return web.json_response({"took": 1, "errors": errors, "items": items})

    def _bulk_item(
        self, op: str, meta: dict[str, Any], source: bytes, default: str, require_stream: bool
    ) -> dict[str, Any]:
        index = meta.get("_index", default)
        doc_id = meta.get("_id", "")
        self.item_attempts[doc_id] += 1
        is_stream = self._is_stream(index)
        if require_stream and not is_stream:
            reason = (f"no such index [{index}] and [require_data_stream] request flag is [true] "
                      f"and [{index}] is not a data stream")  # fmt: skip
            return _item_error({"_index": index, "_id": doc_id}, 404, "index_not_found_exception",
                               reason)  # fmt: skip
        if is_stream and index not in self.streams:
            self._new_backing(index)  # auto-created from its template, as ES does on a create
        write_index = self.streams[index][-1] if is_stream else index
        base = {"_index": write_index, "_id": doc_id}
        f = self.faults
        if f.item_429.get(doc_id, 0) > 0:
            f.item_429[doc_id] -= 1
            return _item_error(base, 429, "es_rejected_execution_exception", "rejected (injected)")
        if doc_id in f.item_400:
            return _item_error(base, 400, "document_parsing_exception", "bad field (injected)")
        if op != "create" and is_stream:
            return _item_error(base, 400, "illegal_argument_exception", _ONLY_CREATE)
        try:
            doc = json.loads(source)
        except ValueError:
            return _item_error(base, 400, "document_parsing_exception", "failed to parse")
        if "@timestamp" not in doc:
            return _item_error(base, 400, "illegal_argument_exception", _NO_TIMESTAMP)
        if not doc_id:  # ES draws one (the pipeline always sends its own)
            doc_id = base["_id"] = f"auto-{self.created}"
        target = self.indices.setdefault(write_index, {})  # `_id` is unique per concrete index
        if doc_id in target:
            reason = f"[{doc_id}]: version conflict, document already exists"
            return _item_error(base, 409, "version_conflict_engine_exception", reason)
        target[doc_id] = doc
        self.created += 1
        return {**base, "_version": 1, "result": "created", "status": 201}

    def _matching(
        self, target: str, query: dict[str, Any]
    ) -> list[tuple[str, str, dict[str, Any]]]:
        ids = query.get("ids", {}).get("values") if "ids" in query else None
        with self._lock:
            found = [
                (name, doc_id, doc)
                for name in self._resolve(target)
                for doc_id, doc in self.indices[name].items()
                if (doc_id in ids if ids is not None else matches(doc, query))
            ]
        return found

    async def _search(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        query = body.get("query", {"match_all": {}})
        target = request.match_info.get("target")
        pit = body.get("pit")
        try:
            if pit is not None:
                if target is not None:
                    raise QueryError("illegal_argument_exception",
                                     "[indices] cannot be used with point in time")  # fmt: skip
                if pit.get("id") not in self.pits:
                    return _error(404, "search_context_missing_exception",
                                  "No search context found for id")  # fmt: skip
                hits = [h for h in self.pits[pit["id"]] if es_query.matches(h[2], query)]
            else:
                if target is None:
                    target = "*"
                hits = self._matching(target, query)
            response = es_query.search(hits, body)
        except QueryError as exc:
            return _error(400, exc.kind, str(exc))
        if pit is not None:
            response["pit_id"] = pit["id"]
        return web.json_response(response)

    async def _count(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        try:
            hits = self._matching(request.match_info["target"],
                                  body.get("query", {"match_all": {}}))  # fmt: skip
        except QueryError as exc:
            return _error(400, exc.kind, str(exc))
        return web.json_response({"count": len(hits)})

    async def _open_pit(self, request: web.Request) -> web.Response:
        if "keep_alive" not in request.query:
            return _error(400, "action_request_validation_exception", "[keep_alive] is missing")
        snapshot = self._matching(request.match_info["target"], {"match_all": {}})
        pit_id = base64.b64encode(f"pit-{len(self.pits)}-{time.time_ns()}".encode()).decode()
        self.pits[pit_id] = snapshot  # what it sees never changes, as a point in time
        return web.json_response(
            {"id": pit_id, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}}
        )

    async def _close_pit(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        found = self.pits.pop(body.get("id", ""), None) is not None
        return web.json_response(
            {"succeeded": True, "num_freed": int(found)}, status=200 if found else 404
        )

    async def _kibana_status(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"version": {"number": self.version}, "status": {"overall": {"level": "available"}}}
        )

    async def _kibana_import(self, request: web.Request) -> web.Response:
        if request.headers.get("kbn-xsrf") is None:
            return web.json_response({"statusCode": 400, "message": "missing kbn-xsrf"}, status=400)
        reader = await request.multipart()
        part = await reader.next()
        if part is None or getattr(part, "name", "") != "file":
            return web.json_response({"statusCode": 400, "message": "no file part"}, status=400)
        data = await part.read()  # type: ignore[union-attr]
        results = []
        for line in data.decode().splitlines():
            if line.strip():
                obj = json.loads(line)
                self.saved_objects[f"{obj['type']}/{obj['id']}"] = obj
                results.append({"type": obj["type"], "id": obj["id"]})
        return web.json_response(
            {"success": True, "successCount": len(results), "successResults": results}
        )


_ONLY_CREATE = "only write ops with an op_type of create are allowed in data streams"
_NO_TIMESTAMP = "data stream timestamp field [@timestamp] is missing"


def _item_error(base: dict[str, Any], status: int, kind: str, reason: str) -> dict[str, Any]:
    return {**base, "status": status, "error": {"type": kind, "reason": reason}}


# index privileges that imply another (a coarse subset of Elasticsearch's)
_IMPLIED_BY: dict[str, set[str]] = {
    "create_doc": {"create", "index", "write"},
    "read": set(),
    "maintenance": {"manage"},
    "view_index_metadata": {"manage"},
}


def _error(status: int, kind: str, reason: str) -> web.Response:
    return web.json_response(
        {"error": {"type": kind, "reason": reason}, "status": status}, status=status
    )


def main() -> None:
    """Run the stand-in in the foreground: `python -m devtools.standins.es PORT [PATTERN...]`, with
    a data-stream template for each PATTERN (default `genai-samples-*`, as after `es setup`)."""
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    patterns = tuple(sys.argv[2:]) or ("genai-samples-*",)
    standin = EsStandin(port=port, stream_patterns=patterns).start()
    sys.stderr.write(f"es stand-in on {standin.url}\n")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
