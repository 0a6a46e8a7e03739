"""`down` at the HTTP level: workloads go, PVCs and Secrets stay unless --delete-data is confirmed."""

from __future__ import annotations

import pytest

from conftest import KIND_DEV, object_count
from slurmk8s.errors import UsageError

NS = "/api/v1/namespaces/slurm"


@pytest.fixture
def running(stub, up):
    """kind-dev up, plus the claims its StatefulSets made and an unrelated claim of the same instance."""
    up(KIND_DEV)
    claims = f"{NS}/persistentvolumeclaims"
    ctl = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/component": "controller"}
    db = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/component": "mariadb"}
    stub.seed(claims, {"kind": "PersistentVolumeClaim", "metadata": {"name": "statesave-dev-controller-0", "labels": ctl}},
              managers=("kube-controller-manager",))
    stub.seed(claims, {"kind": "PersistentVolumeClaim", "metadata": {"name": "data-dev-mariadb-0", "labels": db}},
              managers=("kube-controller-manager",))
    stub.seed(claims, {"kind": "PersistentVolumeClaim", "metadata": {"name": "scratch", "labels": ctl}},
              managers=("kubectl",))
    stub.reset_log()
    return stub


def down(kubeconfig, **options):
    from slurmk8s.actions.down import run_down
    from slurmk8s.kube.kubecluster import KubeCluster
    out: list[str] = []
    options.setdefault("interactive", False)
    plan = run_down(KIND_DEV, KubeCluster(kubeconfig), echo=out.append, **options)
    return plan, out


def deleted_paths(stub):
    return [r.path for r in stub.calls("DELETE")]


def test_down_removes_workloads_and_keeps_claims_secrets_and_namespace(running, kubeconfig):
    plan, out = down(kubeconfig)
    paths = deleted_paths(running)
    assert len(paths) == object_count(KIND_DEV) - 1  # every applied object but the Namespace
    # the cluster-scoped ones too (the cordon check's node reader)
    assert {"/apis/rbac.authorization.k8s.io/v1/clusterroles/slurmk8s-slurm-dev-nodes",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/slurmk8s-slurm-dev-nodes"} <= set(paths)
    assert not [p for p in paths if "/secrets/" in p or "/persistentvolumeclaims/" in p]
    assert "/api/v1/namespaces/slurm" not in paths
    assert running.names(f"{NS}/secrets") == ["dev-auth-key", "dev-db-password", "dev-ssh-host-keys"]
    assert running.names(f"{NS}/pods") == []
    assert out[-1] == ("kept: Namespace/slurm, PersistentVolumeClaim/data-dev-mariadb-0, "
                       "PersistentVolumeClaim/statesave-dev-controller-0, Secret/dev-auth-key, "
                       "Secret/dev-db-password, Secret/dev-ssh-host-keys (--delete-data removes the PVCs and Secrets)")


def test_down_deletes_workloads_first_in_reverse_dependency_order(running, kubeconfig):
    down(kubeconfig)
    deletes = running.calls("DELETE")
    sts = [r for r in deletes if "/statefulsets/" in r.path]
    rest = [r for r in deletes if "/statefulsets/" not in r.path]
    assert max(r.ended for r in sts) <= min(r.started for r in rest)
    login = next(r for r in sts if r.name == "dev-login")
    database = next(r for r in sts if r.name == "dev-mariadb")
    assert login.ended <= database.started
    service_accounts = [r for r in deletes if "/serviceaccounts/" in r.path]
    assert min(r.started for r in service_accounts) >= max(r.ended for r in deletes if "/configmaps/" in r.path)


def test_delete_data_needs_yes_when_not_interactive(running, kubeconfig):
    with pytest.raises(UsageError, match="add --yes to confirm"):
        down(kubeconfig, delete_data=True)
    assert not running.calls("DELETE")


def test_delete_data_declined_at_the_prompt_deletes_nothing(running, kubeconfig):
    questions = []
    with pytest.raises(UsageError, match="not confirmed"):
        down(kubeconfig, delete_data=True, interactive=True, ask=lambda q: questions.append(q) or False)
    assert "cluster dev in namespace slurm" in questions[0]
    assert not running.calls("DELETE")


def test_delete_data_with_yes_removes_our_claims_and_secrets_only(running, kubeconfig):
    _, out = down(kubeconfig, delete_data=True, yes=True)
    data = sorted(r.name for r in running.calls("DELETE") if "/secrets/" in r.path or "/persistentvolumeclaims/" in r.path)
    assert data == ["data-dev-mariadb-0", "dev-auth-key", "dev-db-password", "dev-ssh-host-keys", "statesave-dev-controller-0"]
    assert running.names(f"{NS}/persistentvolumeclaims") == ["scratch"]
    assert out[-1] == "kept: Namespace/slurm, PersistentVolumeClaim/scratch (not created by slurmk8s)"


def test_down_dry_run_deletes_nothing(running, kubeconfig):
    plan, out = down(kubeconfig, dry_run=True)
    assert {r.q("dryRun") for r in running.calls("DELETE")} == {"All"}
    assert len(running.names("/apis/apps/v1/namespaces/slurm/statefulsets")) == 5
    assert out[-2] == f"dry run: would delete {object_count(KIND_DEV) - 1} object(s) of cluster dev"


def test_down_leaves_objects_that_are_not_ours(running, kubeconfig):
    labels = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/managed-by": "slurmk8s"}
    running.seed(f"{NS}/configmaps", {"kind": "ConfigMap", "metadata": {"name": "hand-made", "labels": labels}},
                 managers=("kubectl-create",))
    down(kubeconfig)
    assert "hand-made" in running.names(f"{NS}/configmaps")
    # the ApplySet parent stays with the data it lists (the Namespace, claims, Secrets)
    assert running.names(f"{NS}/configmaps") == ["dev-applyset", "hand-made"]
    parent = running.get(f"{NS}/configmaps", "dev-applyset")
    assert parent["metadata"]["annotations"]["applyset.kubernetes.io/contains-group-kinds"] == "Namespace,Secret"


def test_down_waits_for_pods_to_terminate(running, kubeconfig):
    from apistub import make_pod
    from slurmk8s.profile.files import read_profile
    from slurmk8s.errors import ClusterError
    from slurmk8s.kube.client import Access, connect
    from slurmk8s.kube.teardown import Teardown
    from slurmk8s.render import render
    running.seed(f"{NS}/pods", make_pod("dev-debug-shell", {"app.kubernetes.io/instance": "dev",
                                                      "app.kubernetes.io/managed-by": "slurmk8s"}, ready=True))
    now = [0.0]
    td = Teardown(connect(Access(kubeconfig)), render(read_profile(KIND_DEV)))
    td.delete(td.workloads_and_plumbing())
    # the StatefulSets' own pods went with them; a pod nobody deletes makes the wait time out
    with pytest.raises(ClusterError, match="after 10 s waiting for pods to terminate: dev-debug-shell$"):
        td.wait_for_pods_gone(10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert now[0] >= 10


def test_down_does_not_wait_for_finished_hook_pods(running, kubeconfig):
    """A GitOps hook Job's pod (Succeeded or Failed) carries the cluster's labels but never terminates and is
    not down's to delete: the wait ends without it (on kind it held `down` for its whole --timeout)."""
    from apistub import make_pod
    from slurmk8s.profile.files import read_profile
    from slurmk8s.kube.client import Access, connect
    from slurmk8s.kube.teardown import Teardown
    from slurmk8s.render import render
    labels = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/managed-by": "slurmk8s"}
    for name, phase in (("dev-rollout-520864d0-d6qkr", "Succeeded"), ("dev-upgrade-check-b21dd49f-6fd7g", "Failed")):
        pod = make_pod(name, labels, ready=False)
        pod["status"]["phase"] = phase
        running.seed(f"{NS}/pods", pod)
    now = [0.0]
    td = Teardown(connect(Access(kubeconfig)), render(read_profile(KIND_DEV)))
    td.delete(td.workloads_and_plumbing())
    td.wait_for_pods_gone(10, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert now[0] == 0  # returned at the first look
