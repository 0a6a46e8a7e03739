"""Objects someone else made are never taken over or deleted (issue 24 item 1, robustness N1).

An existing object that carries neither this cluster's instance label nor its ApplySet membership
is refused by `up` before any write (as helm's "invalid ownership metadata"), unless `--adopt
KIND/NAME` hands it over on purpose. Secrets and a Namespace someone made are used as they are.
"""

from __future__ import annotations

import pytest

from conftest import KIND_DEV
from slurmk8s.errors import ClusterError, UsageError

NS = "/api/v1/namespaces/slurm"
CONFIGMAPS, CLAIMS, SECRETS = f"{NS}/configmaps", f"{NS}/persistentvolumeclaims", f"{NS}/secrets"
THEIRS = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dev-login-config"},
          "data": {"team-b": "precious"}}
THEIR_CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "dev-home"},
               "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Ti"}}}}


def writes(stub):
    return [(r.method, r.path) for r in stub.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")
            and r.q("dryRun") is None]


def down(kubeconfig, profile=KIND_DEV, **options):
    from slurmk8s.actions.down import run_down
    from slurmk8s.kube.kubecluster import KubeCluster
    out: list[str] = []
    run_down(profile, KubeCluster(kubeconfig), echo=out.append, interactive=False, wait=False, **options)
    return out


@pytest.fixture
def with_home(edited_profile):
    """kind-dev with a home volume on a claim `up` creates: dev-home."""
    return edited_profile(KIND_DEV, lambda d: d["spec"].update(
        volumes=[{"name": "home", "mountPath": "/home", "claim": {"size": "1Gi"}}]))


def test_up_refuses_a_configmap_someone_else_made_and_writes_nothing(stub, up):
    stub.seed(f"/api/v1/namespaces", {"metadata": {"name": "slurm"}}, managers=("kubectl-create",))
    stub.seed(CONFIGMAPS, THEIRS, managers=("kubectl-create",))
    before = stub.get(CONFIGMAPS, "dev-login-config")
    with pytest.raises(ClusterError) as refused:
        up(KIND_DEV)
    lines = str(refused.value).splitlines()
    assert lines[0] == ("ConfigMap/dev-login-config exists in namespace slurm but was not created by slurmk8s for "
                        "cluster dev: refusing to take it over; to hand it to slurmk8s on purpose (`down` then "
                        "deletes it), add --adopt ConfigMap/dev-login-config")
    assert lines[-1].startswith("nothing was written")
    assert writes(stub) == []
    assert stub.get(CONFIGMAPS, "dev-login-config") == before


def test_diff_reports_the_foreign_object_as_a_conflict(stub, kubeconfig):
    from slurmk8s.actions.diff import run_diff
    from slurmk8s.kube.kubecluster import KubeCluster
    stub.seed(CONFIGMAPS, THEIRS, managers=("kubectl-create",))
    stub.seed(f"/api/v1/namespaces", {"metadata": {"name": "slurm"}}, managers=("kubectl-create",))
    with pytest.raises(ClusterError, match="ConfigMap/dev-login-config exists in namespace slurm but was not created"):
        run_diff(KIND_DEV, KubeCluster(kubeconfig), echo=lambda line: None)
    assert writes(stub) == []


def test_adopt_takes_it_over_on_purpose_and_down_then_deletes_it(stub, up, kubeconfig):
    stub.seed(CONFIGMAPS, THEIRS, managers=("kubectl-create",))
    _, lines = up(KIND_DEV, adopt=("configmap/dev-login-config",))  # the kind in any case, as kubectl takes it
    assert "  ConfigMap/dev-login-config configured: adopted on purpose (--adopt): slurmk8s manages it from now " \
           "on, and `down` deletes it" in lines
    assert stub.get(CONFIGMAPS, "dev-login-config")["metadata"]["labels"]["app.kubernetes.io/instance"] == "dev"
    down(kubeconfig)
    assert "dev-login-config" not in stub.names(CONFIGMAPS)


def test_adopt_of_an_object_the_profile_does_not_apply_is_a_usage_error(stub, up):
    with pytest.raises(UsageError, match=r"--adopt ConfigMap/nope: the profile applies no such object"):
        up(KIND_DEV, adopt=("ConfigMap/nope",))
    with pytest.raises(UsageError, match="an existing Secret is always kept"):
        up(KIND_DEV, adopt=("Secret/dev-db-password",))
    assert writes(stub) == []


def test_a_foreign_claim_is_neither_resized_nor_deleted_with_delete_data(stub, up, kubeconfig, with_home):
    stub.seed(CLAIMS, THEIR_CLAIM, managers=("kubectl-create",))
    with pytest.raises(ClusterError, match="PersistentVolumeClaim/dev-home exists in namespace slurm but was not"):
        up(with_home)
    assert stub.get(CLAIMS, "dev-home")["spec"]["resources"]["requests"]["storage"] == "5Ti"
    assert writes(stub) == []
    # Without the volume the profile applies no dev-home: up goes through, and down --delete-data leaves it.
    up(KIND_DEV)
    stub.seed(CONFIGMAPS, {**THEIRS, "metadata": {"name": "dev-notes"}}, managers=("kubectl-create",))
    out = down(kubeconfig, delete_data=True, yes=True)
    assert {"dev-home"} <= set(stub.names(CLAIMS)) and "dev-notes" in stub.names(CONFIGMAPS)
    assert stub.get(CLAIMS, "dev-home")["spec"]["resources"]["requests"]["storage"] == "5Ti"
    assert not [line for line in out if "dev-home" in line and "deleted" in line]


def test_up_adopt_on_the_command_line(stub, kubeconfig):
    from test_safety import slurmk8s_run
    stub.seed(CONFIGMAPS, THEIRS, managers=("kubectl-create",))
    refused = slurmk8s_run("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "add --adopt ConfigMap/dev-login-config" in refused.stderr
    adopted = slurmk8s_run("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait",
                           "--adopt", "ConfigMap/dev-login-config", "--adopt", "ConfigMap/dev-busy")
    assert adopted.returncode == 0, adopted.stderr
    assert "ConfigMap/dev-login-config configured: adopted on purpose" in adopted.stdout


def test_a_foreign_secret_is_used_as_is_and_up_says_so(stub, up, kubeconfig):
    theirs = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "dev-db-password"},
              "data": {"password": "dGhlaXJz"}}
    stub.seed(SECRETS, theirs, managers=("kubectl-create",))
    _, lines = up(KIND_DEV)
    assert "  Secret/dev-db-password kept: exists, not created by slurmk8s, used as is (never written, never " \
           "deleted)" in lines
    assert stub.get(SECRETS, "dev-db-password")["data"] == theirs["data"]
    down(kubeconfig, delete_data=True, yes=True)
    assert "dev-db-password" in stub.names(SECRETS)


def test_a_namespace_someone_made_is_used_and_not_relabelled(stub, up):
    stub.seed("/api/v1/namespaces", {"metadata": {"name": "slurm", "labels": {"team": "b"}}},
              managers=("kubectl-create",))
    _, lines = up(KIND_DEV)
    assert "  Namespace/slurm kept: exists, not created by slurmk8s, used as is (never written, never deleted)" in lines
    assert stub.get("/api/v1/namespaces", "slurm")["metadata"]["labels"] == {"team": "b"}
    assert not [w for w in writes(stub) if w[1] == "/api/v1/namespaces/slurm"]


def test_down_of_a_namespace_that_does_not_exist_keeps_nothing(stub, kubeconfig):
    """Issue 24 item 27: no `kept: Namespace/...` for a namespace that is not there."""
    out = down(kubeconfig)
    assert not [line for line in out if "Namespace/slurm" in line], out


def test_a_cluster_scoped_object_is_named_without_a_namespace(stub, up):
    stub.seed("/apis/rbac.authorization.k8s.io/v1/clusterroles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "slurmk8s-slurm-dev-nodes"}, "rules": []}, managers=("kubectl-create",))
    with pytest.raises(ClusterError) as refused:
        up(KIND_DEV)
    assert str(refused.value).startswith("ClusterRole/slurmk8s-slurm-dev-nodes exists (cluster-scoped) but was not "
                                         "created by slurmk8s for cluster dev")
    assert writes(stub) == []
