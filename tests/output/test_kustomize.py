"""The kustomize output: kustomization.yaml lists every manifest in apply order and `kubectl kustomize` gives back the plain objects."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.render import build_tree, render_file
from crdschema import validate_custom_resource
from slurmk8s.output.kustomize import AFTER_SYNC, BEFORE_SYNC, CLUSTER, KUSTOMIZATION, hook_stage, kept_when_finished
from slurmk8s.output.plain import plain_tree, write_tree

KUBECTL = shutil.which("kubectl")


def test_kustomize_tree_is_plain_tree_plus_a_kustomization_per_stage(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    tree, plain = build_tree(bundle, "kustomize"), plain_tree(bundle)
    stages = {stage: [h for h in bundle.hooks if hook_stage(h) == stage] for stage in (BEFORE_SYNC, AFTER_SYNC)}
    hook_files = {f"{stage}/{h['kind'].lower()}-{h['metadata']['name']}.yaml": h for stage, hs in stages.items() for h in hs}
    kustomizations = [k for k in tree if k.endswith(KUSTOMIZATION)]
    assert {k: v for k, v in tree.items() if k not in kustomizations and k not in hook_files} == plain
    for path, hook in hook_files.items():
        assert yaml.safe_load(tree[path]) == kept_when_finished(hook)
    root = yaml.safe_load(tree[KUSTOMIZATION])
    # the upgrade check first, then the cluster, then the rollout and accounts Jobs
    assert root["resources"] == [s for s in (BEFORE_SYNC, CLUSTER, AFTER_SYNC) if s == CLUSTER or stages[s]]
    cluster = yaml.safe_load(tree[f"{CLUSTER}/{KUSTOMIZATION}"])
    assert [f"manifests/{r}" for r in cluster["resources"]] == plain["manifests/ORDER"].split()
    for stage, hooks in stages.items():
        if hooks:
            listed = yaml.safe_load(tree[f"{stage}/{KUSTOMIZATION}"])["resources"]
            assert listed == [f"{h['kind'].lower()}-{h['metadata']['name']}.yaml" for h in hooks]
    for name in kustomizations:
        kustomization = yaml.safe_load(tree[name])
        assert kustomization["sortOptions"] == {"order": "fifo"}
        assert validate_custom_resource(kustomization) == []


def test_kustomization_schema_is_strict() -> None:
    bad = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
           "resources": ["a.yaml"], "resource": ["typo.yaml"], "sortOptions": {"order": "random"}}
    errors = validate_custom_resource(bad)
    assert any("'resource' was unexpected" in e for e in errors), errors
    assert any(e.startswith("Kustomization/?: /sortOptions:") for e in errors), errors


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not on PATH (needed for `kubectl kustomize`)")
def test_kubectl_kustomize_reproduces_the_plain_objects_in_order(example_profile: Path, tmp_path: Path) -> None:
    bundle = render_file(example_profile)
    write_tree(build_tree(bundle, "kustomize"), tmp_path)
    run = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    built = [d for d in yaml.safe_load_all(run.stdout) if d is not None]
    hooks = [kept_when_finished(h) for h in bundle.hooks]
    before = [h for h in hooks if hook_stage(h) == BEFORE_SYNC]
    assert built == before + list(bundle.objects) + [h for h in hooks if hook_stage(h) == AFTER_SYNC]


def test_the_jobs_stay_when_finished_so_flux_never_reruns_the_same_input(example_profile: Path) -> None:
    """A TTL-removed Job is one Flux (or the next `kubectl apply -k`) creates and runs again (issue 24 item 10)."""
    bundle = render_file(example_profile)
    tree = build_tree(bundle, "kustomize")
    for hook in bundle.hooks:
        if hook["kind"] == "Job":
            assert "ttlSecondsAfterFinished" in hook["spec"]  # Helm and Argo CD hooks keep theirs
            job = yaml.safe_load(tree[f"{hook_stage(hook)}/job-{hook['metadata']['name']}.yaml"])
            assert "ttlSecondsAfterFinished" not in job["spec"]
            assert job == kept_when_finished(hook)


def test_the_flux_and_kubectl_recipes_in_gitops_md_name_the_stages_the_tree_has() -> None:
    """docs/gitops.md: three Flux Kustomizations (check, cluster, Jobs) chained by dependsOn, and the kubectl steps."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gitops.md").read_text()
    flux = doc.split("### Without hooks: Flux", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    kustomizations = list(yaml.safe_load_all(flux))
    tree = build_tree(render_file(Path(__file__).resolve().parents[2] / "profiles" / "kind-dev.yaml"), "kustomize")
    paths = [k["spec"]["path"].removeprefix("./clusters/dev/") for k in kustomizations]
    assert paths == [BEFORE_SYNC, CLUSTER, AFTER_SYNC]
    assert all(f"{p}/{KUSTOMIZATION}" in tree for p in paths)
    names = [k["metadata"]["name"] for k in kustomizations]
    assert [k["spec"].get("dependsOn") for k in kustomizations] == [None, [{"name": names[0]}], [{"name": names[1]}]]
    jobs = [k for k in kustomizations if k["spec"]["path"].endswith("sync")]
    assert all(k["spec"]["wait"] and k["spec"]["force"] for k in jobs)
    steps = doc.split("### Without hooks: plain kubectl", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    applied = [line.split(" -k DIR/", 1)[1] for line in steps.splitlines() if " -k DIR/" in line]
    assert applied == paths
