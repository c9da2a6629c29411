"""A small `kustomize build` for exactly the features deploy/k8s uses, so the suite renders offline.

No kustomize is packaged for this machine's registries (Debian, PyPI, npm), so this renders:
`resources` (files and directories), `components`, `namespace`, `labels` (`pairs`,
`includeTemplates`; never selectors), `configMapGenerator` (`files`, `literals`, with kustomize's
content-hash name suffix and the name references to it in pod specs), `patches` (strategic
merge, by the patch's own kind and name) and `images` (`name`, `newName`, `newTag`). Any other
field is an error, so a kustomization that starts to need more fails here instead of rendering
something kustomize would not.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

Doc = dict[str, Any]

FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KNOWN_FIELDS = {
    "apiVersion", "kind", "resources", "components", "namespace", "labels",
    "configMapGenerator", "patches", "images",
}  # fmt: skip
CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "PersistentVolume", "StorageClass", "PriorityClass", "IngressClass", "RuntimeClass",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService",
}  # fmt: skip
# kustomize's legacy output order: these kinds first, in this order, then the rest by kind
ORDER_FIRST = [
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
    "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
    "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
]  # fmt: skip
ORDER_LAST = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
# strategic-merge keys of the lists deploy/k8s patches; any other list is replaced whole
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "volumes": "name", "env": "name",
    "volumeMounts": "mountPath", "imagePullSecrets": "name",
}  # fmt: skip


class KustomizeError(Exception):
    """The kustomization uses something this renderer does not do, or is wrong."""


def _load_docs(path: Path) -> list[Doc]:
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    for doc in docs:
        if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
            raise KustomizeError(f"{path}: not a Kubernetes object")
    return docs


def _kustomization(folder: Path) -> Doc:
    for name in FILE_NAMES:
        if (folder / name).is_file():
            doc = yaml.safe_load((folder / name).read_text(encoding="utf-8")) or {}
            unknown = set(doc) - KNOWN_FIELDS
            if unknown:
                raise KustomizeError(f"{folder / name}: unsupported fields {sorted(unknown)}")
            return dict(doc)
    raise KustomizeError(f"{folder}: no kustomization file")


def _inside(folder: Path, rel: str) -> Path:
    """`rel` under `folder`; a file outside the kustomization root is refused, as kustomize does."""
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise KustomizeError(f"{folder}: {rel} is outside the kustomization root")
    return path


def _go_json(value: Any) -> str:
    """json.Marshal's text: sorted keys, no spaces, <, > and & escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, code)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def name_suffix(config_map: Doc) -> str:
    """kustomize's content hash of a generated ConfigMap (its kind, name and data)."""
    encoded = {"kind": "ConfigMap", "name": config_map["metadata"]["name"]}
    encoded["data"] = config_map.get("data", {})
    digest = hashlib.sha256(_go_json(encoded).encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def _generate(folder: Path, spec: Doc) -> Doc:
    unknown = set(spec) - {"name", "files", "literals"}
    if unknown:
        raise KustomizeError(f"{folder}: configMapGenerator fields {sorted(unknown)}")
    data: dict[str, str] = {}
    for item in spec.get("files", []):
        key, _, rel = item.rpartition("=")
        path = _inside(folder, rel)
        data[key or path.name] = path.read_text(encoding="utf-8")
    for item in spec.get("literals", []):
        key, _, value = item.partition("=")
        data[key] = value
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": spec["name"]},
        "data": data,
    }


def merge(base: Any, patch: Any) -> Any:
    """Strategic merge of `patch` into `base` for the fields deploy/k8s patches."""
    if isinstance(patch, dict) and isinstance(base, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out and key in MERGE_KEYS and isinstance(value, list):
                out[key] = _merge_list(out[key], value, MERGE_KEYS[key])
            elif key in out:
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    return copy.deepcopy(patch)


def _merge_list(base: list[Doc], patch: list[Doc], key: str) -> list[Doc]:
    out = [dict(item) for item in base]
    # as kustomize orders them: items the base lacks first, then the base's items the patch
    # names, each in the patch's order, then the base's others (so a sidecar patch, then a patch
    # of the main container, leaves the main container first)
    new, merged = [], []
    for item in patch:
        at = [i for i, have in enumerate(out) if have.get(key) == item.get(key)]
        if item.get("$patch") == "delete":
            out = [have for i, have in enumerate(out) if i not in at]
        elif at:
            merged.append(merge(out.pop(at[0]), item))
        else:
            new.append(copy.deepcopy(item))
    return new + merged + out


def _key(doc: Doc) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def _pod_specs(doc: Doc) -> Iterator[Doc]:
    spec = doc.get("spec", {})
    if doc["kind"] in WORKLOADS:
        yield spec.get("template", {}).get("spec", {})
    elif doc["kind"] == "CronJob":
        yield spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {})
    elif doc["kind"] == "Pod":
        yield spec


def _rename_config_maps(doc: Doc, names: dict[str, str]) -> None:
    for pod in _pod_specs(doc):
        for volume in pod.get("volumes", []):
            refs = [volume.get("configMap", {})]
            refs += [s.get("configMap", {}) for s in volume.get("projected", {}).get("sources", [])]
            for ref in refs:
                if ref.get("name") in names:
                    ref["name"] = names[ref["name"]]
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef", {})
                if ref.get("name") in names:
                    ref["name"] = names[ref["name"]]
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef", {})
                if ref.get("name") in names:
                    ref["name"] = names[ref["name"]]


def _label(doc: Doc, pairs: dict[str, str], templates: bool) -> None:
    doc["metadata"].setdefault("labels", {}).update(pairs)
    if not templates:
        return
    spec = doc.get("spec", {})
    if doc["kind"] in WORKLOADS:
        spec.setdefault("template", {}).setdefault("metadata", {})
        spec["template"]["metadata"].setdefault("labels", {}).update(pairs)
    if doc["kind"] == "StatefulSet":
        for claim in spec.get("volumeClaimTemplates", []):
            claim.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
    if doc["kind"] == "CronJob":
        job = spec.setdefault("jobTemplate", {})
        job.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
        template = job.setdefault("spec", {}).setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)


def _image_name(ref: str) -> str:
    """An image reference without its tag or digest (a registry's :port stays)."""
    name = ref.partition("@")[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.partition(':')[0]}" if head else last.partition(":")[0]


def _set_images(node: Any, entries: list[Doc]) -> None:
    """kustomize's images transformer: every container's image, wherever its list is."""
    if isinstance(node, list):
        for item in node:
            _set_images(item, entries)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("containers", "initContainers") and isinstance(value, list):
            for c in value:
                if isinstance(c, dict) and isinstance(c.get("image"), str):
                    c["image"] = _new_image(c["image"], entries)
        _set_images(value, entries)


def _new_image(ref: str, entries: list[Doc]) -> str:
    name = _image_name(ref)
    for entry in entries:
        if entry["name"] != name:
            continue
        tag = ref[len(name) :]
        if "newTag" in entry:
            tag = f":{entry['newTag']}"
        return f"{entry.get('newName', name)}{tag}"
    return ref


def _accumulate(folder: Path, *, component: bool, docs: list[Doc], generated: set[int]) -> None:
    """Add `folder`'s resources to `docs` and apply its transformations to all of them."""
    k = _kustomization(folder)
    kind = k.get("kind", "Kustomization")
    if (kind == "Component") != component:
        raise KustomizeError(
            f"{folder}: a {kind} where a {'Component' if component else 'Kustomization'} belongs"
        )
    if component:
        own = docs  # a component transforms what its parent has gathered so far
    else:
        own = []
    for rel in k.get("resources", []):
        path = (folder / rel).resolve()
        if path.is_dir():  # another kustomization: anywhere, as in kustomize
            _accumulate(path, component=False, docs=own, generated=generated)
        else:
            own.extend(_load_docs(_inside(folder, rel)))
    for spec in k.get("configMapGenerator", []):
        cm = _generate(folder, spec)
        generated.add(id(cm))
        own.append(cm)
    for rel in k.get("components", []):
        _accumulate((folder / rel).resolve(), component=True, docs=own, generated=generated)
    seen = set()
    for doc in own:
        ident = (*_key(doc), doc["metadata"].get("namespace", ""))
        if ident in seen:
            raise KustomizeError(f"{folder}: {ident} defined twice")
        seen.add(ident)
    for entry in k.get("patches", []):
        if set(entry) - {"path", "patch"}:
            raise KustomizeError(f"{folder}: patches support `path` or `patch` only: {entry}")
        text = _inside(folder, entry["path"]).read_text() if "path" in entry else entry["patch"]
        for patch in (p for p in yaml.safe_load_all(text) if p):
            targets = [i for i, d in enumerate(own) if _key(d) == _key(patch)]
            if not targets:
                raise KustomizeError(f"{folder}: patch target {_key(patch)} not found")
            for i in targets:
                doc, own[i] = own[i], merge(own[i], patch)
                if id(doc) in generated:  # the patched copy is the generated object now
                    generated.discard(id(doc))
                    generated.add(id(own[i]))
    if "labels" in k:
        for entry in k["labels"]:
            if entry.get("includeSelectors") or set(entry) - {"pairs", "includeTemplates"}:
                raise KustomizeError(f"{folder}: labels support pairs and includeTemplates only")
            for doc in own:
                _label(doc, entry["pairs"], bool(entry.get("includeTemplates")))
    if "namespace" in k:
        for doc in own:
            if doc["kind"] == "Namespace":
                doc["metadata"]["name"] = k["namespace"]
            elif doc["kind"] not in CLUSTER_SCOPED:
                doc["metadata"]["namespace"] = k["namespace"]
    if "images" in k:
        for entry in k["images"]:
            if set(entry) - {"name", "newName", "newTag"}:
                raise KustomizeError(f"{folder}: images support name, newName and newTag only")
        for doc in own:
            _set_images(doc.get("spec"), k["images"])
    if not component:
        _hash_names(own, generated)
        docs.extend(own)


def _order(doc: Doc) -> tuple[int, str, str, str]:
    """kustomize's legacy sort key: kind rank, then group_version_kind, namespace, name."""
    kind = doc["kind"]
    if kind in ORDER_FIRST:
        rank = ORDER_FIRST.index(kind)
    elif kind in ORDER_LAST:
        rank = len(ORDER_FIRST) + 1 + ORDER_LAST.index(kind)
    else:
        rank = len(ORDER_FIRST)
    group, _, version = doc["apiVersion"].rpartition("/")
    meta = doc["metadata"]
    gvk = f"{group or '~G'}_{version}_{kind}"
    return rank, gvk, meta.get("namespace", "~X"), meta["name"]


def build(folder: Path) -> list[Doc]:
    """The objects `kustomize build folder` would print, in kustomize's legacy order."""
    docs: list[Doc] = []
    _accumulate(folder, component=False, docs=docs, generated=set())
    return sorted(docs, key=_order)


def _hash_names(docs: list[Doc], generated: set[int]) -> None:
    """Suffix this level's generated ConfigMaps with their hash; rename references at this level.

    As in kustomize, a reference is renamed only in the resources of the kustomization that
    generated the ConfigMap (and its components), never in an overlay's own resources.
    """
    names: dict[str, str] = {}
    for doc in docs:
        if id(doc) in generated:
            generated.discard(id(doc))
            old = doc["metadata"]["name"]
            doc["metadata"]["name"] = names[old] = f"{old}-{name_suffix(doc)}"
    for doc in docs:
        _rename_config_maps(doc, names)


def dump(docs: list[Doc]) -> str:
    """The objects as one multi-document YAML stream, keys sorted as kustomize prints them."""
    return "---\n".join(yaml.safe_dump(d, sort_keys=True, width=1 << 16) for d in docs)


def main(argv: list[str]) -> int:
    """`python -m devtools.kustomize DIR`: print the rendered objects."""
    if len(argv) != 1:
        print("usage: python -m devtools.kustomize DIR", file=sys.stderr)  # noqa: T201
        return 2
    try:
        sys.stdout.write(dump(build(Path(argv[0]))))
    except KustomizeError as exc:
        print(f"kustomize: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
