"""`slurmk8s accounts apply` (issue 16): the account tree for clusters a GitOps tool deployed, through slurmctld's pod."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import GPU_IB, KIND_DEV
from stubcluster import stub_cluster
from test_cli import one_line_error, slurmk8s

from slurmk8s.actions.accounts import run_accounts_apply
from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.render.k8s.accounts import desired_tree
from slurmk8s.podside.sacctmgr import fresh_tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "render"))
from test_accounts import FakeSacctmgr  # noqa: E402


def exec_of(db):
    def run(argv):
        code, out, err = db.run(argv)
        if code:
            raise ClusterError(err)
        return out
    return run


def test_applies_the_tree_then_finds_nothing_to_do(stub, kubeconfig):
    profile = read_profile(GPU_IB)
    db = FakeSacctmgr(fresh_tree(profile.name))
    lines: list[str] = []
    done = run_accounts_apply(GPU_IB, stub_cluster(kubeconfig, exec_of(db)), echo=lines.append)
    assert done and done == db.commands
    assert lines[0].startswith("cluster research in namespace hpc (context stub")
    assert lines[-1] == f"accounts: {len(done)} sacctmgr command(s) applied"
    again: list[str] = []
    assert run_accounts_apply(GPU_IB, stub_cluster(kubeconfig, exec_of(db)), echo=again.append) == []
    assert again[-1] == "accounts: cluster research already has the profile's tree"
    assert not stub.calls("PATCH") and not stub.calls("POST")  # it reads the cluster, writes nothing to it


def test_prune_deletes_what_the_profile_dropped_but_not_busy_accounts(stub, kubeconfig):
    profile = read_profile(GPU_IB)
    current = desired_tree(profile)
    current.accounts["old"] = type(current.accounts["physics"])("old", "root", 1, ("normal",), "")
    current.accounts["running"] = type(current.accounts["physics"])("running", "root", 1, ("normal",), "")
    db = FakeSacctmgr(current, busy=("running",))
    done = run_accounts_apply(GPU_IB, stub_cluster(kubeconfig, exec_of(db)), delete=True, echo=lambda line: None)
    assert ["sacctmgr", "-i", "delete", "account", "where", "name=old", "cluster=research"] in done
    assert "old" not in db.accounts and set(db.accounts) == set(desired_tree(profile).accounts) | {"running"}


def test_cli_without_a_tree_says_so_and_exits_0(stub, kubeconfig):
    run = slurmk8s("accounts", "apply", KIND_DEV, "--kubeconfig", kubeconfig)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("nothing to apply: it has no spec.scheduling accounts, users or QoS")


def test_cli_failure_is_one_line_and_exits_1(stub, kubeconfig):
    """The stub serves no exec: the error names the pod and the command, without a traceback."""
    line = one_line_error(slurmk8s("accounts", "apply", GPU_IB, "--kubeconfig", kubeconfig))
    assert line.startswith("`sacctmgr -P -n show assoc cluster=research")
    assert "pod hpc/research-controller-0" in line
