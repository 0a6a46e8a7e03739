"""`lab verify`'s smoke suite where the default partition holds an elastic pool (issue 19), on 22.05,
24.11 and 26.05: every check passes, each job ran on the nodes its check named, and only the resume
check resumed anything. Slurm's own records (sinfo, scontrol, sacct) are the evidence.

The profiles: tests/lab/profiles/multi-partition-*.yaml (partition gpu, the default: pool a100 with
2 of 0..4 running; partition cpu: pool cpu with 2 of 2..3 running).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.lab import verify

import slurmfacts
from labenv import boot_or_skip, down_and_check_clean
from waiting import wait_for

HERE = Path(__file__).resolve().parent
PROFILES = {v: HERE / f"profiles/multi-partition-{v.replace('.', '')}.yaml" for v in ("22.05", "24.11", "26.05")}
# What the suite must run, and nothing else: jobs on the running nodes of each partition, then one resume per pool.
EXPECTED = {
    "srun -p gpu -w a100-0,a100-1 -N2 hostname", "srun -p cpu -w cpu-0,cpu-1 -N2 hostname",
    "sbatch job completes in partition gpu", "sbatch job completes in partition cpu",
    "nodes idle in sinfo", "GPU isolation (--gres=gpu:1)", "sacct shows jobs with TRES",
    "pending job survives slurmctld restart",
    "resume of powered-down a100-2 (srun -p gpu -w a100-2 hostname)",
    "resume of powered-down cpu-2 (srun -p cpu -w cpu-2 hostname)",
}
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module", params=sorted(PROFILES), ids=sorted(PROFILES))
def verified(request):
    """A booted lab per Slurm version, Slurm's node states before the suite, and the suite's results."""
    lab, bundle = boot_or_skip(PROFILES[request.param])
    try:
        before = slurmfacts.node_states(lab)
        results = verify.run_checks(lab, bundle)
        yield lab, bundle, before, results
    finally:
        down_and_check_clean(lab)


def test_every_check_passes_and_none_is_skipped(verified):
    lab, bundle, before, results = verified
    assert [str(r) for r in results if not r.ok or not r.applies] == []
    assert {r.name for r in results} == EXPECTED


def powered_down(bundle, *nodes: str) -> dict[str, str]:
    """How sinfo shows powered-down nodes: idle~, except that 22.05 hides powered-down CLOUD nodes."""
    return {} if bundle.version == "22.05" else {n: "idle~" for n in nodes}


def test_before_the_suite_only_the_running_members_were_up(verified):
    lab, bundle, before, results = verified
    assert before == {"a100-0": "idle", "a100-1": "idle", "cpu-0": "idle", "cpu-1": "idle",
                      **powered_down(bundle, "a100-2", "a100-3", "cpu-2")}, before


def test_jobs_ran_only_where_their_checks_said(verified):
    lab, bundle, before, results = verified
    # 2 srun + 2 sbatch + the GPU step + 2 resumes; the held job of the restart check is never eligible
    jobs = wait_for("the suite's 7 jobs that ran, final in sacct", lambda: slurmfacts.jobs(lab),
                    until=lambda j: len(j) == 7 and all(r["State"] in FINAL for r in j.values()))
    ran = {job: (r["Partition"], tuple(slurmfacts.hostnames(lab, r["NodeList"]))) for job, r in jobs.items()}
    assert sorted(ran.values()) == sorted([
        ("cpu", ("cpu-0", "cpu-1")), ("cpu", ("cpu-0", "cpu-1")), ("cpu", ("cpu-2",)),
        ("gpu", ("a100-0",)), ("gpu", ("a100-0", "a100-1")), ("gpu", ("a100-0", "a100-1")), ("gpu", ("a100-2",)),
    ]), ran
    assert {(r["State"], r["ExitCode"]) for r in jobs.values()} == {("COMPLETED", "0:0")}, jobs
    held = next(r for r in results if r.name == "pending job survives slurmctld restart").detail.split()[1]
    record = slurmfacts.jobs(lab, held)[held]
    assert (record["NodeList"], record["State"].split()[0]) == ("None assigned", "CANCELLED"), record


def test_the_resume_check_scaled_each_elastic_pool_once_and_slurm_runs_the_new_nodes(verified):
    lab, bundle, before, results = verified
    patches = [c for c in lab.api.calls if c[0] == "patch"]
    assert patches == [("patch", f"{bundle.cluster}-a100", 200), ("patch", f"{bundle.cluster}-cpu", 200)], lab.api.calls
    assert lab.scale_of(f"{bundle.cluster}-a100") == (3, 3) and lab.scale_of(f"{bundle.cluster}-cpu") == (3, 3)
    for node in ("a100-2", "cpu-2"):
        info = slurmfacts.node(lab, node)
        assert info["State"].split("+")[0] == "IDLE" and "POWERED_DOWN" not in info["State"], info
        assert info["NodeHostName"] == f"{bundle.cluster}-{node}", info
    states = slurmfacts.node_states(lab)
    assert {n: s for n, s in states.items() if n == "a100-3"} == powered_down(bundle, "a100-3"), states

