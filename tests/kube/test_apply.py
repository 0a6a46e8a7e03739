"""`up` at the HTTP level: server-side apply, stage order, create-once Secrets, no-op re-apply, prune, dry run."""

from __future__ import annotations

import base64
import dataclasses
import string

import pytest

from conftest import GPU_IB, KIND_DEV, object_count
from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.kube.stages import STAGE_NAMES, stage_of
from slurmk8s.render import render

NS = "/api/v1/namespaces/slurm"
APPS = "/apis/apps/v1/namespaces/slurm"


def bundle_of(path):
    return render(read_profile(path))


def writes_to(stub, fragment):
    return [r for r in stub.requests if r.method in ("POST", "PUT", "PATCH", "DELETE") and fragment in r.path]



def is_parent(request) -> bool:
    """The ApplySet parent's write (kube/applyset.py), not one of the bundle's objects."""
    return request.method == "PATCH" and request.name.endswith("-applyset") and "/configmaps/" in request.path

def test_every_object_is_server_side_applied_with_our_field_manager(stub, up):
    up(KIND_DEV)
    bundle = bundle_of(KIND_DEV)
    # `up` first dry-runs the bundle to say what restarts (actions/reconfigure.py); the writes:
    patches = [r for r in stub.calls("PATCH") if r.q("dryRun") != "All"]
    # every object, and the ApplySet parent twice (the superset before the objects, what is left after)
    assert sorted(r.name for r in patches) == sorted([o["metadata"]["name"] for o in bundle.objects]
                                                     + ["dev-applyset", "dev-applyset"])
    assert {r.content_type for r in patches} == {"application/apply-patch+yaml"}
    assert {r.q("fieldManager") for r in patches} == {"slurmk8s"}
    assert {r.q("force") for r in patches} == {None}
    assert not stub.calls("PUT")
    # every namespaced object goes to the profile's namespace, and the body says so too; the cluster-scoped
    # ones (the Namespace, the cordon check's node reader, the busy-label policy) to no namespace
    cluster_scoped = ("Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding")
    for r in patches:
        if r.body["kind"] not in cluster_scoped:
            assert r.path.split("/namespaces/")[1].startswith("slurm/"), r.path
            assert r.body["metadata"]["namespace"] == "slurm"
        else:
            assert "/namespaces/slurm/" not in r.path and "namespace" not in r.body["metadata"], r.path
    assert stub.requests[0].authorization == "Bearer stub-token"


def worker_stage_applies(bundle):
    """A matcher for the apply requests of the bundle's worker stage (its pools' StatefulSets and ScaledObjects)."""
    def when(r) -> bool:
        if r.method != "PATCH" or not isinstance(r.body, dict) or "kind" not in r.body:
            return False
        try:
            obj = bundle.find(r.body["kind"], r.body["metadata"]["name"])
        except KeyError:  # the ApplySet parent is applied by up, not rendered
            return False
        return obj is not None and STAGE_NAMES[stage_of(obj)] == "worker"
    return when


def test_stages_follow_dependency_order_and_run_in_parallel(stub, up):
    bundle = bundle_of(GPU_IB)
    workers = [o for o in bundle.objects if STAGE_NAMES[stage_of(o)] == "worker"]
    assert sorted(o["kind"] for o in workers) == ["ScaledObject", "StatefulSet", "StatefulSet"]
    # Two pools (and the ScaledObject of one), one stage: each apply is answered only once all three are in flight.
    barrier = stub.barrier(len(workers), worker_stage_applies(bundle))
    up(GPU_IB, workers=8)
    assert not barrier.broken
    by_name = {("Secret" if r.method == "POST" else r.body["kind"], r.body["metadata"]["name"]): r
               for r in stub.requests if r.method in ("PATCH", "POST") and not is_parent(r)}
    stage_index = {key: (STAGE_NAMES.index("secrets") if key[0] == "Secret" else stage_of(bundle.find(*key)))
                   for key in by_name}
    stages = sorted(set(stage_index.values()))
    assert [STAGE_NAMES[s] for s in stages] == [
        "namespace", "service accounts and RBAC", "secrets", "config maps", "services, claims, policies",
        "mariadb", "accounting", "controller", "worker", "login", "restapi", "other workloads"]
    # Order is causal, not timed: no request of a stage starts before every request of the stage before was answered.
    for earlier, later in zip(stages, stages[1:]):
        done = max(r.ended for k, r in by_name.items() if stage_index[k] == earlier)
        begun = min(r.started for k, r in by_name.items() if stage_index[k] == later)
        assert done <= begun, f"{STAGE_NAMES[later]} started before {STAGE_NAMES[earlier]} finished"


def test_the_overlap_barrier_fails_an_apply_that_is_not_parallel(stub, up):
    bundle = bundle_of(GPU_IB)
    parties = sum(1 for o in bundle.objects if STAGE_NAMES[stage_of(o)] == "worker")
    barrier = stub.barrier(parties, worker_stage_applies(bundle), timeout=1)
    with pytest.raises(ClusterError, match="barrier broken"):
        up(GPU_IB, workers=1)
    assert barrier.broken


def test_missing_secrets_get_strong_fresh_material(stub, up):
    up(GPU_IB)
    created = {r.body["metadata"]["name"]: r for r in stub.calls("POST", "/secrets")}
    assert sorted(created) == ["research-auth-key", "research-db-password", "research-jwt-key",
                               "research-ssh-host-keys", "research-token-ada"]
    # ada's token Secret starts empty: the tokens Job fills it (render/k8s/tokens.py).
    assert created["research-token-ada"].body["data"] == {"token": ""}
    assert {r.q("fieldManager") for r in created.values()} == {"slurmk8s"}
    key = base64.b64decode(created["research-auth-key"].body["data"]["slurm.key"])
    jwt = base64.b64decode(created["research-jwt-key"].body["data"]["jwt_hs256.key"])
    password = base64.b64decode(created["research-db-password"].body["data"]["password"]).decode()
    assert len(key) == 1024 and len(set(key)) > 200
    assert len(jwt) == 32
    assert len(password) == 32 and set(password) <= set(string.ascii_letters + string.digits)
    assert created["research-auth-key"].path == "/api/v1/namespaces/hpc/secrets"
    host_key = base64.b64decode(created["research-ssh-host-keys"].body["data"]["ssh_host_ed25519_key"])
    assert host_key.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")


def test_created_secrets_are_immutable(stub, up):
    """Rotation is by replacement (delete, then up), so the API server may refuse every edit of the data; a token
    Secret, which its Job refills, is the one that may change."""
    up(GPU_IB)
    assert {r.body["metadata"]["name"]: r.body.get("immutable") for r in stub.calls("POST", "/secrets")} == {
        "research-auth-key": True, "research-db-password": True, "research-jwt-key": True,
        "research-ssh-host-keys": True, "research-token-ada": False}


def test_an_existing_secret_is_never_written(stub, up):
    stub.seed("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "slurm"}})
    old = {"kind": "Secret", "metadata": {"name": "dev-auth-key", "namespace": "slurm"},
           "data": {"slurm.key": base64.b64encode(b"old key").decode()}}
    stub.seed(f"{NS}/secrets", old, managers=("someone-else",))
    plan, _ = up(KIND_DEV)
    up(KIND_DEV)
    assert not writes_to(stub, "/secrets/dev-auth-key")
    # Sorted: the Secrets are created concurrently (the host key is now as quick to make as the password).
    assert sorted(r.body["metadata"]["name"] for r in stub.calls("POST", "/secrets")) == ["dev-db-password",
                                                                                          "dev-ssh-host-keys"]
    assert stub.get(f"{NS}/secrets", "dev-auth-key")["data"] == old["data"]
    assert [c.action for c in plan.changes if c.ref == "Secret/dev-auth-key"] == ["kept"]


def test_a_secret_created_by_someone_else_meanwhile_is_left_alone(stub, up):
    # GET says missing, then the POST loses the race: 409 AlreadyExists must not lead to a write.
    stub.fail(409, lambda r: r.method == "POST" and r.path.endswith("/secrets"), reason="AlreadyExists")
    plan, _ = up(KIND_DEV)
    assert {c.action for c in plan.changes if c.ref.startswith("Secret/")} == {"kept"}
    assert not [r for r in writes_to(stub, "/secrets") if r.method != "POST"]


def test_second_up_of_the_same_profile_changes_nothing_and_says_so(stub, up):
    up(KIND_DEV)
    before = {n: stub.get(f"{APPS}/statefulsets", n)["metadata"]["resourceVersion"] for n in stub.names(f"{APPS}/statefulsets")}
    assert len(before) == 5
    stub.reset_log()
    plan, lines = up(KIND_DEV)
    assert not plan.changed
    assert f"no changes: {object_count(KIND_DEV)} objects unchanged, 3 of 3 secrets kept" in lines
    assert not stub.calls("POST") and not stub.calls("DELETE")
    after = {n: stub.get(f"{APPS}/statefulsets", n)["metadata"]["resourceVersion"] for n in before}
    assert after == before


def test_a_changed_profile_configures_only_what_changed(stub, up, edited_profile):
    up(KIND_DEV)
    tolerant = edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(tolerations=[{"operator": "Exists"}]))
    plan, lines = up(tolerant)
    changed = {c.ref: c.action for c in plan.changes if c.action != "unchanged"}
    assert changed == {"StatefulSet/dev-cpu": "configured", "Secret/dev-auth-key": "kept",
                       "Secret/dev-db-password": "kept", "Secret/dev-ssh-host-keys": "kept"}
    assert "  StatefulSet/dev-cpu configured" in lines


def test_prune_deletes_only_objects_with_our_labels_and_field_manager(stub, up, edited_profile):
    up(KIND_DEV)
    ours = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/managed-by": "slurmk8s"}
    stub.seed(f"{NS}/configmaps", {"kind": "ConfigMap", "metadata": {"name": "leftover", "labels": ours}})
    stub.seed(f"{NS}/configmaps", {"kind": "ConfigMap", "metadata": {"name": "copied-labels", "labels": ours}},
              managers=("kubectl-client-side-apply",))
    stub.seed(f"{NS}/configmaps", {"kind": "ConfigMap", "metadata": {"name": "unlabelled"}})
    stub.seed(f"{NS}/configmaps", {"kind": "ConfigMap", "metadata": {
        "name": "other-cluster", "labels": {**ours, "app.kubernetes.io/instance": "prod"}}})
    stub.seed(f"{NS}/persistentvolumeclaims", {"kind": "PersistentVolumeClaim", "metadata": {"name": "old-claim", "labels": ours}})
    stub.seed(f"{NS}/secrets", {"kind": "Secret", "metadata": {"name": "old-secret", "labels": ours}})
    no_login = edited_profile(KIND_DEV, lambda p: p["spec"]["login"].update(replicas=0))
    stub.reset_log()
    plan, _ = up(no_login)
    deleted = sorted(r.path.removeprefix("/api/v1/namespaces/slurm/").removeprefix("/apis/") for r in stub.calls("DELETE"))
    assert deleted == [
        "apps/v1/namespaces/slurm/statefulsets/dev-login",
        "configmaps/dev-login-config",
        "configmaps/leftover",
        "networking.k8s.io/v1/namespaces/slurm/networkpolicies/dev-login-ssh",
        "serviceaccounts/dev-login",
        "services/dev-login",
        "services/dev-login-pods",
    ]
    assert plan.count("pruned") == 7
    assert {r.q("propagationPolicy") for r in stub.calls("DELETE")} == {"Background"}
    # prune happens after every apply (only the ApplySet parent is written after it: what is left)
    applies = [r for r in stub.calls("PATCH") if not is_parent(r)]
    assert min(r.started for r in stub.calls("DELETE")) >= max(r.ended for r in applies)
    assert stub.calls("PATCH")[-1].name == "dev-applyset"


def test_no_prune_keeps_leftovers(stub, up, edited_profile):
    up(KIND_DEV)
    stub.reset_log()
    up(edited_profile(KIND_DEV, lambda p: p["spec"]["login"].update(replicas=0)), prune=False)
    assert not stub.calls("DELETE")


def test_dry_run_on_an_empty_cluster_writes_nothing(stub, up):
    plan, lines = up(KIND_DEV, dry_run=True)
    assert {r.q("dryRun") for r in stub.calls("PATCH")} == {"All"}
    assert not stub.calls("POST") and not stub.calls("DELETE")
    assert stub.names("/api/v1/namespaces") == []
    assert plan.count("created") == object_count(KIND_DEV) + 3  # + 3 Secrets
    assert any(line.startswith("  StatefulSet/dev-cpu would be created") for line in lines)


def test_dry_run_after_a_change_shows_the_change_and_writes_nothing(stub, up, edited_profile):
    up(KIND_DEV)
    rv = stub.get(f"{APPS}/statefulsets", "dev-cpu")["metadata"]["resourceVersion"]
    stub.reset_log()
    plan, _ = up(edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(tolerations=[{"operator": "Exists"}])),
                 dry_run=True)
    assert {c.ref for c in plan.changes if c.action == "configured"} == {"StatefulSet/dev-cpu"}
    assert {r.q("dryRun") for r in stub.calls("PATCH")} == {"All"}
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu")["metadata"]["resourceVersion"] == rv
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu")["spec"]["replicas"] == 2


def test_diff_prints_a_unified_diff_of_the_change(stub, up, kubeconfig, edited_profile):
    from slurmk8s.actions.diff import run_diff
    from slurmk8s.kube.kubecluster import KubeCluster
    up(KIND_DEV)
    lines: list[str] = []
    run_diff(edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(tolerations=[{"operator": "Exists"}])),
             KubeCluster(kubeconfig), echo=lines.append)
    text = "\n".join(lines)
    assert "--- live/StatefulSet/dev-cpu\n+++ applied/StatefulSet/dev-cpu" in text
    assert "+      tolerations:\n+      - operator: Exists" in text
    assert "ConfigMap/dev-slurm-config" not in text  # unchanged objects stay out of the diff
    assert text.endswith(f"would change: 0 created, 1 configured, {object_count(KIND_DEV) - 1} unchanged, 0 pruned; "
                         "secrets: 0 created, 3 kept")


def test_up_leaves_an_elastic_pools_live_replicas_to_slurm(stub, up, edited_profile):
    up(KIND_DEV)
    resumed = stub.get(f"{APPS}/statefulsets", "dev-cpu")
    resumed["spec"]["replicas"] = 4  # Slurm's ResumeProgram scaled it meanwhile
    stub.seed(f"{APPS}/statefulsets", resumed, managers=("slurmk8s", "python-urllib"))
    plan, _ = up(edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(replicas=1)))
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu")["spec"]["replicas"] == 4
    assert "StatefulSet/dev-cpu" not in {c.ref for c in plan.changes if c.action == "configured"}


def test_up_sets_replicas_of_a_fixed_size_pool(stub, up, edited_profile):
    fixed = edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(replicas=2, minReplicas=2, maxReplicas=2))
    up(fixed)
    bigger = edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(replicas=3, minReplicas=3, maxReplicas=3))
    up(bigger)
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu")["spec"]["replicas"] == 3


def test_conflict_with_another_field_manager_is_one_clear_error(stub, up):
    up(KIND_DEV)
    stub.conflicts[("statefulsets", "dev-cpu")] = "kubectl-edit"
    with pytest.raises(ClusterError) as caught:
        up(KIND_DEV)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("apply StatefulSet/dev-cpu: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas")
    assert "--force-conflicts" in message


def test_force_conflicts_takes_the_fields_over(stub, up):
    up(KIND_DEV)
    stub.conflicts[("statefulsets", "dev-cpu")] = "kubectl-edit"
    stub.reset_log()
    up(KIND_DEV, force_conflicts=True)
    assert {r.q("force") for r in stub.calls("PATCH") if not is_parent(r)} == {"true"}


def test_kinds_outside_the_table_are_found_by_discovery(stub, kubeconfig):
    from slurmk8s.actions.secrets import secret_factory
    from slurmk8s.kube.apply import apply_bundle
    from slurmk8s.kube.client import Access, connect
    stub.discovery["/apis/k8s.cni.cncf.io/v1"] = [
        {"name": "network-attachment-definitions", "kind": "NetworkAttachmentDefinition", "namespaced": True},
        {"name": "network-attachment-definitions/status", "kind": "NetworkAttachmentDefinition", "namespaced": True}]
    nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
           "metadata": {"name": "ib-0", "namespace": "slurm"}, "spec": {"config": "{}"}}
    bundle = bundle_of(KIND_DEV)
    apply_bundle(connect(Access(kubeconfig)), dataclasses.replace(bundle, objects=bundle.objects + (nad,)),
                 secret_factory(bundle))
    assert [r.path for r in stub.calls("PATCH", "ib-0")] == [
        "/apis/k8s.cni.cncf.io/v1/namespaces/slurm/network-attachment-definitions/ib-0"]
    unknown = dict(nad, apiVersion="example.com/v1", kind="Widget")
    with pytest.raises(ClusterError, match=r"does not serve Widget \(example.com/v1\); is its CustomResourceDefinition installed"):
        apply_bundle(connect(Access(kubeconfig)), dataclasses.replace(bundle, objects=bundle.objects + (unknown,)),
                     secret_factory(bundle))


def test_waits_for_slurm_after_applying(stub, up):
    asked = []

    def sinfo(command):
        asked.append(command)
        return "cpu-0|idle|none\ncpu-1|idle|none\ncpu-2|unknown*|none\n"
    _, lines = up(KIND_DEV, exec_fn=sinfo)
    # registration, then the elastic pool's drains (none of them slurmk8s's)
    assert asked == [["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"],
                     ["sinfo", "--noheader", "--Node", "--nodes=cpu-0,cpu-1,cpu-2,cpu-3", "--format=%N|%T|%E"]]
    assert "pods ready: mariadb 1/1, accounting 1/1, controller 1/1, worker 2/2, login 1/1" in lines
    ready = lines.index("cluster dev is ready")
    assert lines[ready - 1] == "slurm: all 2 running node(s) registered with slurmctld"
    # then how to log in, as the Helm chart's NOTES.txt says it
    assert lines[ready + 1:] == [
        "Log in with ssh as root, with a key of spec.login.authorizedKeys (Service dev-login, ClusterIP, port 22):",
        "  kubectl -n slurm port-forward service/dev-login 2222:22", "  ssh -p 2222 root@127.0.0.1",
        "or run Slurm commands in a login pod:", "  kubectl -n slurm exec -it dev-login-0 -c sshd -- sinfo"]


def test_secrets_create_makes_only_secrets_and_the_namespace(stub, kubeconfig):
    from slurmk8s.actions.secrets import run_secrets_create
    from slurmk8s.kube.kubecluster import KubeCluster
    out: list[str] = []
    run_secrets_create(KIND_DEV, KubeCluster(kubeconfig), echo=out.append)
    assert out[-1] == "secrets in slurm: 3 created, 0 kept as they were"
    run_secrets_create(KIND_DEV, KubeCluster(kubeconfig), echo=out.append)
    assert [r.name for r in stub.calls("PATCH")] == ["slurm"]
    assert sorted(r.body["metadata"]["name"] for r in stub.calls("POST")) == ["dev-auth-key", "dev-db-password", "dev-ssh-host-keys"]
    assert out[-1] == "secrets in slurm: 0 created, 3 kept as they were"


def test_status_updates_by_controllers_do_not_count_as_changes(stub, up):
    up(KIND_DEV)
    sts = stub.store[("", "", f"{APPS}/statefulsets")]["dev-cpu"]
    # what the StatefulSet controller does between two runs: a new status and resourceVersion
    sts["status"] = {"observedGeneration": 1, "readyReplicas": 1, "currentRevision": "dev-cpu-5d8f"}
    sts["metadata"]["resourceVersion"] = "999999"
    plan, lines = up(KIND_DEV)
    assert not plan.changed, [c for c in plan.changes if c.action != "unchanged"]
    assert lines[-1].startswith("no changes:")


def test_a_scaledobject_without_keda_installed_is_one_clear_error(stub, up):
    del stub.discovery["/apis/keda.sh/v1alpha1"]
    with pytest.raises(ClusterError, match=r"the cluster does not serve ScaledObject \(keda.sh/v1alpha1\); "
                                           r"is its CustomResourceDefinition installed\?"):
        up(GPU_IB)
