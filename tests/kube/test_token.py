"""`slurmk8s token USER` (issue 27, item 4): slurmctld mints the JWT (`scontrol token` in its pod)."""

from __future__ import annotations

from conftest import GPU_IB, KIND_DEV
from stubcluster import stub_cluster
from test_cli import slurmk8s

from slurmk8s.actions.token import run_token
from slurmk8s.errors import ClusterError, UsageError

import pytest

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdW4iOiJhZGEifQ.c2ln"


def test_prints_what_scontrol_token_prints_for_the_user_and_lifespan(stub, kubeconfig):
    asked: list[list[str]] = []

    def scontrol(argv):
        asked.append(argv)
        return f"SLURM_JWT={JWT}\n"
    out: list[str] = []
    notes: list[str] = []
    cluster = stub_cluster(kubeconfig, scontrol)
    assert run_token(GPU_IB, cluster, "ada", 5400, echo=out.append, note=notes.append) == JWT
    assert asked == [["scontrol", "token", "username=ada", "lifespan=5400"]]
    assert out == [f"SLURM_JWT={JWT}"]  # stdout alone: `export $(slurmk8s token ...)`
    assert notes[0].startswith("cluster research in namespace hpc (context stub")
    assert cluster.slurm_bundles == ["research"]


@pytest.mark.parametrize(("user", "message"), [
    ("lin2", "user 'lin2' is not declared in"),
    ("Ada", "'Ada' is not a login name"),
    ("ada;id", "'ada;id' is not a login name"),
])
def test_a_user_slurmctld_could_not_resolve_is_refused_before_the_cluster_is_asked(stub, kubeconfig, user, message):
    cluster = stub_cluster(kubeconfig, lambda argv: pytest.fail(f"asked {argv}"))
    with pytest.raises(UsageError, match=message):
        run_token(GPU_IB, cluster, user, 3600, echo=print, note=print)
    assert not stub.requests


def test_without_slurmrestd_there_is_no_token_to_mint(stub, kubeconfig):
    run = slurmk8s("token", KIND_DEV, "root", "--kubeconfig", kubeconfig)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"{KIND_DEV}: spec.restapi.enabled is false: slurmctld takes no JWT without slurmrestd (AuthAltTypes=auth/jwt); "
        "enable it and run `slurmk8s up`"]


def test_an_answer_that_is_no_token_is_a_cluster_error(stub, kubeconfig):
    cluster = stub_cluster(kubeconfig, lambda argv: "slurm_auth_token: Invalid user\n")
    with pytest.raises(ClusterError, match=r"cluster research: scontrol token answered 'slurm_auth_token: Invalid user'"):
        run_token(GPU_IB, cluster, "ada", 3600, echo=print, note=print)


def test_cli_lifespan_takes_a_duration_and_failure_is_one_line(stub, kubeconfig):
    """The stub serves no exec: the one line names the pod and the command."""
    run = slurmk8s("token", GPU_IB, "ada", "--lifespan", "90m", "--kubeconfig", kubeconfig)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    (line,) = [ln for ln in run.stderr.strip().splitlines() if not ln.startswith("cluster research in namespace")]
    assert "scontrol token username=ada lifespan=5400" in line and "pod hpc/research-controller-0" in line
    bad = slurmk8s("token", GPU_IB, "ada", "--lifespan", "soon", "--kubeconfig", kubeconfig)
    assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr
