"""Every rendered overlay installs on a stock cluster: the restricted Pod Security level, images
that resolve, storage a default class binds, scaling that keeps its protections, sidecars that
never gate serving.

The checks walk every object of every overlay, so an object added later is held to them too.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

import pytest
import yaml

from tests.deploy.conftest import K8S, OVERLAYS, Doc, find, pod_spec

ROOT = K8S.parents[1]
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod"}

# The restricted level's volume types (Pod Security Standards, "Volume Types").
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
# The baseline level's safe sysctls (Pod Security Standards, "Sysctls").
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Pod templates whose pod talks to the Kubernetes API and so mounts a service-account token:
# (kind, name) -> why. None today: no TokenPulse pod reads or writes Kubernetes objects.
API_CLIENTS: dict[tuple[str, str], str] = {}
# Restricted-level exceptions: (kind, name, check) -> why. None: the GPU DaemonSet reads NVML
# through the device nodes the NVIDIA container runtime injects for NVIDIA_VISIBLE_DEVICES=all
# (mode 0666, as dcgm-exporter's basic fields use them), so it needs no privilege, hostPath or
# capability; only DCGM's profiling fields (SYS_ADMIN) would, and the exporter reads none.
EXCEPTIONS: dict[tuple[str, str, str], str] = {}
# The model artifact image TF Serving's pods copy their SavedModel from (the Dockerfile's
# `modelcar` target; README, "Storage").
MODEL_IMAGE = "tokenpulse-model-gen"
# Images that are not TokenPulse's run as their vendor's non-root user.
VENDOR_UIDS = {"elasticsearch": 1000, "kibana": 1000}


def _dockerfile_uid() -> int:
    """The UID the Dockerfile's last `USER` line runs every TokenPulse image as."""
    users = re.findall(r"^USER\s+(\d+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert users, "the Dockerfile names no numeric USER"
    return int(users[-1])


def pod_templates(doc: Doc) -> Iterator[tuple[str, Doc]]:
    """(where, pod spec) for every pod template in an object, custom resources' included."""
    spec = doc.get("spec", {})
    kind = doc["kind"]
    if kind in WORKLOADS:
        yield "template", spec["template"]["spec"] if kind != "Pod" else spec
    elif kind == "CronJob":
        yield "jobTemplate", spec["jobTemplate"]["spec"]["template"]["spec"]
    elif kind == "Elasticsearch":
        for node_set in spec["nodeSets"]:
            yield f"nodeSets[{node_set['name']}]", node_set.get("podTemplate", {}).get("spec", {})
    elif kind in {"Kibana", "ApmServer", "EnterpriseSearch", "Beat", "Agent", "Logstash"}:
        if kind in {"Beat", "Agent"}:
            for mode in ("deployment", "daemonSet", "statefulSet"):
                if mode in spec:
                    yield mode, spec[mode].get("podTemplate", {}).get("spec", {})
        else:
            yield "podTemplate", spec.get("podTemplate", {}).get("spec", {})
    elif kind in {"TFJob", "PyTorchJob", "MPIJob"}:  # Kubeflow's training jobs
        for name, replica in spec.get(f"{kind[:-3].lower()}ReplicaSpecs", {}).items():
            yield f"replicaSpecs[{name}]", replica.get("template", {}).get("spec", {})
    elif kind in {"Prometheus", "Alertmanager", "ThanosRuler", "PrometheusAgent"}:
        # the operator builds the pod from these fields
        yield "spec", spec


def _containers(pod: Doc) -> Iterator[Doc]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key, [])


def _all_pods(rendered: dict[str, list[Doc]]) -> Iterator[tuple[str, Doc, str, Doc]]:
    for overlay in OVERLAYS:
        for doc in rendered[overlay]:
            for where, pod in pod_templates(doc):
                yield overlay, doc, where, pod


def restricted_violations(doc: Doc, pod: Doc) -> list[str]:
    """The restricted level's checks (baseline's included) that `pod` fails, by check name."""
    bad: list[str] = []
    psc = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            bad.append(f"host namespaces: {field}")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if "hostPath" in kinds:
            bad.append(f"hostPath volumes: {volume['name']}")
        if kinds - RESTRICTED_VOLUMES:
            bad.append(f"volume types: {volume['name']} {sorted(kinds)}")
    for sysctl in psc.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            bad.append(f"sysctls: {sysctl['name']}")
    if psc.get("seLinuxOptions", {}).get("type", "") not in SELINUX_TYPES:
        bad.append("selinux: pod type")
    if psc.get("runAsUser") == 0:
        bad.append("running as non-root user: pod runAsUser 0")
    pod_seccomp = psc.get("seccompProfile", {}).get("type")
    if pod_seccomp not in (None, "RuntimeDefault", "Localhost"):
        bad.append(f"seccomp: pod {pod_seccomp}")
    if psc.get("appArmorProfile", {}).get("type") == "Unconfined":
        bad.append("apparmor: pod Unconfined")
    for c in _containers(pod):
        name = c["name"]
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            bad.append(f"privileged containers: {name}")
        caps = sc.get("capabilities", {})
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            bad.append(f"capabilities: {name} adds {caps['add']}")
        if "ALL" not in caps.get("drop", []):
            bad.append(f"capabilities: {name} does not drop ALL")
        for port in c.get("ports", []):
            if port.get("hostPort"):
                bad.append(f"host ports: {name} {port['hostPort']}")
        if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
            bad.append(f"apparmor: {name} Unconfined")
        if sc.get("seLinuxOptions", {}).get("type", "") not in SELINUX_TYPES:
            bad.append(f"selinux: {name} type")
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"/proc mount type: {name}")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"privilege escalation: {name}")
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            bad.append(f"running as non-root: {name}")
        if sc.get("runAsUser") == 0:
            bad.append(f"running as non-root user: {name} runAsUser 0")
        seccomp = sc.get("seccompProfile", {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"seccomp: {name} {seccomp}")
    return bad


def _excepted(doc: Doc, violations: list[str]) -> list[str]:
    key = (doc["kind"], doc["metadata"]["name"])
    return [v for v in violations if (*key, v.split(":")[0]) not in EXCEPTIONS]


def test_every_pod_template_passes_the_restricted_level(rendered: dict[str, list[Doc]]) -> None:
    found = []
    for overlay, doc, where, pod in _all_pods(rendered):
        for violation in _excepted(doc, restricted_violations(doc, pod)):
            found.append(f"{overlay}: {doc['kind']}/{doc['metadata']['name']} {where}: {violation}")
    assert not found, "\n".join(found)


def test_each_exception_names_its_reason_and_is_still_needed(
    rendered: dict[str, list[Doc]],
) -> None:
    for (kind, name, check), reason in EXCEPTIONS.items():
        assert len(reason.split()) >= 5, (kind, name, check)
        hits = [
            v
            for _, doc, _, pod in _all_pods(rendered)
            if (doc["kind"], doc["metadata"]["name"]) == (kind, name)
            for v in restricted_violations(doc, pod)
            if v.split(":")[0] == check
        ]
        assert hits, f"exception {kind}/{name} {check} excuses nothing: remove it"


def test_the_checks_catch_a_root_pod() -> None:
    """The checker is not vacuous: a pod with the usual mistakes fails each of them."""
    pod = {
        "hostNetwork": True,
        "volumes": [{"name": "dev", "hostPath": {"path": "/dev"}}],
        "containers": [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            }
        ],
    }
    checks = {v.split(":")[0] for v in restricted_violations({"kind": "Pod"}, pod)}
    assert checks == {
        "host namespaces", "hostPath volumes", "volume types", "privileged containers",
        "capabilities", "host ports", "privilege escalation", "running as non-root", "seccomp",
    }  # fmt: skip


def test_the_namespace_enforces_the_restricted_level(rendered: dict[str, list[Doc]]) -> None:
    for overlay in OVERLAYS:
        labels = find(rendered[overlay], "Namespace", "tokenpulse")["metadata"]["labels"]
        for mode in ("enforce", "audit", "warn"):
            assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted", (overlay, mode)


def _image(c: Doc) -> str:
    return c.get("image", "")


def test_tokenpulse_images_run_as_the_dockerfile_user(rendered: dict[str, list[Doc]]) -> None:
    uid = _dockerfile_uid()
    for overlay, doc, where, pod in _all_pods(rendered):
        psc = pod.get("securityContext", {})
        for c in _containers(pod):
            run_as = c.get("securityContext", {}).get("runAsUser", psc.get("runAsUser"))
            ident = (overlay, doc["kind"], doc["metadata"]["name"], where, c["name"])
            if "/tokenpulse-" in _image(c) or "/serving:" in _image(c):
                assert run_as == uid, ident
            else:
                assert run_as == VENDOR_UIDS[c["name"]], ident


def test_root_filesystems_are_read_only_with_a_writable_tmp(
    rendered: dict[str, list[Doc]],
) -> None:
    for overlay, doc, where, pod in _all_pods(rendered):
        if doc["kind"] in {"Prometheus", "Alertmanager"}:
            continue
        empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
        for c in _containers(pod):
            ident = (overlay, doc["kind"], doc["metadata"]["name"], where, c["name"])
            assert c.get("securityContext", {}).get("readOnlyRootFilesystem") is True, ident
            if "/tokenpulse-" in _image(c) or "/serving:" in _image(c):
                tmp = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
                assert tmp and tmp[0]["name"] in empty_dirs, ident


def test_no_service_account_token_unless_the_pod_talks_to_the_api(
    rendered: dict[str, list[Doc]],
) -> None:
    for overlay, doc, where, pod in _all_pods(rendered):
        if doc["kind"] in {"Prometheus", "Alertmanager"}:
            continue
        key = (doc["kind"], doc["metadata"]["name"])
        wanted = key in API_CLIENTS
        assert pod.get("automountServiceAccountToken") is wanted, (overlay, key, where)


# --- images -----------------------------------------------------------------------------------


def _package_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _images(doc: Doc) -> Iterator[str]:
    """Every `image` anywhere in an object (pod templates, custom resources' image fields)."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    yield value
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def split_image(ref: str) -> tuple[str, str, str]:
    """(registry host, repository, tag) of an image reference; '' where it has none."""
    name, _, digest = ref.partition("@")
    first, _, rest = name.partition("/")
    host = first if rest and ("." in first or ":" in first or first == "localhost") else ""
    path = rest if host else name
    repo, _, tag = path.rpartition(":") if ":" in path else (path, "", "")
    return host, repo, tag or digest


def test_every_image_names_a_registry_and_a_tag_never_latest(
    rendered: dict[str, list[Doc]],
) -> None:
    seen = 0
    for overlay in OVERLAYS:
        for doc in rendered[overlay]:
            for ref in _images(doc):
                seen += 1
                host, repo, tag = split_image(ref)
                ident = (overlay, doc["kind"], doc["metadata"]["name"], ref)
                assert host, f"no registry: {ident}"
                assert tag and tag != "latest", f"no tag or :latest: {ident}"
    assert seen >= 7


def is_model_image(ref: str) -> bool:
    """A model artifact image (the Dockerfile's `modelcar` target): tagged with the model
    version it carries, not the package's (tests/deploy/test_models.py)."""
    return split_image(ref)[1].endswith(f"/{MODEL_IMAGE}")


def test_tokenpulse_images_carry_the_package_version(rendered: dict[str, list[Doc]]) -> None:
    version = _package_version()
    for overlay in OVERLAYS:
        refs = {
            r
            for d in rendered[overlay]
            for r in _images(d)
            if "/tokenpulse-" in r and not is_model_image(r)
        }
        assert len(refs) >= 4, overlay
        for ref in refs:
            assert split_image(ref)[2] == version, (overlay, ref)


def test_one_images_block_per_overlay_names_every_image(rendered: dict[str, list[Doc]]) -> None:
    """Each overlay's `images:` sets registry and tag for every image the base names, each
    tag a string (kustomize refuses a number), and pins nothing the overlay does not run."""
    for overlay in OVERLAYS:
        k = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
        names = {entry["name"] for entry in k["images"]}
        for entry in k["images"]:
            assert isinstance(entry["newTag"], str), (overlay, entry)
            assert split_image(f"{entry['newName']}:{entry['newTag']}")[0], (overlay, entry)
        assert {"tokenpulse-gateway", "tokenpulse-exporter", "tensorflow/serving",
                MODEL_IMAGE} <= names  # fmt: skip
        used = {f"{split_image(r)[0]}/{split_image(r)[1]}" for d in rendered[overlay]
                for r in _images(d)}  # fmt: skip
        stale = [e["name"] for e in k["images"] if e["newName"] not in used]
        assert not stale, f"{overlay}: images entries no object uses: {stale}"


def test_split_image() -> None:
    assert split_image("tokenpulse-gateway:latest") == ("", "tokenpulse-gateway", "latest")
    assert split_image("ghcr.io/a/b:1.0") == ("ghcr.io", "a/b", "1.0")
    assert split_image("localhost:5000/b") == ("localhost:5000", "b", "")
    assert split_image("tensorflow/serving:2.21.0") == ("", "tensorflow/serving", "2.21.0")


# --- scaling ----------------------------------------------------------------------------------


def _hpas(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
    return {
        (d["spec"]["scaleTargetRef"]["kind"], d["spec"]["scaleTargetRef"]["name"]): d
        for d in docs
        if d["kind"] == "HorizontalPodAutoscaler"
    }


def test_no_replicas_on_a_workload_an_hpa_owns(rendered: dict[str, list[Doc]]) -> None:
    for overlay in OVERLAYS:
        hpas = _hpas(rendered[overlay])
        assert hpas, overlay
        for kind, name in hpas:
            assert "replicas" not in find(rendered[overlay], kind, name)["spec"], (overlay, name)


def _selected(pdb: Doc, doc: Doc) -> bool:
    if doc["kind"] not in {"Deployment", "StatefulSet"}:
        return False
    labels = doc["spec"]["template"]["metadata"].get("labels", {})
    return pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_disruption_budgets_fit_the_replicas_and_evict_unhealthy_pods(
    rendered: dict[str, list[Doc]],
) -> None:
    for overlay in OVERLAYS:
        docs = rendered[overlay]
        hpas = _hpas(docs)
        pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
        assert len(pdbs) >= 2, overlay
        for pdb in pdbs:
            ident = (overlay, pdb["metadata"]["name"])
            assert pdb["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow", ident
            (target,) = [d for d in docs if _selected(pdb, d)]
            hpa = hpas.get((target["kind"], target["metadata"]["name"]))
            floor = hpa["spec"]["minReplicas"] if hpa else target["spec"].get("replicas", 1)
            if "minAvailable" in pdb["spec"]:
                assert pdb["spec"]["minAvailable"] < floor, ident
            else:
                assert 0 < pdb["spec"]["maxUnavailable"] < floor + 1, ident


@pytest.mark.parametrize("name", ["gateway", "tfserving"])
def test_gateway_and_tf_serving_spread_over_hosts_and_zones(
    rendered: dict[str, list[Doc]], name: str
) -> None:
    for overlay in OVERLAYS:
        deploy = find(rendered[overlay], "Deployment", name)
        spread = pod_spec(deploy).get("topologySpreadConstraints", [])
        keys = {s["topologyKey"] for s in spread}
        assert keys >= {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, overlay
        labels = deploy["spec"]["template"]["metadata"]["labels"]
        for s in spread:
            assert s["labelSelector"]["matchLabels"].items() <= labels.items(), overlay


# --- sidecars and first install ---------------------------------------------------------------


def test_a_sidecar_never_gates_serving(rendered: dict[str, list[Doc]]) -> None:
    """Only TF Serving's own container decides whether its pod is Ready: a sidecar is a native
    sidecar (an init container that keeps running) or has no readiness probe."""
    for overlay in OVERLAYS:
        pod = pod_spec(find(rendered[overlay], "Deployment", "tfserving"))
        names = [c["name"] for c in pod["containers"]]
        assert names == ["tfserving"], overlay
        assert "readinessProbe" in pod["containers"][0], overlay
        for c in pod.get("initContainers", []):
            if c.get("restartPolicy") == "Always":
                assert "readinessProbe" not in c, (overlay, c["name"])


def test_every_overlay_is_checked_here() -> None:
    """A new overlay joins OVERLAYS, and so every check above."""
    folders = {p.name for p in (K8S / "overlays").iterdir() if p.is_dir()}
    assert folders == set(OVERLAYS), folders


# --- TF Serving's threads ---------------------------------------------------------------------


def test_tf_serving_threads_follow_its_cpu_limit(rendered: dict[str, list[Doc]]) -> None:
    """TensorFlow sizes its pools from the node's cores; the pod's limit must set them."""
    for overlay in OVERLAYS:
        tfs = [
            c
            for c in pod_spec(find(rendered[overlay], "Deployment", "tfserving"))["containers"]
            if c["name"] == "tfserving"
        ][0]
        env = {e["name"]: e for e in tfs.get("env", [])}
        for flag in ("intra", "inter"):
            prefix = f"--tensorflow_{flag}_op_parallelism="
            (arg,) = [a for a in tfs["args"] if a.startswith(prefix)]
            var = re.fullmatch(r"--\w+=\$\((\w+)\)", arg)
            assert var, (overlay, arg)
            ref = env[var.group(1)]["valueFrom"]["resourceFieldRef"]
            assert (ref["resource"], ref.get("containerName"), str(ref["divisor"])) == (
                "limits.cpu", "tfserving", "1",
            ), overlay  # fmt: skip


# --- routing ----------------------------------------------------------------------------------


def _seconds(duration: str) -> float:
    """A Gateway API duration ("5m", "310s", "1h30m", "500ms") in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_an_http_route_beside_the_ingress_covers_the_longest_stream(
    rendered: dict[str, list[Doc]],
) -> None:
    from serving.gateway.settings import GatewaySettings

    longest = GatewaySettings.model_fields["max_request_timeout_s"].default
    for overlay in OVERLAYS:
        docs = rendered[overlay]
        find(docs, "Ingress", "gateway")
        route = find(docs, "HTTPRoute", "gateway")
        service = find(docs, "Service", "gateway")
        ports = {p["port"] for p in service["spec"]["ports"]}
        for rule in route["spec"]["rules"]:
            for ref in rule["backendRefs"]:
                assert (ref["name"], ref["port"] in ports) == ("gateway", True), overlay
            request = _seconds(rule["timeouts"]["request"])
            backend = _seconds(rule["timeouts"]["backendRequest"])
            assert longest < backend <= request, (overlay, rule["timeouts"])


def test_durations() -> None:
    assert _seconds("5m10s") == 310 and _seconds("500ms") == 0.5


# --- a shared Prometheus ----------------------------------------------------------------------


def test_alerts_carry_their_namespace_without_scoping_other_teams(
    rendered: dict[str, list[Doc]],
) -> None:
    """The AlertmanagerConfig's namespace matcher needs `namespace` on TokenPulse's alerts: our
    own rules set it, so the shared Prometheus needs no enforcedNamespaceLabel (which would
    rewrite every other team's rule results to their PrometheusRule's namespace)."""
    values = yaml.safe_load((K8S / "kube-prometheus-stack" / "values.yaml").read_text())
    assert "enforcedNamespaceLabel" not in values["prometheus"]["prometheusSpec"]
    for overlay in OVERLAYS:
        rules = [d for d in rendered[overlay] if d["kind"] == "PrometheusRule"]
        alerts = [
            (d["metadata"]["namespace"], r)
            for d in rules
            for g in d["spec"]["groups"]
            for r in g["rules"]
            if "alert" in r
        ]
        assert len(alerts) > 10, overlay
        for namespace, rule in alerts:
            assert rule["labels"].get("namespace") == namespace, (overlay, rule["alert"])


# --- storage ----------------------------------------------------------------------------------


def _claims(doc: Doc) -> Iterator[tuple[str, Doc]]:
    """(where, claim spec) of every volume claim an object asks for: PersistentVolumeClaims,
    StatefulSets' and ECK node sets' claim templates, and generic ephemeral volumes."""
    spec = doc.get("spec", {})
    if doc["kind"] == "PersistentVolumeClaim":
        yield "claim", spec
    for template in spec.get("volumeClaimTemplates", []):
        yield f"volumeClaimTemplates[{template['metadata']['name']}]", template["spec"]
    for node_set in spec.get("nodeSets", []):
        for template in node_set.get("volumeClaimTemplates", []):
            yield f"nodeSets[{node_set['name']}]", template["spec"]
    for where, pod in pod_templates(doc):
        for volume in pod.get("volumes", []):
            if "ephemeral" in volume:
                yield f"{where} ephemeral {volume['name']}", volume["ephemeral"][
                    "volumeClaimTemplate"]["spec"]  # fmt: skip


# access modes a stock cluster's default class (EBS, Persistent Disk, Azure Disk) cannot give
SHARED_MODES = {"ReadWriteMany", "ReadOnlyMany"}
# a StorageClass name: a lowercase RFC 1123 subdomain (what the API server accepts)
CLASS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def claim_violations(docs: list[Doc]) -> list[str]:
    """Claims a cluster would leave Pending: a shared access mode without a class that names
    where it comes from (the default class never gives one; the models-rwx component's
    placeholder is no class name, so it fails here and at the API server until it is set)."""
    bad = []
    for doc in docs:
        for where, claim in _claims(doc):
            modes = set(claim.get("accessModes", []))
            name = claim.get("storageClassName")
            if modes & SHARED_MODES and not (name and CLASS_NAME.fullmatch(name)):
                bad.append(f"{doc['kind']}/{doc['metadata']['name']} {where}: "
                           f"{sorted(modes)} without a storage class name ({name!r})")  # fmt: skip
    return bad


def test_every_claim_binds_on_a_default_storage_class(rendered: dict[str, list[Doc]]) -> None:
    """The default classes of EKS, GKE and AKS give ReadWriteOnce volumes only: a default
    overlay asks for nothing else and names no class (the cluster's default binds). Shared
    ReadWriteMany storage is the opt-in models-rwx component, which names its class
    (tests/deploy/test_models.py renders it)."""
    seen = 0
    for overlay in OVERLAYS:
        assert not claim_violations(rendered[overlay]), overlay
        for doc in rendered[overlay]:
            for where, claim in _claims(doc):
                seen += 1
                ident = (overlay, doc["kind"], doc["metadata"]["name"], where)
                assert claim.get("accessModes") == ["ReadWriteOnce"], ident
                assert "storageClassName" not in claim, ident
    assert seen >= 2


def test_the_claim_check_catches_a_shared_volume() -> None:
    pvc = {"kind": "PersistentVolumeClaim", "metadata": {"name": "x"},
           "spec": {"accessModes": ["ReadWriteMany"]}}  # fmt: skip
    assert [c["accessModes"] for _, c in _claims(pvc)] == [["ReadWriteMany"]]
    deploy = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {
        "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteMany"]}}}}]}}}}  # fmt: skip
    assert [c["accessModes"] for _, c in _claims(deploy)] == [["ReadWriteMany"]]
    assert len(claim_violations([pvc, deploy])) == 2
    pvc["spec"]["storageClassName"] = "SET-AN-RWX-STORAGE-CLASS"
    assert "'SET-AN-RWX-STORAGE-CLASS'" in claim_violations([pvc])[0]
    pvc["spec"]["storageClassName"] = "efs-sc"
    assert claim_violations([pvc]) == []


# --- streams drain ----------------------------------------------------------------------------


def _env(c: Doc) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def _pre_stop_s(c: Doc) -> float:
    """Seconds a container's preStop hook holds it before SIGTERM (a `sleep` action)."""
    hook = c.get("lifecycle", {}).get("preStop")
    if hook is None:
        return 0.0
    assert set(hook) == {"sleep"}, (c["name"], hook)  # only hooks whose length is known
    return float(hook["sleep"]["seconds"])


def _drain_s(c: Doc) -> float:
    """The drain bound a container is configured with (its `*_DRAIN_TIMEOUT_S` settings)."""
    return sum(float(v) for k, v in _env(c).items() if k.endswith("_DRAIN_TIMEOUT_S"))


def stop_bound_s(pod: Doc) -> float:
    """Seconds a pod may need to stop: its app containers stop together (preStop, then their
    drain after SIGTERM), then its native sidecars, which Kubernetes stops only after them."""
    main = [_pre_stop_s(c) + _drain_s(c) for c in pod["containers"]]
    sidecars = [
        _pre_stop_s(c) + _drain_s(c)
        for c in pod.get("initContainers", [])
        if c.get("restartPolicy") == "Always"
    ]
    return max(main) + max(sidecars, default=0.0)


def test_grace_periods_cover_every_drain(rendered: dict[str, list[Doc]]) -> None:
    """The kubelet SIGKILLs a pod when its grace period ends: it must cover the preStop hooks,
    the drain bounds and the sidecars that stop after the app."""
    for overlay, doc, where, pod in _all_pods(rendered):
        if doc["kind"] in {"Prometheus", "Alertmanager", "Elasticsearch", "Kibana"}:
            continue
        grace = pod.get("terminationGracePeriodSeconds", 30)
        ident = (overlay, doc["kind"], doc["metadata"]["name"], where)
        assert grace >= stop_bound_s(pod), (ident, grace, stop_bound_s(pod))


def test_the_gateway_leaves_the_endpoints_then_drains_its_streams(
    rendered: dict[str, list[Doc]],
) -> None:
    """A preStop pause lets every kube-proxy and ingress drop the pod before SIGTERM; the
    gateway's drain then finishes the streams in flight, up to the longest request."""
    from serving.gateway.settings import GatewaySettings

    longest = GatewaySettings.model_fields["max_request_timeout_s"].default
    for overlay in OVERLAYS:
        deploy = find(rendered[overlay], "Deployment", "gateway")
        gateway = [c for c in pod_spec(deploy)["containers"] if c["name"] == "gateway"][0]
        assert _pre_stop_s(gateway) >= 5, overlay
        assert float(_env(gateway)["TOKENPULSE_GATEWAY_DRAIN_TIMEOUT_S"]) >= longest, overlay
        pod = pod_spec(deploy)
        assert pod["terminationGracePeriodSeconds"] >= stop_bound_s(pod) > longest, overlay


def test_tf_serving_keeps_serving_until_the_gateway_calls_end(
    rendered: dict[str, list[Doc]],
) -> None:
    """TF Serving exits at once on SIGTERM (it installs no handler): its preStop keeps it
    serving after it left the endpoints, for as long as a call that started before may run."""
    from serving.gateway.settings import GatewaySettings

    longest = GatewaySettings.model_fields["max_request_timeout_s"].default
    for overlay in OVERLAYS:
        pod = pod_spec(find(rendered[overlay], "Deployment", "tfserving"))
        (tfs,) = [c for c in pod["containers"] if c["name"] == "tfserving"]
        assert _pre_stop_s(tfs) >= longest + 5, overlay
        assert pod["terminationGracePeriodSeconds"] >= stop_bound_s(pod), overlay


def test_the_stop_bound() -> None:
    pod = {
        "terminationGracePeriodSeconds": 30,
        "initContainers": [{"name": "s", "restartPolicy": "Always",
                            "env": [{"name": "X_DRAIN_TIMEOUT_S", "value": "20"}]}],
        "containers": [{"name": "a", "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                        "env": [{"name": "A_DRAIN_TIMEOUT_S", "value": "60"}]}],
    }  # fmt: skip
    assert stop_bound_s(pod) == 85


# --- readiness is the pod's own -----------------------------------------------------------------


def test_no_probe_follows_another_tier(rendered: dict[str, list[Doc]]) -> None:
    """Every probe asks the container itself (its own port, no other host), so a TF Serving
    blip never takes the gateways out of their Service; the upstream's state is in metrics."""
    kinds = ("startupProbe", "readinessProbe", "livenessProbe")
    for overlay, doc, _where, pod in _all_pods(rendered):
        for c in _containers(pod):
            own = {p.get("name") for p in c.get("ports", [])} | {
                p["containerPort"] for p in c.get("ports", [])
            }
            for kind in kinds:
                probe = c.get(kind)
                if probe is None:
                    continue
                ident = (overlay, doc["metadata"]["name"], c["name"], kind)
                action = probe.get("httpGet") or probe.get("tcpSocket") or probe.get("grpc")
                assert action is not None, f"exec probes may call anything: {ident}"
                assert "host" not in action and action["port"] in own, ident
    for overlay in OVERLAYS:
        gateway = pod_spec(find(rendered[overlay], "Deployment", "gateway"))["containers"][0]
        assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz", overlay


# --- the fleet's upstream concurrency -----------------------------------------------------------


def _batching(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s*\{\s*value:\s*(\d+)\s*\}", text, re.M)}


def tf_serving_holds(docs: list[Doc]) -> int:
    """Requests the TF Serving replicas a drain leaves (the PDB's minAvailable) hold without a
    queue-full 503: per replica, the batches running and the batches queued, each of at most
    max_batch_size requests (the rendered batching_parameters.txt)."""
    config = find(docs, "ConfigMap", "tfserving-config")["data"]["batching_parameters.txt"]
    b = _batching(config)
    per_replica = b["max_batch_size"] * (b["num_batch_threads"] + b["max_enqueued_batches"])
    return find(docs, "PodDisruptionBudget", "tfserving")["spec"]["minAvailable"] * per_replica


def test_the_fleets_upstream_concurrency_fits_tf_serving(rendered: dict[str, list[Doc]]) -> None:
    """However far the HPA scales the gateway, its upstream slots together fit in what TF
    Serving holds, so the gateways' typed shedding (429/503 with Retry-After, the breaker) acts
    before TF Serving's own untyped queue-full 503."""
    from serving.gateway.settings import GatewaySettings

    default = GatewaySettings.model_fields["max_concurrency"].default
    for overlay in OVERLAYS:
        docs = rendered[overlay]
        hpa = find(docs, "HorizontalPodAutoscaler", "gateway")
        gateway = pod_spec(find(docs, "Deployment", "gateway"))["containers"][0]
        per_replica = int(_env(gateway).get("TOKENPULSE_GATEWAY_MAX_CONCURRENCY", default))
        assert hpa["spec"]["maxReplicas"] * per_replica <= tf_serving_holds(docs), overlay


def test_the_gateway_scales_on_its_own_saturation(rendered: dict[str, list[Doc]]) -> None:
    """Not on upstream-bound requests (which grow when TF Serving slows, and every replica
    added brings more upstream slots): on the gateway's own saturation, (slots in use + queued)
    / (max_concurrency + max_queue), with a target below the ratio of all slots busy and none
    queued, so replicas come before requests wait."""
    from serving.gateway.settings import GatewaySettings

    fields = GatewaySettings.model_fields
    for overlay in OVERLAYS:
        docs = rendered[overlay]
        hpa = find(docs, "HorizontalPodAutoscaler", "gateway")
        metrics = hpa["spec"]["metrics"]
        assert [m["pods"]["metric"]["name"] for m in metrics] == [
            "tokenpulse_gateway_saturation_ratio"
        ], overlay
        target = metrics[0]["pods"]["target"]["averageValue"]
        value = float(target[:-1]) / 1000 if target.endswith("m") else float(target)
        env = _env(pod_spec(find(docs, "Deployment", "gateway"))["containers"][0])
        slots = int(env.get("TOKENPULSE_GATEWAY_MAX_CONCURRENCY",
                            fields["max_concurrency"].default))  # fmt: skip
        queue = int(env.get("TOKENPULSE_GATEWAY_MAX_QUEUE", fields["max_queue"].default))
        assert 0 < value < slots / (slots + queue), (overlay, value)


def test_batching_parameters_parse() -> None:
    text = "# c\nmax_batch_size { value: 32 }\nnum_batch_threads { value: 1 }\n"
    assert _batching(text) == {"max_batch_size": 32, "num_batch_threads": 1}


# --- Elasticsearch and Kibana through ECK, over TLS -------------------------------------------


ECK_FOR_STACK = {9: (3, 0)}  # the stack's major -> the first ECK release that runs it


def test_eck_3_runs_the_stack_versions_and_the_readme_says_so(
    rendered: dict[str, list[Doc]],
) -> None:
    readme = (K8S / "README.md").read_text()
    for overlay in OVERLAYS:
        for doc in rendered[overlay]:
            if doc["kind"] not in {"Elasticsearch", "Kibana"}:
                continue
            major = int(doc["spec"]["version"].split(".")[0])
            eck = ECK_FOR_STACK[major]
            schema = yaml.safe_load(
                (K8S / "schemas" / f"{doc['apiVersion'].replace('/', '_')}_{doc['kind']}.json")
                .read_text()
            )  # fmt: skip
            assert tuple(map(int, schema["x-eck-version"].split("."))) >= eck, doc["kind"]
            assert f"ECK {eck[0]}.{eck[1]} or later" in readme
            assert f"eck-operator --version {eck[0]}." in readme


def test_http_tls_between_the_shipper_kibana_and_elasticsearch(
    rendered: dict[str, list[Doc]],
) -> None:
    """ECK's self-signed HTTP certificates stay on (passwords never cross the pod network in
    clear), every client calls https and verifies against ECK's CA, mounted from its Secret."""
    for overlay in OVERLAYS:
        docs = rendered[overlay]
        for kind in ("Elasticsearch", "Kibana"):
            tls = find(docs, kind, "tokenpulse")["spec"].get("http", {}).get("tls", {})
            assert not tls.get("selfSignedCertificate", {}).get("disabled"), (overlay, kind)
        assert "verify_certs" not in yaml.safe_dump(docs), overlay
        clients = 0
        for doc in docs:
            for _, pod in pod_templates(doc):
                secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", [])
                           if "secret" in v}  # fmt: skip
                for c in _containers(pod):
                    text = " ".join([*map(str, c.get("args", [])), *_env(c).values()])
                    urls = re.findall(r"\w+://tokenpulse-(?:es|kb)-http[^\s\"']*", text)
                    if not urls:
                        continue
                    clients += 1
                    ident = (overlay, doc["metadata"]["name"], c["name"])
                    assert all(u.startswith("https://") for u in urls), (ident, urls)
                    ca = [v for k, v in _env(c).items() if k.endswith("_CA_FILE")]
                    assert ca, ident
                    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                    (mount,) = [p for p in mounts if ca[0].startswith(p + "/")]
                    assert secrets.get(mounts[mount], "").endswith("-http-certs-public") or (
                        mounts[mount] in {v["name"] for v in pod["volumes"] if "emptyDir" in v}
                    ), ident
        assert clients >= 2, overlay  # the shipper and es setup
