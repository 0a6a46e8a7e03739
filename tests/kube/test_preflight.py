"""Preflight before any write (issue 16): every kind served, every Secret the pods read present.

Before: a missing KEDA CRD stopped `up` after five StatefulSets were created, and a missing external
database Secret left slurmdbd in CreateContainerConfigError. Now both fail in one line, exit 1,
and the stub's request log shows that nothing was written.
"""

from __future__ import annotations

import pytest

from conftest import GPU_IB, KIND_DEV
from test_cli import one_line_error, slurmk8s

from slurmk8s.errors import ClusterError

WRITES = ("POST", "PATCH", "PUT", "DELETE")


def writes(stub) -> list:
    return [f"{r.method} {r.path}" for r in stub.requests if r.method in WRITES]


def external_db(profile: dict) -> None:
    profile["spec"]["accounting"] = {"database": {"external": {
        "host": "db.example", "passwordSecret": {"name": "slurm-db", "key": "password"}}}}


def test_a_missing_crd_stops_up_before_anything_is_written(stub, kubeconfig):
    stub.discovery.pop("/apis/keda.sh/v1alpha1")
    line = one_line_error(slurmk8s("up", GPU_IB, "--kubeconfig", kubeconfig, "--no-wait"))
    assert line == ("the cluster does not serve ScaledObject (keda.sh/v1alpha1); is its CustomResourceDefinition "
                    "installed?")
    assert writes(stub) == []


def test_a_servicemonitor_needs_the_prometheus_operators_crd(stub, kubeconfig):
    stub.discovery.pop("/apis/monitoring.coreos.com/v1")
    line = one_line_error(slurmk8s("up", GPU_IB, "--kubeconfig", kubeconfig, "--no-wait"))
    assert line == ("the cluster does not serve ServiceMonitor (monitoring.coreos.com/v1); is its "
                    "CustomResourceDefinition installed?")
    assert writes(stub) == []


def test_a_missing_crd_fails_the_dry_run_too(stub, up):
    stub.discovery.pop("/apis/keda.sh/v1alpha1")
    with pytest.raises(ClusterError, match="does not serve ScaledObject"):
        up(GPU_IB, dry_run=True)
    assert writes(stub) == []


def test_a_missing_external_database_secret_is_named(stub, kubeconfig, edited_profile):
    profile = edited_profile(KIND_DEV, external_db)
    line = one_line_error(slurmk8s("up", profile, "--kubeconfig", kubeconfig, "--no-wait"))
    assert line == ("Secret/slurm-db in namespace slurm does not exist, and the profile's pods need it (keys: "
                    "password): create it first, e.g. kubectl -n slurm create secret generic slurm-db "
                    "--from-literal=password=...")
    assert writes(stub) == []


def test_a_secret_without_the_key_is_named(stub, up, edited_profile):
    stub.seed("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "slurm"}})
    stub.seed("/api/v1/namespaces/slurm/secrets", {"kind": "Secret", "metadata": {"name": "slurm-db"},
                                                   "data": {"pass": "eA=="}}, managers=("kubectl-create",))
    stub.reset_log()
    with pytest.raises(ClusterError, match=r"^Secret/slurm-db in namespace slurm has no key password, which the "
                                           r"profile's pods read \(it has: pass\)$"):
        up(edited_profile(KIND_DEV, external_db))
    assert writes(stub) == []


def test_with_the_secret_in_place_up_goes_ahead(stub, up, edited_profile):
    stub.seed("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "slurm"}})
    stub.seed("/api/v1/namespaces/slurm/secrets", {"kind": "Secret", "metadata": {"name": "slurm-db"},
                                                   "data": {"password": "eA=="}}, managers=("kubectl-create",))
    plan, _ = up(edited_profile(KIND_DEV, external_db))
    assert plan.count("created") > 0
    # the user's Secret is read, never written or taken into the inventory
    assert not [r for r in stub.requests if r.method in WRITES and r.path.endswith("/secrets/slurm-db")]


def test_the_bundle_names_exactly_the_secrets_up_does_not_create(edited_profile):
    from slurmk8s.actions.render import render_file
    assert render_file(GPU_IB).referenced_secrets() == {}  # up creates all three
    assert render_file(edited_profile(KIND_DEV, external_db)).referenced_secrets() == {"slurm-db": ("password",)}


def test_a_cluster_older_than_1_30_is_told_how_to_run_without_the_busy_label_policy(stub, kubeconfig, edited_profile):
    """ValidatingAdmissionPolicy is GA from 1.30 (issue 26 item 3): an older API server does not serve it."""
    stub.discovery.pop("/apis/admissionregistration.k8s.io/v1")
    line = one_line_error(slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait"))
    assert line == ("the cluster does not serve ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): Kubernetes "
                    "1.30 or later serves it; on an older cluster set spec.admissionPolicy.enabled: false")
    assert writes(stub) == []
    off = edited_profile(KIND_DEV, lambda p: p["spec"].update(admissionPolicy={"enabled": False}))
    done = slurmk8s("up", off, "--kubeconfig", kubeconfig, "--no-wait")
    assert done.returncode == 0, done.stderr
    assert writes(stub)  # it did apply
    assert not [w for w in writes(stub) if "admissionregistration" in w]
