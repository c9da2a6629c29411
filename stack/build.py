"""`tokenpulse build [--check]`: regenerate every generated file, or check that none drifted.

Each app keeps its own generator (monitoring: rules, Alertmanager, Prometheus and dashboards; the
log pipeline: Elasticsearch/Kibana assets); this gathers them into one list of (path, text). Before
anything is written the dashboards must pass their house lint, and every metric a rule, dashboard
or runbook query selects must be declared by a component (stack.catalogue). `--check` writes
nothing and exits 1 naming each stale, missing or stray file and each problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from log_pipeline import assets
from monitoring import deploy_links, generate
from monitoring.mixin import operator, references
from monitoring.mixin.config import DEFAULT
from monitoring.mixin.dashboards.lint import lint
from monitoring.mixin.links import LinkError
from stack.catalogue import declared_metrics
from tokenpulse import paths

ROOT = paths.ROOT
ASSETS = assets.ASSETS_DIR.relative_to(ROOT)
# deploy/k8s: the monitoring resources, and TF Serving's config files for the ConfigMap generator
# (kustomize reads files under its root only, so they are kept there as drift-checked copies)
K8S = Path("deploy/k8s")
K8S_SERVING_CONFIG = K8S / "components" / "serving-config"
K8S_SERVING_FILES = ("models.container.config", "batching_parameters.txt", "monitoring.config")


def generated_files() -> dict[Path, str]:
    """Every generated file (path relative to the repository root) and its text."""
    files = generate.files(DEFAULT)
    files.update({ASSETS / name: text for name, text in assets.files().items()})
    cluster = operator.files(deploy_links.kubernetes_config())
    files.update({K8S / rel: text for rel, text in cluster.items()})
    for name in K8S_SERVING_FILES:
        files[K8S_SERVING_CONFIG / name] = (paths.SERVING_CONFIG / name).read_text(encoding="utf-8")
    return dict(sorted(files.items()))


def strays(files: Mapping[Path, str], root: Path = ROOT) -> list[Path]:
    """Files in a generated folder, with a generated file's suffix, that nothing generates."""
    kinds = {(rel.parent, rel.suffix) for rel in files}
    found = {
        path.relative_to(root)
        for folder, suffix in kinds
        for path in (root / folder).glob(f"*{suffix}")
        if path.is_file()
    }
    return sorted(found - set(files))


def drift(files: Mapping[Path, str], root: Path = ROOT) -> list[tuple[Path, str]]:
    """(path, "missing" | "stale" | "stray") of every file that differs from the generators."""
    out: list[tuple[Path, str]] = []
    for rel, text in files.items():
        path = root / rel
        if not path.is_file():
            out.append((rel, "missing"))
        elif path.read_text(encoding="utf-8") != text:
            out.append((rel, "stale"))
    out += [(rel, "stray") for rel in strays(files, root)]
    return sorted(out)


def runbooks(root: Path = ROOT) -> dict[Path, str]:
    """The committed runbooks (their PromQL blocks are checked against the catalogue)."""
    folder = root / references.RUNBOOKS
    return {p.relative_to(root): p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))}


def problems(files: Mapping[Path, str], root: Path = ROOT) -> list[str]:
    """Dashboard house-rule breaches, and metrics that no component declares."""
    models = {
        rel.name: json.loads(text)
        for rel, text in files.items()
        if rel.parent == references.DASHBOARDS and rel.suffix == ".json"
    }
    found = lint(models, DEFAULT.links.runbook_url_pattern)
    out = [f"{references.DASHBOARDS}: {line}" for line in found]
    return out + references.undeclared({**files, **runbooks(root)}, declared_metrics())


def write(files: Mapping[Path, str], root: Path = ROOT) -> list[tuple[Path, str]]:
    """Write what drifted and delete strays; (path, what was done) for each."""
    done = []
    for rel, kind in drift(files, root):
        path = root / rel
        if kind == "stray":
            path.unlink()
            done.append((rel, "removed"))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[rel], encoding="utf-8")
            done.append((rel, "wrote"))
    return done


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`tokenpulse build [--check]`."""
    parser.add_argument(
        "target", nargs="?", choices=["monitoring"],
        help="ignored: everything is built (kept so `tokenpulse build monitoring` still works)",
    )  # fmt: skip
    parser.add_argument(
        "--check", action="store_true",
        help="write nothing; exit 1 naming each drifted file and each undeclared metric",
    )  # fmt: skip


def run(check: bool, root: Path = ROOT) -> int:
    """Regenerate (or check) every generated file under `root`; the exit code."""
    try:
        files = generated_files()
    except LinkError as exc:  # a deployment's links file names a malformed or loopback host
        print(f"tokenpulse build: error: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    found = problems(files, root)
    for line in found:
        print(f"tokenpulse build: {line}", file=sys.stderr)  # noqa: T201
    if check:
        drifted = drift(files, root)
        for rel, kind in drifted:
            print(f"tokenpulse build: {kind}: {rel}", file=sys.stderr)  # noqa: T201
        if drifted:
            print("tokenpulse build: run `tokenpulse build` and commit", file=sys.stderr)  # noqa: T201
        return 1 if found or drifted else 0
    if found:
        print("tokenpulse build: nothing written", file=sys.stderr)  # noqa: T201
        return 1
    for rel, what in write(files, root):
        print(f"{what} {rel}")  # noqa: T201
    return 0


def main(args: argparse.Namespace) -> int:
    """Regenerate every generated file, or with --check only compare them."""
    return run(args.check)
