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


def test_tokenpulse_images_carry_the_package_version(rendered: dict[str, list[Doc]]) -> None:
    version = _package_version()
    for overlay in OVERLAYS:
        refs = {r for d in rendered[overlay] for r in _images(d) if "/tokenpulse-" in r}
        assert len(refs) >= 4, overlay
        for ref in refs:
            assert split_image(ref)[2] == version, (overlay, ref)


def test_one_images_block_per_overlay_names_every_image() -> None:
    """Each overlay's `images:` sets registry and tag for every image the base names."""
    for overlay in OVERLAYS:
        k = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
        names = {entry["name"] for entry in k["images"]}
        for entry in k["images"]:
            assert split_image(f"{entry['newName']}:{entry['newTag']}")[0], (overlay, entry)
        assert {"tokenpulse-gateway", "tokenpulse-exporter", "tensorflow/serving"} <= names


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


def test_tf_serving_waits_for_its_model_in_an_init_container(
    rendered: dict[str, list[Doc]],
) -> None:
    for overlay in OVERLAYS:
        pod = pod_spec(find(rendered[overlay], "Deployment", "tfserving"))
        waits = [c for c in pod.get("initContainers", []) if c.get("restartPolicy") != "Always"]
        assert [c["name"] for c in waits] == ["wait-for-model"], overlay
        assert "/models" in {m["mountPath"] for m in waits[0]["volumeMounts"]}, overlay


def test_the_model_build_job_is_named_for_its_version(rendered: dict[str, list[Doc]]) -> None:
    for overlay in OVERLAYS:
        jobs = [
            d
            for d in rendered[overlay]
            if d["kind"] == "Job" and d["metadata"]["name"].startswith("model-build")
        ]
        assert len(jobs) == 1, overlay
        (build,) = jobs[0]["spec"]["template"]["spec"]["containers"]
        version = build["args"][build["args"].index("--version") + 1]
        assert "--keep-existing" in build["args"], overlay  # a rerun with the version there: 0
        tag = split_image(build["image"])[2]
        assert jobs[0]["metadata"]["name"] == f"model-build-{tag}-v{version}".replace(".", "-")


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
