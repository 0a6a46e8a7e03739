"""What the render gives rollouts: OnDelete pools, the Slurm version on every Slurm workload, two disjoint
PodDisruptionBudgets per pool, and the GitOps hook that runs the rollout in the cluster.

(The hook's objects also validate strictly against every claimed Kubernetes minor: test_kube_schemas.py
checks bundle.hooks too.)
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.actions.render import render_file
from slurmk8s.profile import load_profile
from slurmk8s.render import render
from slurmk8s.render.topology import pool_segments
from slurmk8s.output.argocd import post_sync_hooks
from slurmk8s.output.helm import helm_tree
import slurmk8s.podside.rollout_core as core
from slurmk8s.podside.rollout_core import files_digest

ROOT = Path(__file__).resolve().parents[2]
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"


def rollout_hooks(bundle) -> list[dict]:
    return [h for h in bundle.hooks if h["metadata"]["labels"].get(naming.LABEL_COMPONENT) == naming.ROLLOUT]


def test_pool_statefulsets_are_on_delete_and_the_rest_roll(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    for sts in bundle.of_kind("StatefulSet"):
        is_pool = sts["metadata"]["labels"].get(naming.LABEL_COMPONENT) == naming.WORKER
        assert (sts["spec"].get("updateStrategy") == {"type": "OnDelete"}) is is_pool, sts["metadata"]["name"]


def test_every_slurm_workload_says_its_slurm_release(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    for obj in bundle.objects:
        if obj["kind"] in naming.WORKLOAD_KINDS:
            component = obj["metadata"]["labels"][naming.LABEL_COMPONENT]
            version = obj["metadata"].get("annotations", {}).get(naming.ANNOTATION_SLURM_VERSION)
            assert version == (None if component == naming.DATABASE else bundle.version), obj["metadata"]["name"]


def selects(pdb: dict, labels: dict) -> bool:
    selector = pdb["spec"]["selector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        assert e["operator"] == "NotIn"
        if labels.get(e["key"]) in e["values"]:
            return False
    return True


@pytest.mark.parametrize("busy, budget", [(None, 1), ("false", 1), ("true", 0)], ids=["unlabelled", "idle", "busy"])
def test_exactly_one_budget_selects_each_slurmd_pod(example_profile: Path, busy, budget) -> None:
    """The eviction API refuses a pod that two budgets select; a busy pod's budget allows no eviction."""
    bundle = render_file(example_profile)
    for sts in bundle.of_kind("StatefulSet"):
        labels = dict(sts["spec"]["template"]["metadata"]["labels"])
        if labels.get(naming.LABEL_COMPONENT) != naming.WORKER:
            continue
        if busy:
            labels[naming.LABEL_BUSY] = busy
        matching = [p for p in bundle.of_kind("PodDisruptionBudget") if selects(p, labels)]
        assert [p["spec"]["maxUnavailable"] for p in matching] == [budget], sts["metadata"]["name"]


def test_the_hook_may_do_exactly_what_a_rollout_needs() -> None:
    bundle = render_file(KIND_DEV)
    sa, role, binding, configmap, job = rollout_hooks(bundle)
    assert [o["kind"] for o in (sa, role, binding, configmap, job)] == [
        "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]
    assert role["rules"] == [
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "resourceNames": ["dev-cpu"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": [f"dev-cpu-{i}" for i in range(4)],
         "verbs": ["get", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["dev-controller-0"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "resourceNames": ["dev-controller-0"],
         "verbs": ["create", "get"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "slurm"}]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"] and pod["automountServiceAccountToken"] is True
    assert pod["containers"][0]["command"] == ["python3", "/etc/slurmk8s/rollout/rollout.py"]
    assert pod["containers"][0]["securityContext"]["runAsUser"] == naming.SLURM_UID
    # auth/slurm: a client asks a sack socket, and no daemon in the Job serves one: sackd does (found on kind)
    assert [c["name"] for c in pod["initContainers"]][-1] == "sackd"
    assert {"name": "sack", "mountPath": "/run/slurm"} in pod["containers"][0]["volumeMounts"]
    # the driver shipped is the very module `slurmk8s rollout` runs
    assert configmap["data"]["rollout_core.py"] == Path(core.__file__).read_text()
    # the digest slurmctld's files must have before the hook reconfigures: the Slurm ConfigMap's, as `up` computes it
    want = files_digest(bundle.find("ConfigMap", naming.config_map("dev"))["data"])
    assert json.loads(configmap["data"]["settings.json"]) == {
        "statefulsets": ["dev-cpu"], "maxUnavailable": 1, "drainTimeout": 3600, "readyTimeout": 900,
        "controllers": ["dev-controller-0"], "configDigest": want, "reconfigureTimeout": 300}
    assert job["spec"]["backoffLimit"] == 0


def test_the_hook_job_is_new_when_a_pool_template_changes(tmp_path: Path) -> None:
    data = yaml.safe_load(KIND_DEV.read_text())
    data["spec"]["pools"][0]["nodeSelector"] = {"x": "y"}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    before, after = rollout_hooks(render_file(KIND_DEV))[-1], rollout_hooks(render_file(tmp_path / "p.yaml"))[-1]
    assert before["metadata"]["name"] != after["metadata"]["name"]
    assert before["metadata"]["name"] == rollout_hooks(render_file(KIND_DEV))[-1]["metadata"]["name"]


def test_argo_cd_and_helm_run_the_hook_after_sync_and_upgrade() -> None:
    bundle = render_file(KIND_DEV)
    names = {h["metadata"]["name"] for h in rollout_hooks(bundle)}
    argo = [h for h in post_sync_hooks(bundle) if h["metadata"]["name"] in names]
    assert len(argo) == 5 and all(h["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PostSync" for h in argo)
    helm = [text for path, text in helm_tree(bundle).items() if "rollout" in path and path.startswith("templates/")]
    assert len(helm) == 5 and all("helm.sh/hook: post-install,post-upgrade" in text for text in helm)


class FakeApi:
    """The script's Api over dicts: two pods of dev-cpu, one stale."""

    def __init__(self):
        self.namespace = "slurm"
        self.sts = {"metadata": {"name": "dev-cpu", "labels": {naming.LABEL_COMPONENT: naming.WORKER,
                                                               naming.LABEL_POOL: "cpu"}},
                    "spec": {"replicas": 2, "updateStrategy": {"type": "OnDelete"}},
                    "status": {"updateRevision": "dev-cpu-new"}}
        self.pods = {f"dev-cpu-{i}": self.pod(f"dev-cpu-{i}", rev) for i, rev in enumerate(("dev-cpu-old", "dev-cpu-new"))}
        self.deleted: list[str] = []

    @staticmethod
    def pod(name, revision):
        return {"metadata": {"name": name, "labels": {"controller-revision-hash": revision}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    def statefulset(self, name):
        return self.sts if name == "dev-cpu" else None

    def pod_get(self, name):
        return self.pods.get(name)

    def delete_pod(self, name):
        self.deleted.append(name)
        self.pods[name] = self.pod(name, "dev-cpu-new")  # the StatefulSet makes it anew


def test_the_in_cluster_script_runs_the_rollout_from_its_config_map(tmp_path: Path, monkeypatch) -> None:
    configmap = rollout_hooks(render_file(KIND_DEV))[3]
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    spec = importlib.util.spec_from_file_location("rollout_hook", tmp_path / "rollout.py")
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec.loader.exec_module(script)
    api = FakeApi()
    want = json.loads(configmap["data"]["settings.json"])["configDigest"]
    seen = iter(["", "0" * 64 + "  -\n", want + "  -\n"])  # unreadable, the old files, then the synced ones
    calls = []

    def exec_in(pod, container, argv):
        calls.append(("exec", pod, container, argv))
        return next(seen)
    monkeypatch.setattr(script, "Api", lambda: type("A", (), {
        "statefulset": staticmethod(api.statefulset), "pod": staticmethod(api.pod_get),
        "delete_pod": staticmethod(api.delete_pod), "exec": staticmethod(exec_in),
        "annotate_pod": staticmethod(lambda pod, key, value: calls.append(("annotate", pod, key, value)))})())
    monkeypatch.setattr(script.time, "sleep", lambda s: None)
    commands = []

    def slurm(argv):
        commands.append(argv[:4])
        calls.append(tuple(argv[:2]))
        return "cpu-0|idle|none\n" if argv[0] == "sinfo" else ""
    monkeypatch.setattr(script, "slurm", slurm)
    assert script.main() == 0
    # first the reconfigure, once slurmctld's files are the synced ones; then the rollout
    assert calls[:5] == [("annotate", "dev-controller-0", "slurmk8s.io/config-applied", want[:16])] + [
        ("exec", "dev-controller-0", "slurmctld", ["/bin/sh", "-c", "cat /mnt/slurm-config/* | sha256sum"])] * 3 + [
        ("scontrol", "reconfigure")]
    assert api.deleted == ["dev-cpu-0"]
    assert [c[:4] for c in commands if c[0] == "scontrol"] == [
        ["scontrol", "reconfigure"],
        ["scontrol", "update", "nodename=cpu-0", "state=drain"], ["scontrol", "update", "nodename=cpu-0", "state=resume"]]


def test_the_in_cluster_script_stops_when_slurmctld_never_sees_the_synced_files(tmp_path: Path, monkeypatch) -> None:
    configmap = rollout_hooks(render_file(KIND_DEV))[3]
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    spec = importlib.util.spec_from_file_location("rollout_hook_stale", tmp_path / "rollout.py")
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec.loader.exec_module(script)
    api = FakeApi()
    monkeypatch.setattr(script, "Api", lambda: type("A", (), {
        "statefulset": staticmethod(api.statefulset), "pod": staticmethod(api.pod_get),
        "delete_pod": staticmethod(api.delete_pod), "exec": staticmethod(lambda *a: "0" * 64 + "  -\n"),
        "annotate_pod": staticmethod(lambda *a: None)})())
    now = [0.0]
    monkeypatch.setattr(script.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(script.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    commands = []
    monkeypatch.setattr(script, "slurm", lambda argv: commands.append(argv) or "")
    assert script.main() == 1
    assert commands == [] and api.deleted == []  # no reconfigure of stale files, no rollout


def test_slurmctld_marks_pool_pods_busy_through_a_narrow_role() -> None:
    bundle = render_file(KIND_DEV)
    conf = bundle.files["slurm.conf"]
    assert "PrologSlurmctld=/etc/slurmk8s/busy/prolog\nEpilogSlurmctld=/etc/slurmk8s/busy/epilog\n" in conf
    assert conf.index("PrologSlurmctld=") < conf.index("\nNodeName=")
    assert bundle.find("Role", "dev-busy")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": [f"dev-cpu-{i}" for i in range(4)], "verbs": ["patch"]}]
    assert bundle.find("RoleBinding", "dev-busy")["subjects"][0]["name"] == "dev-controller"
    pod = bundle.find("StatefulSet", "dev-controller")["spec"]["template"]["spec"]
    (slurmctld,) = [c for c in pod["containers"] if c["name"] == "slurmctld"]
    assert {"name": "busy", "mountPath": "/etc/slurmk8s/busy", "readOnly": True} in slurmctld["volumeMounts"]
    assert pod["automountServiceAccountToken"] is True


def test_an_admission_policy_confines_the_busy_roles_token_to_the_busy_label(example_profile: Path) -> None:
    """RBAC's `patch pods` would let slurmctld's token change a pool pod's image (issue 26 item 3): the policy
    matches that token's updates of exactly the pool pods, and its rules name the label busy.py sets."""
    bundle = render_file(example_profile)
    profile = load_profile(example_profile.read_bytes())
    policies = [o for o in bundle.objects if o["kind"] == "ValidatingAdmissionPolicy"]
    bindings = [o for o in bundle.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    if not profile.pools:
        assert policies == bindings == []
        return
    (policy,), (binding,) = policies, bindings
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] and binding["spec"]["validationActions"] == ["Deny"]
    assert "namespace" not in policy["metadata"] and bundle.namespace in policy["metadata"]["name"]
    (role,) = [o for o in bundle.objects if o["kind"] == "Role" and o["metadata"]["name"].endswith("-busy")]
    (token,) = {s["name"] for o in bundle.objects if o["kind"] == "RoleBinding"
                and o["roleRef"]["name"] == role["metadata"]["name"] for s in o["subjects"]}
    controller = bundle.find("StatefulSet", f"{bundle.cluster}-controller")["spec"]["template"]["spec"]
    assert controller["serviceAccountName"] == token
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"].endswith(f"request.namespace + ':{token}'")
    selector = binding["spec"]["matchResources"]["objectSelector"]["matchLabels"]
    pods = {o["metadata"]["name"]: o["spec"]["template"]["metadata"]["labels"] for o in bundle.objects
            if o["kind"] in ("StatefulSet", "DaemonSet")}
    selected = sorted(n for n, labels in pods.items() if selector.items() <= labels.items())
    # every pod the Role lets it patch (side-by-side DaemonSets' slurmd pods are selected too: it may patch none)
    assert set(s.statefulset for p in profile.pools for s in pool_segments(profile, p)) <= set(selected)
    assert all(pods[n][naming.LABEL_COMPONENT] == naming.WORKER for n in selected)
    rules = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "object.spec == oldObject.spec" in rules and f"'{load_label()}'" in rules
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
    assert [r["resources"] for r in role["rules"]] == [["pods"]]  # what the policy matches is all the Role grants


def load_label() -> str:
    """The label busy.py sets, read from the shipped program itself."""
    text = (ROOT / "slurmk8s" / "podside" / "busy.py").read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("LABEL = ")]
    return line.split("=", 1)[1].strip().strip('"')


def test_the_admission_policy_can_be_turned_off_for_clusters_before_1_30() -> None:
    text = KIND_DEV.read_text() + "  admissionPolicy: {enabled: false}\n"
    bundle = render(load_profile(text.encode()))
    assert not [o for o in bundle.objects if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert bundle.find("Role", "dev-busy")  # the busy marking itself stays


def load_busy(tmp_path: Path, monkeypatch):
    configmap = render_file(KIND_DEV).find("ConfigMap", "dev-busy")
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    spec = importlib.util.spec_from_file_location("busy_hook", tmp_path / "busy.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.mark.parametrize("verb, others, labelled", [
    ("prolog", "", {"dev-cpu-0": "true", "dev-cpu-1": "true"}),
    ("epilog", "", {"dev-cpu-0": "false", "dev-cpu-1": "false"}),
    ("epilog", "42", {}),  # another job still holds both nodes: they stay busy
], ids=["prolog", "epilog-last-job", "epilog-other-job"])
def test_the_busy_program_labels_the_jobs_pods(tmp_path: Path, monkeypatch, verb, others, labelled) -> None:
    script = load_busy(tmp_path, monkeypatch)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "cpu-[0-1],shared-node")
    done = {}
    monkeypatch.setattr(script, "label", lambda pod, value: done.__setitem__(pod, value))

    def run(argv, **kwargs):
        out = "cpu-0 cpu-1 shared-node" if argv[:2] == ["scontrol", "show"] else f"7\n{others}"
        return type("R", (), {"returncode": 0, "stdout": out})()
    monkeypatch.setattr(script.subprocess, "run", run)
    script.main(verb)
    assert done == labelled


def test_pod_names_are_pod_name_of_each_ordinal() -> None:
    """The list built at once (render/k8s/podreplacement.py's Roles) names the pods as pod_name does."""
    from slurmk8s import naming
    assert naming.pod_names("c-gpu", 12) == [naming.pod_name("c-gpu", i) for i in range(12)]
    assert naming.pod_names("c-gpu", 0) == []
