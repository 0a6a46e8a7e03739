"""Day 2 on a real Kubernetes (kind, kind-configs/dev.yaml): a partition edit reaches every daemon
in place while a job runs, and a deleted slurmd pod tells slurmctld it is going (docs/day2.md).

Its own kind cluster (slurmk8s-reconfig), removed afterwards. `python -m pytest tests/e2e/test_day2_kind.py -m e2e`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import NAMESPACE, REPO, Cluster, kind_cluster, local_profile, wait_for_job, wait_until

pytestmark = pytest.mark.e2e

LOGIN, LOGIN_CONTAINER = "dev-login-0", "sshd"
DRAIN_REASON = "slurmk8s: pod stopping"


@pytest.fixture(scope="module")
def kind() -> Cluster:
    """The module's own kind cluster, removed at the end."""
    with kind_cluster("slurmk8s-reconfig", REPO / "kind-configs" / "dev.yaml") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def dev(kind: Cluster, tmp_path_factory) -> tuple[Cluster, Path]:
    """kind-dev (local images) up on the module's kind cluster; down with its data at the end."""
    profile = local_profile(REPO / "profiles" / "kind-dev.yaml", tmp_path_factory.mktemp("dev") / "kind-dev.yaml")
    up = kind.slurmk8s("up", str(profile), "--timeout", "900")
    assert "cluster dev is ready" in up.stdout
    yield kind, profile
    kind.slurmk8s("down", str(profile), "--delete-data", "--yes", check=False)


def login(cluster: Cluster, *command: str, check: bool = True) -> str:
    return cluster.exec(LOGIN, LOGIN_CONTAINER, *command, check=check).stdout


def pod_uids(cluster: Cluster) -> dict[str, str]:
    """name -> uid of every pod of the dev cluster."""
    items = yaml.safe_load(cluster.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/instance=dev",
                                           "-o", "yaml").stdout)["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


def job_state_now(cluster: Cluster, job: str) -> str:
    return login(cluster, "squeue", "-h", "-j", job, "-o", "%T", check=False).strip()


def node_line(cluster: Cluster, node: str) -> str:
    return login(cluster, "scontrol", "-o", "show", "node", node, check=False)


# --- The fuzz campaign's bundles against the API server itself (issue 24 item 11) -------------------------

DRY_RUN_CASES = 400  # the default tier's campaign sample (tests/profile/test_fuzz.py)
DRY_RUN_BUNDLES = 12


def fuzzed_bundles(cases: int, wanted: int) -> list[list[dict]]:
    """The objects (hooks included) of the first distinct bundles that the seeded campaign's valid profiles render."""
    import random

    from slurmk8s.errors import ProfileError
    from slurmk8s.profile import load_profile
    from slurmk8s.render import render

    from tests.profile.test_fuzz import SEED, campaign_case

    rng, seen, out = random.Random(SEED), set(), []
    for n in range(cases):
        data = campaign_case(rng, n)  # every case is drawn, so the stream is the campaign's own
        if len(out) == wanted:
            continue
        try:
            bundle = render(load_profile(data, "fuzz.yaml"))
        except ProfileError:
            continue
        objects = list(bundle.objects + bundle.hooks)
        key = json.dumps(objects, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(objects)
    return out


def test_the_fuzz_campaigns_valid_bundles_pass_the_api_servers_dry_run(kind: Cluster) -> None:
    """What `validate` accepts, the API server takes: every object of a sample of the campaign's valid bundles
    passes `kubectl apply --server-side --dry-run=server` (admission, defaulting, the API server's validation).
    Custom resources of APIs kind does not serve (KEDA, the prometheus-operator, Multus) are left out here: the
    campaign checks them against their CRDs' schemas. Namespaces a bundle needs are created for real (a dry-run
    Namespace does not exist for the objects in it) and removed afterwards. First in the module: before `dev`
    exists, so every object is created, not an update of the running cluster's."""
    bundles = fuzzed_bundles(DRY_RUN_CASES, DRY_RUN_BUNDLES)
    assert len(bundles) == DRY_RUN_BUNDLES, f"only {len(bundles)} distinct valid bundles in {DRY_RUN_CASES} cases"
    served = set(kind.kubectl("api-versions").stdout.split())
    existing = set(kind.jsonpath("get", "namespaces", path="{.items[*].metadata.name}").split())
    created: list[str] = []
    left_out: set[str] = set()
    checked = 0
    try:
        for objects in bundles:
            wanted = sorted({o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
                            | {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"})
            for namespace in wanted:
                if namespace not in existing and namespace not in created:
                    kind.kubectl("create", "namespace", namespace)
                    created.append(namespace)
            sent = [o for o in objects if o["apiVersion"] in served and o["kind"] != "Namespace"]
            left_out |= {f"{o['apiVersion']} {o['kind']}" for o in objects if o["apiVersion"] not in served}
            result = kind.kubectl("apply", "--server-side", "--dry-run=server", "--force-conflicts",
                                  "--field-manager=slurmk8s-fuzz", "-o", "name", "-f", "-", check=False,
                                  input="".join("---\n" + json.dumps(o) + "\n" for o in sent), timeout=300)
            assert result.returncode == 0, result.stderr
            assert len(result.stdout.split()) == len(sent), (result.stdout, len(sent))
            checked += len(sent)
        # The same dry run refuses what the campaign's oracle refuses: two mounts at one path (N6a).
        broken = next(o for o in bundles[0] if o["kind"] == "StatefulSet")
        container = broken["spec"]["template"]["spec"]["containers"][0]
        container["volumeMounts"] = [*container["volumeMounts"], {**container["volumeMounts"][0]}]
        refused = kind.kubectl("apply", "--server-side", "--dry-run=server", "--field-manager=slurmk8s-fuzz",
                               "-f", "-", check=False, input=json.dumps(broken))
        # Server-side apply's typed merge refuses it before validation does ("must be unique").
        assert refused.returncode != 0 and '.volumeMounts: duplicate entries for key [mountPath="' in refused.stderr, \
            refused.stderr
    finally:
        for namespace in created:
            kind.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=300s", check=False, timeout=360)
    print(f"dry run: {checked} objects of {len(bundles)} bundles accepted; left out: {sorted(left_out)}")
    assert checked >= 10 * len(bundles)


def test_a_maxtime_edit_reaches_every_daemon_in_place_while_a_job_runs(dev, tmp_path: Path) -> None:
    cluster, profile = dev
    job = login(cluster, "sbatch", "--parsable", "-w", "cpu-0", "--wrap", "sleep 90").strip()
    assert job.isdigit(), job
    wait_until(lambda: job_state_now(cluster, job) == "RUNNING" or None, 120, f"job {job} to run")
    before = pod_uids(cluster)

    edited = tmp_path / "kind-dev.yaml"
    data = yaml.safe_load(profile.read_text())
    data["spec"]["partitions"][0]["maxTime"] = "02:00:00"
    edited.write_text(yaml.safe_dump(data, sort_keys=False))
    diff = cluster.slurmk8s("diff", str(edited), check=False).stdout.splitlines()
    assert "in place (scontrol reconfigure, no pod restarts): PartitionName=debug" in diff
    assert not [line for line in diff if line.startswith("restarts:")], diff

    up = cluster.slurmk8s("up", str(edited), "--timeout", "600").stdout
    assert any(line.startswith("reconfigured in place:") for line in up.splitlines()), up
    assert not [line for line in up.splitlines() if line.startswith("restarts:")], up

    # slurmctld has it, and so has each configless slurmd (pushed by scontrol reconfigure)
    assert "MaxTime=02:00:00" in login(cluster, "scontrol", "-o", "show", "partition", "debug")
    for pod in ("dev-cpu-0", "dev-cpu-1"):
        wait_until(lambda: "MaxTime=02:00:00" in cluster.exec(pod, "slurmd", "cat", "/run/slurm/conf/slurm.conf",
                                                                check=False).stdout or None,
                   60, f"{pod}'s configless slurm.conf to have the new MaxTime")
    assert pod_uids(cluster) == before  # no pod restarted
    assert job_state_now(cluster, job) == "RUNNING"
    assert wait_for_job(cluster, LOGIN, LOGIN_CONTAINER, job, timeout=300) == "COMPLETED"


def test_a_deleted_slurmd_pod_marks_its_node_down_at_once_and_the_next_pod_resumes_it(dev) -> None:
    cluster, _ = dev
    old_uid = pod_uids(cluster)["dev-cpu-1"]
    cluster.kubectl("-n", NAMESPACE, "delete", "pod", "dev-cpu-1", "--wait=false")
    # The preStop hook: drained then DOWN with its reason, well before SlurmdTimeout (300 s).
    line = wait_until(lambda: (text := node_line(cluster, "cpu-1")) and "State=DOWN" in text and text or None,
                      60, "cpu-1 to be DOWN")
    assert f"Reason={DRAIN_REASON}" in line, line
    # The StatefulSet's next pod registers; its postStart hook resumes the node the old pod drained.
    wait_until(lambda: pod_uids(cluster).get("dev-cpu-1") not in (None, old_uid) or None, 180, "a new dev-cpu-1")
    # pool nodes are CLOUD nodes: State=IDLE+CLOUD when back, never DRAIN or DOWN
    wait_until(lambda: (text := node_line(cluster, "cpu-1")) and re.search(r"State=IDLE(\+CLOUD)? ", text)
               and "DRAIN" not in text or None, 180, "cpu-1 to be idle again")
    job = login(cluster, "sbatch", "--parsable", "-w", "cpu-1", "--wrap", "hostname").strip()
    assert wait_for_job(cluster, LOGIN, LOGIN_CONTAINER, job, timeout=180) == "COMPLETED"


CORDON_REASON = "slurmk8s: kubernetes node cordoned"
HEALTH_CHECK_INTERVAL = 60  # kind-dev's HealthCheckInterval: it bounds how soon a cordon drains


def sinfo_node(cluster: Cluster, node: str) -> tuple[str, str]:
    """(long state, reason) of one Slurm node, as sinfo shows them."""
    out = login(cluster, "sinfo", "-h", "-N", "-n", node, "-o", "%T|%E", check=False).strip()
    state, _, reason = out.partition("|")
    return state, reason


def test_cordoning_a_kubernetes_node_drains_its_slurm_node_without_killing_the_job(dev) -> None:
    cluster, _ = dev
    host = cluster.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0", path="{.spec.nodeName}")
    assert host, "dev-cpu-0 has no node"
    job = login(cluster, "sbatch", "--parsable", "-w", "cpu-0", "--wrap", "sleep 150").strip()
    assert job.isdigit(), job
    wait_until(lambda: job_state_now(cluster, job) == "RUNNING" or None, 120, f"job {job} to run")
    try:
        cluster.kubectl("cordon", host)
        # slurmd's HealthCheckProgram sees the cordon at its next run: within one interval (and some slack).
        state, reason = wait_until(
            lambda: (s := sinfo_node(cluster, "cpu-0")) and s[0].startswith("drain") and s or None,
            HEALTH_CHECK_INTERVAL + 45, "cpu-0 to drain after the cordon")
        assert state.startswith("draining"), state  # the job still holds it
        assert reason == CORDON_REASON, reason
        assert job_state_now(cluster, job) == "RUNNING"
    finally:
        cluster.kubectl("uncordon", host)
    # A resume marks the node not responding ("*") until slurmd registers again (slurmctld's
    # _require_node_reg), so the node is back when it is neither draining nor waiting on that.
    state, _ = wait_until(
        lambda: (s := sinfo_node(cluster, "cpu-0")) and s[0] and not s[0].startswith("drain")
        and not s[0].endswith("*") and s or None,
        HEALTH_CHECK_INTERVAL + 45, "cpu-0 to resume and register after the uncordon")
    assert state.split("+")[0] in ("allocated", "mixed", "idle", "completing"), state
    assert wait_for_job(cluster, LOGIN, LOGIN_CONTAINER, job, timeout=300) == "COMPLETED"


# --- the GitOps hooks, run as Argo CD would: their rendered objects applied, their Job waited for ---------

def apply_hooks(cluster: Cluster, hooks: list[dict]) -> str:
    """kubectl apply the hook objects; the Job's name."""
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(h) for h in hooks))
    return next(h["metadata"]["name"] for h in hooks if h["kind"] == "Job")


def job_outcome(cluster: Cluster, job: str, timeout: float) -> str:
    """'succeeded' or 'failed', once the Job has finished."""
    def finished() -> str | None:
        status = yaml.safe_load(cluster.kubectl("-n", NAMESPACE, "get", "job", job, "-o", "yaml").stdout)["status"]
        return "succeeded" if status.get("succeeded") else "failed" if status.get("failed") else None
    outcome = wait_until(finished, timeout, f"job {job} to finish", interval=3)
    # its pod's log in the test's output (what a failed sync shows)
    cluster.kubectl("-n", NAMESPACE, "logs", f"job/{job}", "--all-containers", check=False)
    return outcome


def job_pod_message(cluster: Cluster, job: str) -> str:
    """The termination message of the Job's pod (what Argo CD shows for a failed hook)."""
    return cluster.jsonpath("-n", NAMESPACE, "get", "pods", "-l", f"job-name={job}",
                            path="{.items[0].status.containerStatuses[0].state.terminated.message}")


def component_hooks(profile: Path, component: str) -> list[dict]:
    """The rendered hook objects of one component (rollout, upgrade-check), in their apply order."""
    from slurmk8s.actions.render import render_file
    return [h for h in render_file(str(profile)).hooks
            if h["metadata"]["labels"].get("app.kubernetes.io/component") == component]


def test_the_post_sync_hook_reconfigures_slurmctld_after_a_config_only_sync(dev, tmp_path: Path) -> None:
    cluster, profile = dev
    before = pod_uids(cluster)
    edited = tmp_path / "kind-dev.yaml"
    data = yaml.safe_load(profile.read_text())
    data["spec"]["partitions"][0]["maxTime"] = "03:00:00"
    edited.write_text(yaml.safe_dump(data, sort_keys=False))
    # What a GitOps sync does: apply, nothing more (no scontrol reconfigure).
    cluster.slurmk8s("up", str(edited), "--no-wait")
    assert "MaxTime=03:00:00" not in login(cluster, "scontrol", "-o", "show", "partition", "debug")
    job = apply_hooks(cluster, component_hooks(edited, "rollout"))
    assert job_outcome(cluster, job, 420) == "succeeded"
    assert "MaxTime=03:00:00" in login(cluster, "scontrol", "-o", "show", "partition", "debug")
    logs = cluster.kubectl("-n", NAMESPACE, "logs", f"job/{job}", "-c", "rollout").stdout
    assert "reconfigured in place" in logs, logs
    assert {k: v for k, v in pod_uids(cluster).items() if not k.startswith("dev-rollout-")} == before


def test_the_pre_sync_hook_refuses_a_downgrade_and_passes_the_running_release(dev, tmp_path: Path) -> None:
    cluster, profile = dev
    hooks = component_hooks(profile, "upgrade-check")
    job = apply_hooks(cluster, hooks)
    assert job_outcome(cluster, job, 300) == "succeeded"
    # The same Job, told to go to 25.11 (no 25.11 image is needed: the check runs in the image it has).
    configmap = next(h for h in hooks if h["kind"] == "ConfigMap")
    settings = json.loads(configmap["data"]["settings.json"])
    configmap["data"]["settings.json"] = json.dumps({**settings, "target": "25.11"})
    refused = next(h for h in hooks if h["kind"] == "Job")
    refused["metadata"]["name"] = f"{job}-downgrade"
    apply_hooks(cluster, hooks)
    assert job_outcome(cluster, refused["metadata"]["name"], 300) == "failed"
    assert job_pod_message(cluster, refused["metadata"]["name"]) == (
        "spec.slurm.version: Slurm 26.05 -> 25.11 is a downgrade, which Slurm does not support; nothing was synced")


# --- Helm: a real release of the rendered chart (docs/gitops.md#helm) ------------------------------------

HELM_NAMESPACE = "slurm-helm"  # apart from the `up` cluster in NAMESPACE


def test_helm_upgrade_keeps_a_burst_pools_size_and_a_second_release_is_refused(kind: Cluster, tmp_path: Path) -> None:
    """Item 8 and 9 of issue 24: `helm upgrade` does not put an elastic pool back to the values' count after a
    burst scaled it, and a second release of the chart in the namespace fails before writing anything.

    Hooks are off for the upgrade part (its Jobs wait for a running Slurm, which needs the Secrets this
    namespace lacks); the pods may stay pending: only the StatefulSet's replicas are under test.
    """
    import shutil

    from slurmk8s.actions.render import build_tree, render_file
    from slurmk8s.output.plain import write_tree

    from tests.e2e.conftest import run, tool_env

    helm_bin = shutil.which("helm")
    assert helm_bin, "helm not on PATH: bash tools/install-helm.sh"
    profile = local_profile(REPO / "profiles" / "kind-dev.yaml", tmp_path / "kind-dev.yaml")
    chart = tmp_path / "chart"
    write_tree(build_tree(render_file(str(profile)), "helm"), chart)
    env = {**tool_env(), "KUBECONFIG": kind.kubeconfig}

    def helm(*args: str, check: bool = True):
        return run(helm_bin, *args, env=env, check=check, timeout=300)

    def replicas() -> int:
        return int(kind.jsonpath("-n", HELM_NAMESPACE, "get", "statefulset", "dev-cpu", path="{.spec.replicas}"))

    try:
        helm("install", "dev", str(chart), "-n", HELM_NAMESPACE, "--create-namespace", "--no-hooks",
             "--set", "pools.cpu.replicas=1")
        assert replicas() == 1
        # A burst, as slurmctld's ResumeProgram scales a pool: a merge patch of statefulsets/scale.
        kind.kubectl("-n", HELM_NAMESPACE, "patch", "statefulset", "dev-cpu", "--subresource=scale",
                     "--type=merge", "-p", '{"spec": {"replicas": 3}}', "--field-manager=slurmk8s-power")
        assert replicas() == 3
        upgrade = helm("upgrade", "dev", str(chart), "-n", HELM_NAMESPACE, "--no-hooks", "--set", "pools.cpu.replicas=1",
                       "--set", "workloads.dev-login.resources.sshd.limits.memory=300Mi", check=False)
        assert upgrade.returncode == 0, upgrade.stderr
        assert replicas() == 3, "helm upgrade reset the pool a burst had scaled"
        # A second release of the same profile into the same namespace: refused at render time, hooks included.
        other = helm("install", "other", str(chart), "-n", HELM_NAMESPACE, check=False)
        assert other.returncode != 0
        assert f'ConfigMap {HELM_NAMESPACE}/dev-slurm-config exists and belongs to release "dev", not to release "other"' \
            in other.stderr, other.stderr
        assert kind.jsonpath("-n", HELM_NAMESPACE, "get", "jobs", path="{.items[*].metadata.name}").strip() == ""
        assert helm("list", "-n", HELM_NAMESPACE, "-q").stdout.split() == ["dev"]
    finally:
        helm("uninstall", "dev", "-n", HELM_NAMESPACE, "--wait", check=False)
        kind.kubectl("delete", "namespace", HELM_NAMESPACE, "--wait=true", "--timeout=300s", check=False, timeout=360)


def live_configmap(cluster: Cluster, name: str) -> dict:
    return json.loads(cluster.kubectl("-n", NAMESPACE, "get", "configmap", name, "-o", "json").stdout)


# slurmctld's own client and token (the busy ConfigMap's kubeapi.py): each patch's status and the server's message
TOKEN_PATCHES = """
import json, sys
sys.path.insert(0, "/etc/slurmk8s/busy")
import kubeapi
api = kubeapi.Api(attempts=1, timeout=10)
path = "/api/v1/namespaces/" + api.namespace + "/pods/" + sys.argv[1]
for name, kind, body in json.loads(sys.argv[2]):
    status, _, payload = api._once("PATCH", path, json.dumps(body).encode(), "application/" + kind + "+json")
    message = json.loads(payload).get("message", "") if status >= 300 else ""
    print(json.dumps([name, status, message]))
"""


def test_the_controllers_token_may_set_the_busy_label_and_nothing_else_of_a_pool_pod(dev) -> None:
    """Issue 26 item 3 on a real API server: RBAC grants slurmctld's token `patch pods` on the pool pods, which
    would let it change a slurmd pod's image; the rendered ValidatingAdmissionPolicy allows the busy label only."""
    cluster, _ = dev
    pod = "dev-cpu-0"

    def live() -> dict:
        return json.loads(cluster.kubectl("-n", NAMESPACE, "get", "pod", pod, "-o", "json").stdout)
    before = live()
    busy = before["metadata"]["labels"].get("slurmk8s.io/busy", "false")
    attempts = [
        ("busy", "merge-patch", {"metadata": {"labels": {"slurmk8s.io/busy": busy}}}),
        # an image change is a valid pod update: only the policy can refuse it
        ("image", "strategic-merge-patch", {"spec": {"containers": [{"name": "slurmd", "image": "registry.example/x:1"}]}}),
        ("other-label", "merge-patch", {"metadata": {"labels": {"app.kubernetes.io/component": "other"}}}),
        ("annotation", "merge-patch", {"metadata": {"annotations": {"example.com/x": "y"}}}),
        ("busy-value", "merge-patch", {"metadata": {"labels": {"slurmk8s.io/busy": "maybe"}}}),
    ]
    out = cluster.exec("dev-controller-0", "slurmctld", "python3", "-c", TOKEN_PATCHES, pod, json.dumps(attempts)).stdout
    answers = {name: (status, message) for name, status, message in map(json.loads, out.splitlines())}
    assert answers["busy"] == (200, ""), answers
    policy = "ValidatingAdmissionPolicy 'slurmk8s-slurm-dev-busy-label-only'"
    for name, rule in [("image", "not its spec"), ("other-label", "not its other labels"),
                       ("annotation", "not its annotations"), ("busy-value", "is 'true' or 'false'")]:
        status, message = answers[name]
        assert status == 422 and policy in message and rule in message, (name, answers[name])
    after = live()
    assert [c["image"] for c in after["spec"]["containers"]] == [c["image"] for c in before["spec"]["containers"]]
    assert after["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"
    # the user's own kubectl is not the controller's token: the policy leaves it alone
    cluster.kubectl("-n", NAMESPACE, "annotate", "pod", pod, "example.com/x=y")
    cluster.kubectl("-n", NAMESPACE, "annotate", "pod", pod, "example.com/x-")


def test_up_refuses_an_object_it_did_not_create_adopts_it_only_when_asked_and_down_leaves_the_rest(dev) -> None:
    """Issue 24 item 1 on a real API server: server-side apply merges into someone else's object without a
    conflict, so `up` itself must refuse it; `--adopt` takes it over on purpose; `down` deletes none of theirs.
    Last in the module: it ends with a real `down --delete-data`."""
    cluster, profile = dev
    taken = "dev-health"  # a ConfigMap `up` applies: ours replaced by someone else's of the same name
    cluster.kubectl("-n", NAMESPACE, "delete", "configmap", taken)
    cluster.kubectl("-n", NAMESPACE, "create", "configmap", taken, "--from-literal=team-b=precious")
    theirs = live_configmap(cluster, taken)

    refused = cluster.slurmk8s("up", str(profile), "--no-wait", check=False)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "Traceback" not in refused.stderr
    assert (f"ConfigMap/{taken} exists in namespace {NAMESPACE} but was not created by slurmk8s for cluster dev: "
            f"refusing to take it over") in refused.stderr, refused.stderr
    assert f"add --adopt ConfigMap/{taken}" in refused.stderr
    untouched = live_configmap(cluster, taken)
    assert untouched["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
    assert untouched["data"] == {"team-b": "precious"} and not untouched["metadata"].get("labels")

    adopted = cluster.slurmk8s("up", str(profile), "--no-wait", "--adopt", f"ConfigMap/{taken}")
    assert f"ConfigMap/{taken} configured: adopted on purpose (--adopt)" in adopted.stdout, adopted.stdout
    labels = live_configmap(cluster, taken)["metadata"]["labels"]
    assert labels["app.kubernetes.io/instance"] == "dev" and "applyset.kubernetes.io/part-of" in labels

    # Someone else's objects with names like ours that the profile does not apply: down, data and all, leaves them.
    cluster.kubectl("-n", NAMESPACE, "create", "configmap", "dev-notes", "--from-literal=team-b=precious")
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "dev-home", "namespace": NAMESPACE},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}))
    down = cluster.slurmk8s("down", str(profile), "--delete-data", "--yes", "--timeout", "600")
    deleted = [line.split()[-1] for line in down.stdout.splitlines() if line.split()[:1] == ["deleted"]]
    assert f"ConfigMap/{taken}" in deleted, down.stdout
    assert not {"ConfigMap/dev-notes", "PersistentVolumeClaim/dev-home"} & set(deleted), down.stdout
    left = cluster.kubectl("-n", NAMESPACE, "get", "configmap,pvc", "-o", "name").stdout.split()
    assert "configmap/dev-notes" in left and "persistentvolumeclaim/dev-home" in left, left
    assert f"configmap/{taken}" not in left, left  # adopted: ours now, so down removed it
