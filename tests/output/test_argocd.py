"""The Argo CD output, and what every GitOps format shares: strict CRD schemas, sync waves, elastic
replicas left to Slurm, the plugin, minimal diffs, and no Secret material anywhere."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.actions.render import FORMATS, build_tree, render_file
from slurmk8s.output.argocd import ANNOTATION_SYNC_WAVE, ELASTIC_REPLICAS_JQ, waved_objects
from slurmk8s.render.order import WORKLOAD_KINDS
from crdschema import validate_custom_resource

ROOT = Path(__file__).resolve().parents[2]
REPO = "https://git.example.com/platform/slurm.git"
JQ = shutil.which("jq")


def argocd(bundle, path: str = "clusters/dev") -> dict[str, str]:
    return build_tree(bundle, "argocd", repo_url=REPO, revision="main", repo_path=path)


def gitops_tree(bundle, fmt: str) -> dict[str, str]:
    return argocd(bundle) if fmt == "argocd" else build_tree(bundle, fmt)


def test_application_and_applicationset_validate_strictly(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    tree = argocd(bundle)
    app = yaml.safe_load(tree["argocd/application.yaml"])
    appset = yaml.safe_load(tree["argocd/applicationset.yaml"])
    assert validate_custom_resource(app) == []
    assert validate_custom_resource(appset) == []
    assert validate_custom_resource(yaml.safe_load(tree["kustomization.yaml"])) == []
    assert app["spec"]["source"] == {"repoURL": REPO, "targetRevision": "main", "path": "clusters/dev"}
    assert app["spec"]["destination"]["namespace"] == bundle.namespace
    assert {"ServerSideApply=true", "CreateNamespace=true"} <= set(app["spec"]["syncPolicy"]["syncOptions"])
    gen = appset["spec"]["generators"][0]["git"]
    assert gen["files"] == [{"path": "clusters/*/slurmk8s-app.json"}]
    assert json.loads(tree["slurmk8s-app.json"]) == {"cluster": bundle.cluster, "namespace": bundle.namespace}


@pytest.mark.parametrize("mutate, error", [
    (lambda a: a["spec"]["syncPolicy"].update(syncOption=["x"]), "'syncOption' was unexpected"),
    (lambda a: a["spec"]["ignoreDifferences"][0].update(jsonPointer=["/spec/replicas"]), "'jsonPointer' was unexpected"),
    (lambda a: a["metadata"].update(nam="x"), "'nam' was unexpected"),
    (lambda a: a.update(apiVersion="argoproj.io/v1beta1"), "no schema for apiVersion 'argoproj.io/v1beta1'"),
], ids=["unknown-sync-policy-field", "unknown-ignore-field", "unknown-metadata-field", "unknown-api-version"])
def test_unknown_fields_fail(mutate, error: str) -> None:
    app = yaml.safe_load(argocd(render_file(ROOT / "profiles" / "kind-dev.yaml"))["argocd/application.yaml"])
    mutate(app)
    errors = validate_custom_resource(app)
    assert any(error in e for e in errors), errors


def synced(bundle) -> list[dict]:
    """The waved objects without the PostSync hooks (hooks have no wave)."""
    return [o for o in waved_objects(bundle) if "argocd.argoproj.io/hook" not in o["metadata"].get("annotations", {})]


def test_sync_waves_order_database_slurmdbd_slurmctld_then_nodes(example_profile: Path) -> None:
    objects = synced(render_file(example_profile))
    wave = {o["metadata"]["labels"].get(naming.LABEL_COMPONENT): int(o["metadata"]["annotations"][ANNOTATION_SYNC_WAVE])
            for o in objects if o["kind"] in naming.WORKLOAD_KINDS}
    config_waves = {int(o["metadata"]["annotations"][ANNOTATION_SYNC_WAVE]) for o in objects
                    if o["kind"] not in WORKLOAD_KINDS}
    order = [c for c in (naming.DATABASE, naming.ACCOUNTING, naming.CONTROLLER) if c in wave]
    assert [wave[c] for c in order] == sorted({wave[c] for c in order}) and len(set(wave[c] for c in order)) == len(order)
    later = [wave[c] for c in (naming.WORKER, naming.LOGIN, naming.RESTAPI) if c in wave]
    assert min(later) > wave[naming.CONTROLLER]
    assert max(config_waves) < min(wave.values())


def test_ignore_differences_names_exactly_the_elastic_pools(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    app = yaml.safe_load(argocd(bundle)["argocd/application.yaml"])
    elastic = sorted(o["metadata"]["name"] for o in bundle.objects if o["kind"] == "StatefulSet"
                     and naming.ANNOTATION_MAX_REPLICAS in o["metadata"].get("annotations", {})
                     and int(o["metadata"]["annotations"][naming.ANNOTATION_MIN_REPLICAS])
                     < int(o["metadata"]["annotations"][naming.ANNOTATION_MAX_REPLICAS]))
    ignored = app["spec"].get("ignoreDifferences", [])
    assert sorted(i["name"] for i in ignored) == elastic
    assert all(i["jsonPointers"] == ["/spec/replicas"] and i["kind"] == "StatefulSet" for i in ignored)
    if elastic:
        assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]


@pytest.mark.skipif(JQ is None, reason="jq not on PATH (checks the ApplicationSet's jq path expression)")
@pytest.mark.parametrize("annotations, keeps_replicas", [
    ({"slurmk8s.io/min-replicas": "0", "slurmk8s.io/max-replicas": "4"}, False),
    ({"slurmk8s.io/min-replicas": "2", "slurmk8s.io/max-replicas": "2"}, True),
    ({}, True),
], ids=["elastic", "fixed-pool", "not-a-pool"])
def test_applicationset_jq_ignores_only_elastic_replicas(annotations: dict, keeps_replicas: bool) -> None:
    sts = {"kind": "StatefulSet", "metadata": {"name": "x", "annotations": annotations}, "spec": {"replicas": 2}}
    # Argo CD applies a jqPathExpression as del(<expression>).
    run = subprocess.run([JQ, "-c", f"del({ELASTIC_REPLICAS_JQ})"], input=json.dumps(sts), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert ("replicas" in json.loads(run.stdout)["spec"]) is keeps_replicas


def test_plugin_discovers_a_profile_and_generates_the_waved_objects(tmp_path: Path) -> None:
    bundle = render_file(ROOT / "profiles" / "kind-dev.yaml")
    plugin = yaml.safe_load(argocd(bundle)["argocd/plugin.yaml"])
    assert plugin["kind"] == "ConfigManagementPlugin"
    shutil.copy(ROOT / "profiles" / "kind-dev.yaml", tmp_path / "dev.yaml")
    (tmp_path / "other.yaml").write_text("kind: ConfigMap\n")
    env = {**os.environ, "ARGOCD_ENV_SLURMK8S_PROFILE": "dev.yaml",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    find = plugin["spec"]["discover"]["find"]["command"]
    found = subprocess.run(find, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert found.stdout.split() == ["./dev.yaml"]
    gen = plugin["spec"]["generate"]
    run = subprocess.run(gen["command"] + gen["args"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert [d for d in yaml.safe_load_all(run.stdout) if d] == waved_objects(bundle)


def test_cli_argocd_needs_a_repo_url(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "render", str(ROOT / "profiles" / "kind-dev.yaml"),
                          "-o", str(tmp_path / "out"), "--format", "argocd"], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == "--format argocd needs --repo-url: the git repository Argo CD reads this tree from"


# A pool's replicas: one line in the manifests; helm also moves its content-derived chart version.
MINIMAL_DIFF = {"plain": (["manifests/statefulset-dev-cpu.yaml"], 1),
                "kustomize": (["manifests/statefulset-dev-cpu.yaml"], 1),
                "argocd": (["manifests/statefulset-dev-cpu.yaml"], 1),
                "helm": (["Chart.yaml", "values.yaml"], 2)}


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_field_change_gives_a_minimal_diff(fmt: str, tmp_path: Path) -> None:
    changed = tmp_path / "p.yaml"
    changed.write_text((ROOT / "profiles" / "kind-dev.yaml").read_text().replace("replicas: 2", "replicas: 3", 1))
    before = gitops_tree(render_file(ROOT / "profiles" / "kind-dev.yaml"), fmt)
    after = gitops_tree(render_file(changed), fmt)
    assert sorted(before) == sorted(after)
    files = sorted(f for f in before if before[f] != after[f])
    lines = sum(1 for f in files for d in difflib.ndiff(before[f].splitlines(), after[f].splitlines()) if d[0] == "+")
    assert (files, lines) == MINIMAL_DIFF[fmt]


def _secrets_in(value) -> list[dict]:
    if isinstance(value, dict):
        found = [value] if value.get("kind") == "Secret" else []
        return found + [s for v in value.values() for s in _secrets_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in _secrets_in(v)]
    return []


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_gitops_output_holds_a_secret(example_profile: Path, fmt: str) -> None:
    bundle = render_file(example_profile)
    tree = gitops_tree(bundle, fmt)
    documents = []
    for name, text in tree.items():
        if name.endswith(".json"):
            documents.append(json.loads(text))
        elif name.endswith(".yaml") and not name.startswith("templates/"):
            documents += [d for d in yaml.safe_load_all(text) if d is not None]
    templates = "".join(t for n, t in tree.items() if n.startswith("templates/"))
    assert _secrets_in(documents) == []
    assert "kind: Secret" not in templates and "stringData" not in templates
    assert "PRIVATE KEY" not in "".join(tree.values())
    # Every Secret the manifests need is referenced by name only, and listed for `slurmk8s secrets create`.
    assert all(s.name in tree.get("SECRETS.txt", "") for s in bundle.secrets)


def test_a_scaled_object_syncs_in_the_wave_after_its_target(example_profile: Path) -> None:
    """KEDA marks a ScaledObject whose target is missing not Ready, and Argo CD's health check calls that
    Degraded: in the target's wave or before, the first sync would wait for ever."""
    objects = synced(render_file(example_profile))
    wave = {(o["kind"], o["metadata"]["name"]): int(o["metadata"]["annotations"][ANNOTATION_SYNC_WAVE]) for o in objects}
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    for so in scaled:
        target = so["spec"]["scaleTargetRef"]
        assert wave[("ScaledObject", so["metadata"]["name"])] == wave[(target["kind"], target["name"])] + 1
    if example_profile.name == "gpu-ib.yaml":
        assert scaled, "gpu-ib has a KEDA pool: the case must be exercised"


def test_the_application_retries_and_diffs_server_side(example_profile: Path) -> None:
    tree = argocd(render_file(example_profile))
    app = yaml.safe_load(tree["argocd/application.yaml"])
    appset = yaml.safe_load(tree["argocd/applicationset.yaml"])
    for meta, policy in ((app["metadata"], app["spec"]["syncPolicy"]),
                         (appset["spec"]["template"]["metadata"], appset["spec"]["template"]["spec"]["syncPolicy"])):
        assert meta["annotations"]["argocd.argoproj.io/compare-options"] == "ServerSideDiff=true"
        assert policy["retry"]["limit"] >= 1 and policy["retry"]["backoff"]["duration"]


def test_argocd_never_prunes_or_deletes_the_namespace_or_a_claim(example_profile: Path) -> None:
    objects = synced(render_file(example_profile))
    kept = [o for o in objects if o["kind"] in ("Namespace", "PersistentVolumeClaim")]
    assert any(o["kind"] == "Namespace" for o in kept)
    for obj in objects:
        options = obj["metadata"]["annotations"].get("argocd.argoproj.io/sync-options")
        assert (options == "Prune=false,Delete=false") == (obj in kept), obj["metadata"]["name"]


def test_claim_templates_carry_apiversion_and_kind(example_profile: Path) -> None:
    """The API server fills them in; a template without them diffs against the live StatefulSet for ever."""
    for sts in render_file(example_profile).of_kind("StatefulSet"):
        for template in sts["spec"].get("volumeClaimTemplates", []):
            assert (template["apiVersion"], template["kind"]) == ("v1", "PersistentVolumeClaim")


def test_the_account_tree_job_is_a_post_sync_hook(tmp_path: Path) -> None:
    """A cluster Argo CD syncs gets its accounts from a PostSync Job, re-created on every sync."""
    bundle = render_file(ROOT / "profiles" / "gpu-ib.yaml")
    hooks = [o for o in waved_objects(bundle) if "argocd.argoproj.io/hook" in o["metadata"].get("annotations", {})
             and "-accounts-" in o["metadata"]["name"]]
    assert [h["kind"] for h in hooks] == ["Job"]
    assert hooks[0]["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PostSync"
    assert hooks[0]["metadata"]["annotations"]["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    tree = argocd(bundle)
    assert "hooks/after-sync" in yaml.safe_load(tree["kustomization.yaml"])["resources"]
    assert f"job-{hooks[0]['metadata']['name']}.yaml" in yaml.safe_load(tree["hooks/after-sync/kustomization.yaml"])["resources"]
    # a profile without an account tree has no account Job (only the rollout's hook)
    assert not [h for h in render_file(ROOT / "profiles" / "kind-dev.yaml").hooks if "-accounts-" in h["metadata"]["name"]]
