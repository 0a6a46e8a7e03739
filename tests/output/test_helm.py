"""The Helm output: lint --strict passes, default values template to exactly the plain objects, the schema holds values to what Slurm allows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.render import build_tree, render_file
from slurmk8s.output.helm import chart_name
from slurmk8s.output.plain import MARKER, write_tree
from slurmk8s.render import render
from slurmk8s.profile.files import read_profile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CHART = ROOT / "charts" / "slurm-dev"
HELM = os.environ.get("SLURMK8S_HELM") or shutil.which("helm")
needs_helm = pytest.mark.skipif(HELM is None, reason="helm not found (install it with tools/install-helm.sh, "
                                                     "or point SLURMK8S_HELM at it)")


def by_ref(objects: list[dict]) -> dict[tuple[str, str], dict]:
    """Objects by (kind, name), hooks aside."""
    return {(o["kind"], o["metadata"]["name"]): o for o in objects if "helm.sh/hook" not in o["metadata"].get("annotations", {})}


def helm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)


def helm_template(chart: Path, *sets: str, namespace: str | None = None) -> list[dict]:
    """`helm template` into namespace (default: the chart's profile namespace, read from its NOTES.txt)."""
    namespace = namespace or _profile_namespace(chart)
    run = helm("template", "slurm", str(chart), "-n", namespace, *[a for s in sets for a in ("--set", s)])
    assert run.returncode == 0, run.stderr
    return [d for d in yaml.safe_load_all(run.stdout) if d is not None]


def _profile_namespace(chart: Path) -> str:
    notes = (chart / "templates" / "NOTES.txt").read_text()
    return notes.split("profile's own namespace (", 1)[1].split(")", 1)[0] if "own namespace (" in notes else "slurm"


def as_plain(objects: list[dict]) -> dict[tuple[str, str], dict]:
    """The plain objects as the chart holds them: no Namespace (the release's), PVCs kept by `helm uninstall`."""
    out = {}
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        if obj["kind"] == "PersistentVolumeClaim":
            annotations = {**obj["metadata"].get("annotations", {}), "helm.sh/resource-policy": "keep"}
            obj = {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def test_values_expose_only_safe_knobs(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    tree = build_tree(bundle, "helm")
    values = yaml.safe_load(tree["values.yaml"])
    # A pool split over topology leaves has one StatefulSet, and one values key, per leaf: <pool>-<leaf>.
    pools = {"-".join(filter(None, (o["metadata"]["labels"]["slurmk8s.io/pool"],
                                    o["metadata"]["labels"].get("slurmk8s.io/topology-domain")))): o
             for o in bundle.objects if o["kind"] == "StatefulSet" and "slurmk8s.io/pool" in o["metadata"]["labels"]}
    assert values["pools"] == {p: {"replicas": o["spec"]["replicas"]} for p, o in pools.items()}
    for pool_sts in pools.values():  # a slurmd's resources are its Slurm node size: never a value
        assert "resources" not in values["workloads"][pool_sts["metadata"]["name"]]
    schema = json.loads(tree["values.schema.json"])
    for pool, o in pools.items():
        replicas = schema["properties"]["pools"]["properties"][pool]["properties"]["replicas"]
        ann = o["metadata"]["annotations"]
        assert (replicas["minimum"], replicas["maximum"]) == (int(ann["slurmk8s.io/min-replicas"]),
                                                              int(ann["slurmk8s.io/max-replicas"]))


def test_chart_version_is_derived_from_the_content(tmp_path: Path) -> None:
    source = (ROOT / "profiles" / "kind-dev.yaml").read_text()
    changed = tmp_path / "p.yaml"
    changed.write_text(source.replace("replicas: 2", "replicas: 3", 1))
    first = yaml.safe_load(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm")["Chart.yaml"])
    again = yaml.safe_load(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm")["Chart.yaml"])
    other = yaml.safe_load(build_tree(render_file(changed), "helm")["Chart.yaml"])
    assert first == again
    assert first["version"].startswith("0.1.0+") and other["version"].startswith("0.1.0+")
    assert first["version"] != other["version"]
    assert first["name"] == "slurm-dev" and first["appVersion"] == "26.05"


def test_example_chart_is_up_to_date() -> None:
    """charts/slurm-dev is `slurmk8s render profiles/kind-dev.yaml -o charts/slurm-dev --format helm`."""
    expected = build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm")
    found = {p.relative_to(EXAMPLE_CHART).as_posix(): p.read_text() for p in EXAMPLE_CHART.rglob("*")
             if p.is_file() and p.name != MARKER}
    assert sorted(found) == sorted(expected), "re-render: slurmk8s render profiles/kind-dev.yaml -o charts/slurm-dev --format helm"
    stale = [name for name in expected if found[name] != expected[name]]
    assert stale == [], f"stale files in charts/slurm-dev: {stale}; re-render it"
    assert chart_name(render_file(ROOT / "profiles" / "kind-dev.yaml")) == EXAMPLE_CHART.name


@needs_helm
def test_helm_lint_strict_and_template_equal_plain_objects(example_profile: Path, tmp_path: Path) -> None:
    bundle = render_file(example_profile)
    write_tree(build_tree(bundle, "helm"), tmp_path)
    lint = helm("lint", "--strict", str(tmp_path))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert by_ref(helm_template(tmp_path, namespace=bundle.namespace)) == as_plain(list(bundle.objects))


@needs_helm
def test_changed_values_equal_the_re_rendered_profile(tmp_path: Path) -> None:
    profile = read_profile(ROOT / "profiles" / "kind-dev.yaml")
    chart = tmp_path / "chart"
    write_tree(build_tree(render(profile), "helm"), chart)
    changed = tmp_path / "p.yaml"
    changed.write_text((ROOT / "profiles" / "kind-dev.yaml").read_text().replace("replicas: 2", "replicas: 4", 1))
    assert by_ref(helm_template(chart, "pools.cpu.replicas=4")) == as_plain(list(render_file(changed).objects))
    image = "registry.example/slurmctld:26.05-custom"
    ctld = by_ref(helm_template(chart, f"workloads.dev-controller.image={image}"))[("StatefulSet", "dev-controller")]
    pod = ctld["spec"]["template"]["spec"]
    assert {c["image"] for c in pod["containers"] + pod["initContainers"]} == {image}


@needs_helm
@pytest.mark.parametrize("setting, error", [
    ("pools.cpu.replicas=5", "at '/pools/cpu/replicas': maximum: got 5, want 4"),
    ("pools.cpu.replicas=-1", "at '/pools/cpu/replicas': minimum: got -1, want 0"),
    ("workloads.dev-cpu.resources.slurmd.limits.cpu=4", "at '/workloads/dev-cpu': additional properties 'resources' not allowed"),
    ("slurm.config.x=y", "additional properties 'slurm' not allowed"),
], ids=["replicas-above-max", "replicas-below-min", "slurmd-resources", "unknown-key"])
def test_values_schema_rejects_what_would_desynchronise_slurm(tmp_path: Path, setting: str, error: str) -> None:
    write_tree(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm"), tmp_path)
    run = helm("template", "slurm", str(tmp_path), "--set", setting)
    assert run.returncode != 0
    assert error in run.stderr


@needs_helm
def test_objects_go_to_the_release_namespace(tmp_path: Path) -> None:
    """`helm install -n other`: every object, RBAC subject and DNS search domain in `other`; no Namespace object."""
    bundle = render_file(ROOT / "profiles" / "gpu-ib.yaml")
    write_tree(build_tree(bundle, "helm"), tmp_path)
    objects = helm_template(tmp_path, namespace="other")
    assert objects and not [o for o in objects if o["kind"] == "Namespace"]
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            # cluster-scoped: no namespace; the name carries the release's (two releases never share one)
            assert "namespace" not in obj["metadata"] and obj["metadata"]["name"] == "slurmk8s-other-research-nodes"
        elif obj["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            assert "namespace" not in obj["metadata"]
            assert obj["metadata"]["name"] == "slurmk8s-other-research-busy-label-only"
            if obj["kind"] == "ValidatingAdmissionPolicyBinding":
                assert obj["spec"]["policyName"] == obj["metadata"]["name"]
        else:
            assert obj["metadata"]["namespace"] == "other", obj["metadata"]["name"]
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == "other"
    assert {o["kind"] for o in objects} >= {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                                            "ValidatingAdmissionPolicyBinding"}
    text = json.dumps(objects)
    assert f".{bundle.namespace}." not in text and f'"{bundle.namespace}"' not in text
    controller = next(o for o in objects if (o["kind"], o["metadata"]["name"]) == ("StatefulSet", "research-controller"))
    assert "research-slurmd.other.svc.cluster.local" in controller["spec"]["template"]["spec"]["dnsConfig"]["searches"]


@needs_helm
def test_helm_uninstall_keeps_claims(tmp_path: Path) -> None:
    bundle = render_file(ROOT / "profiles" / "gpu-ib.yaml")
    write_tree(build_tree(bundle, "helm"), tmp_path)
    claims = [o for o in helm_template(tmp_path) if o["kind"] == "PersistentVolumeClaim"]
    assert claims, "gpu-ib has a shared statesave claim"
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in claims)
    # claims from volumeClaimTemplates belong to the StatefulSet controller, which retains them
    for sts in bundle.of_kind("StatefulSet"):
        if sts["spec"].get("volumeClaimTemplates"):
            assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"


@needs_helm
def test_the_chart_works_as_a_subchart(tmp_path: Path) -> None:
    """An umbrella chart passes `global` to its subcharts; the values schema must allow it."""
    umbrella = tmp_path / "platform"
    write_tree(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm"), umbrella / "charts" / "slurm-dev")
    (umbrella / "Chart.yaml").write_text("apiVersion: v2\nname: platform\nversion: 1.0.0\n"
                                         "dependencies:\n- name: slurm-dev\n  version: '>=0.1.0-0'\n")
    (umbrella / "values.yaml").write_text("global: {imageRegistry: registry.example}\nslurm-dev:\n  pools: {cpu: {replicas: 3}}\n")
    objects = helm_template(umbrella, namespace="slurm")
    sts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "StatefulSet"}
    assert sts["dev-cpu"]["spec"]["replicas"] == 3


@needs_helm
def test_notes_say_how_to_log_in(tmp_path: Path) -> None:
    write_tree(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm"), tmp_path)
    run = helm("install", "slurm", str(tmp_path), "-n", "lab", "--dry-run=client")
    assert run.returncode == 0, run.stderr
    notes = run.stdout.split("NOTES:", 1)[1]
    assert "kubectl -n lab port-forward service/dev-login 2222:22" in notes
    assert "ssh -p 2222 root@127.0.0.1" in notes
    assert "slurmk8s secrets create PROFILE" in notes


@needs_helm
def test_the_account_job_is_a_post_install_hook(tmp_path: Path) -> None:
    """A Helm release gets its accounts from a Job run after install and upgrade, in the release's namespace."""
    bundle = render_file(ROOT / "profiles" / "gpu-ib.yaml")
    write_tree(build_tree(bundle, "helm"), tmp_path)
    jobs = [o for o in helm_template(tmp_path, namespace="other") if o["kind"] == "Job" and "-accounts-" in o["metadata"]["name"]]
    accounts = [h for h in bundle.hooks if h["kind"] == "Job" and "-accounts-" in h["metadata"]["name"]]
    assert len(jobs) == 1 and jobs[0]["metadata"]["name"] == accounts[0]["metadata"]["name"]
    annotations = jobs[0]["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "post-install,post-upgrade"
    assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation"
    assert jobs[0]["metadata"]["namespace"] == "other"
    pod = jobs[0]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][:2] == ["python3", "-c"]
    assert "research-slurmd.other.svc.cluster.local" in pod["dnsConfig"]["searches"]


def test_an_elastic_pool_keeps_its_live_replicas_and_a_fixed_pool_takes_the_value(tmp_path: Path) -> None:
    """`helm upgrade` must not put a power-saved or KEDA-scaled pool back to the values' count (issue 24 item 8)."""
    gpu = build_tree(render_file(ROOT / "profiles" / "gpu-ib.yaml"), "helm")
    h100 = gpu["templates/statefulset-research-h100.yaml"]  # minReplicas 0, maxReplicas 64
    assert ('replicas: {{ include "slurmk8s.replicas" (dict "ctx" . "name" "research-h100" "min" 0 "max" 64 '
            '"value" (index .Values.pools "h100" "replicas")) }}\n') in h100
    helpers = gpu["templates/_slurmk8s.tpl"]
    assert 'lookup "apps/v1" "StatefulSet" .ctx.Release.Namespace .name' in helpers
    assert "max .min (min .max (int $live.spec.replicas))" in helpers  # held to the range, as `up` does
    fixed = build_tree(render_file(ROOT / "profiles" / "legacy-munge.yaml"), "helm")  # min = max: not elastic
    assert 'replicas: {{ toJson (index .Values.pools "cpu" "replicas") }}\n' in fixed["templates/statefulset-legacy-cpu.yaml"]


def test_the_chart_says_its_names_come_from_the_profile() -> None:
    tree = build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm")
    assert "named after the cluster of the slurmk8s profile (dev-*), not after the" in tree["templates/NOTES.txt"]
    assert tree["templates/NOTES.txt"].startswith('{{- include "slurmk8s.one-release" . }}\n')
    readme = tree["README.md"]
    assert "## Names come from the profile, not from the release" in readme
    assert "`helm upgrade` keeps each one's live replicas" in readme
    assert 'lookup "v1" "ConfigMap" .Release.Namespace "dev-slurm-config"' in tree["templates/_slurmk8s.tpl"]


@needs_helm
@pytest.mark.parametrize("release", ["dev", "anything"])
def test_without_a_cluster_any_release_name_renders_the_profiles_objects(tmp_path: Path, release: str) -> None:
    """No cluster, no live object: the guard passes and replicas are the values' (helm template, lint, CI)."""
    write_tree(build_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), "helm"), tmp_path)
    run = helm("template", release, str(tmp_path), "-n", "slurm", "--set", "pools.cpu.replicas=3")
    assert run.returncode == 0, run.stderr
    sts = {o["metadata"]["name"]: o for o in yaml.safe_load_all(run.stdout) if o and o["kind"] == "StatefulSet"}
    assert sts["dev-cpu"]["spec"]["replicas"] == 3
