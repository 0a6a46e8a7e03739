"""The scheduling policy on real Slurm: the applied tree, QoS limits, backfill, preemption, fair-share.

Boots tests/lab/profiles/sched-2605.yaml (Slurm 26.05) and applies its accounts with the same
code `up` uses (slurmk8s.actions.accounts). Jobs of the profile's users run as real Unix users:
a site provides them to every pod (in its images or from a directory service), so the fixture
adds the two users to the /etc/passwd of each image the lab runs (useradd --root on the lab's
exported image trees) and removes them afterwards; jobs are submitted with
`runuser -u USER -- sbatch` in the login pod.
Needs root and the project's 26.05 images (.ci/install-lab.sh).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from slurmk8s.actions.accounts import apply_accounts, read_tree
from slurmk8s.profile.files import read_profile
from slurmk8s.lab import lifecycle, rootfs, teardown
from slurmk8s.render import render
from slurmk8s.render.k8s.accounts import desired_tree
from slurmk8s.podside.sacctmgr import plan_accounts

from labenv import lab_unavailable
from waiting import wait_for

PROFILE = Path(__file__).resolve().parent / "profiles/sched-2605.yaml"
USERS = {"sk8s-alice": 61101, "sk8s-bob": 61102}
ALICE, BOB = "sk8s-alice", "sk8s-bob"

pytestmark = pytest.mark.lab


def _add_users(root: Path) -> list[str]:
    """Add the test users to the rootfs (skipping those already there); the names added."""
    added = []
    passwd = (root / "etc/passwd").read_text()
    for name, uid in USERS.items():
        if re.search(rf"^{re.escape(name)}:", passwd, re.M):
            continue
        subprocess.run(["useradd", "--root", str(root), "-M", "-N", "-u", str(uid), "-d", "/tmp", "-s", "/bin/sh", name],
                       check=True, capture_output=True)
        added.append(name)
    return added


@pytest.fixture(scope="module")
def lab():
    """The booted lab with the tree applied and user alice's burst already run (for the fair-share test)."""
    profile = read_profile(PROFILE)
    bundle = render(profile)
    reason = lab_unavailable(bundle.version)
    if reason:
        pytest.skip(reason)
    images = rootfs.resolve({c.image for p in lifecycle.every_pod(bundle) for c in p.all_containers}, bundle.version,
                            log=lambda line: None)
    added = {path: _add_users(path) for path in {i.path for i in images.values()}}
    booted = lifecycle.boot(bundle, log=lambda line: None)
    try:
        booted.applied = apply_accounts(profile, lambda argv: _run3(booted, argv))
        booted.profile = profile
        # alice's burst: two jobs filling partition cpu for 4 s each, so account teama has usage
        booted.burst = [submit(booted, ALICE, "-p", "cpu", "-N2", "-n4", "--wrap", "sleep 4") for _ in range(2)]
        yield booted
    finally:
        left = lifecycle.down(booted.lab_id)
        for root, names in added.items():
            for name in names:
                subprocess.run(["userdel", "--root", str(root), name], capture_output=True)
    assert left == [] and teardown.leftovers(booted.lab_id) == [], left


def _run3(lab, argv: list[str]) -> tuple[int, str, str]:
    done = lab.exec(argv, timeout=60)
    return done.returncode, done.stdout, done.stderr


def sh(lab, *argv: str) -> str:
    """stdout of a client command in the login pod (fails the test on a non-zero exit)."""
    done = lab.exec(list(argv), timeout=60)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr or done.stdout}"
    return done.stdout


def submit(lab, user: str | None, *args: str) -> str:
    """Submit a batch job as user (None: root); its job id."""
    argv = ["sbatch", "--parsable", "--chdir=/tmp", "-o", "/dev/null", *args]
    if user:
        argv = ["runuser", "-u", user, "--"] + argv
    return sh(lab, *argv).strip().split(";")[0]


def job(lab, job_id: str) -> dict[str, str]:
    """scontrol show job as key -> value (single-word values)."""
    out = sh(lab, "scontrol", "-o", "show", "job", job_id)
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def cancel_all(lab) -> None:
    sh(lab, "scancel", "--full", "-u", "root")
    for user in USERS:
        sh(lab, "scancel", "-u", user)
    wait_for("queue empty", lambda: sh(lab, "squeue", "-h", "-o", "%i").split(), until=lambda ids: not ids)


def cpu_partition_jobs(lab) -> list[str]:
    """Running and pending jobs of partition cpu."""
    return sh(lab, "squeue", "-h", "-p", "cpu", "-t", "RUNNING,PENDING", "-o", "%i").split()


# ---------------------------------------------------------------- the tree


def test_tree_was_applied_then_reapplying_changes_nothing(lab):
    assert any(cmd[2:5] == ["add", "account", "teama"] for cmd in lab.applied), lab.applied
    assert apply_accounts(lab.profile, lambda argv: _run3(lab, argv)) == []
    current = read_tree(lambda argv: _run3(lab, argv), lab.profile.name)
    assert plan_accounts(desired_tree(lab.profile), current) == []


def test_slurmdbd_runs_with_the_profiles_purge_settings(lab):
    """spec.accounting.config reaches the real slurmdbd: it reports the settings as it parsed them."""
    config = sh(lab, "sacctmgr", "show", "configuration")
    dbd = {m.group(1).lower(): m.group(2).strip() for m in re.finditer(r"^\s*(\w+)\s*=\s*(.*)$", config, re.M)}
    assert dbd.get("purgejobafter", "").startswith("12 month"), config
    assert dbd.get("purgestepafter", "").startswith("3 month"), config
    assert dbd.get("commitdelay", "").split()[:1] == ["1"], config


def test_sshare_shows_accounts_users_and_shares(lab):
    rows = {tuple(line.split("|")[:2]): line.split("|")[2]
            for line in sh(lab, "sshare", "-P", "-n", "-a", "-o", "Account,User,RawShares").splitlines()}
    rows = {(a.strip(), u.strip()): s for (a, u), s in rows.items()}
    assert rows[("teama", "")] == "50" and rows[("teamb", "")] == "50", rows
    assert ("teama", ALICE) in rows and ("teamb", BOB) in rows, rows
    assert ("teama", BOB) not in rows


def test_sacctmgr_shows_qos_limits_and_preemption(lab):
    qos = {line.split("|")[0]: line.split("|")[1:]
           for line in sh(lab, "sacctmgr", "-P", "-n", "show", "qos", "format=name,priority,preempt,grptres,maxwall").splitlines()}
    assert qos["high"][:2] == ["100", "low"], qos
    assert qos["gpu1"][2:] == ["gres/gpu=1", "00:10:00"], qos


def test_associations_are_enforced(lab):
    # root has no association in teamb, bob none in teama: enforcement refuses both at submit
    for user, account in ((None, "teamb"), (BOB, "teama")):
        argv = ["sbatch", "--chdir=/tmp", "-o", "/dev/null", "-A", account, "--wrap", "true"]
        done = lab.exec((["runuser", "-u", user, "--"] if user else []) + argv)
        assert done.returncode != 0 and "invalid account" in done.stderr.lower(), (user, done.stderr)


# ---------------------------------------------------------------- limits, backfill, preemption


def test_qos_gpu_limit_keeps_the_second_gpu_job_pending(lab):
    first = submit(lab, ALICE, "-p", "gpu", "--qos=gpu1", "--gres=gpu:1", "-t", "5", "--wrap", "sleep 60")
    wait_for("first GPU job running", lambda: job(lab, first), until=lambda j: j["JobState"] == "RUNNING")
    second = submit(lab, ALICE, "-p", "gpu", "--qos=gpu1", "--gres=gpu:1", "-t", "5", "--wrap", "sleep 60")
    reason = wait_for("second GPU job held by the QoS", lambda: job(lab, second),
                      until=lambda j: j["Reason"].startswith("QOSGrp"))["Reason"]
    # the node has a second GPU free: only the QoS limit holds the job
    assert job(lab, second)["JobState"] == "PENDING" and reason == "QOSGrpGRES", reason
    sh(lab, "scancel", first, second)


def test_backfill_starts_a_short_job_without_delaying_the_big_one(lab):
    wait_for("partition cpu idle", lambda: cpu_partition_jobs(lab), until=lambda ids: not ids)
    # The big job's planned start is the running job's time limit (5 min): the short job (1 min) ends
    # well before it even when backfill rounds times to bf_resolution (60 s) and the machine is slow.
    running = submit(lab, None, "-p", "cpu", "-N1", "-n2", "-t", "5", "--wrap", "sleep 300")
    jobs = [running]
    try:
        wait_for("first job running", lambda: job(lab, running), until=lambda j: j["JobState"] == "RUNNING")
        big = submit(lab, None, "-p", "cpu", "-N2", "-n4", "-t", "2", "--wrap", "sleep 5")
        jobs.append(big)
        before = wait_for("backfill plans the big job", lambda: job(lab, big),
                          until=lambda j: j["StartTime"] != "Unknown")["StartTime"]
        short = submit(lab, None, "-p", "cpu", "-N1", "-n2", "-t", "1", "--wrap", "sleep 30")
        jobs.append(short)
        wait_for("short job backfilled", lambda: job(lab, short), until=lambda j: j["JobState"] == "RUNNING")
        big_now = job(lab, big)
        assert big_now["JobState"] == "PENDING", big_now
        assert int(big_now["Priority"]) >= int(job(lab, short)["Priority"])
        assert big_now["StartTime"] == before, (before, big_now["StartTime"])
        assert job(lab, short)["EndTime"] <= before
    finally:
        sh(lab, "scancel", *jobs)  # a failure here must not leave the next test a full partition


def test_high_qos_job_requeues_a_low_qos_job_on_a_full_pool(lab):
    wait_for("partition cpu idle", lambda: cpu_partition_jobs(lab), until=lambda ids: not ids)
    low = submit(lab, ALICE, "-p", "cpu", "-N2", "-n4", "--qos=low", "--wrap", "sleep 300")
    jobs = [low]
    try:
        wait_for("low job running", lambda: job(lab, low), until=lambda j: j["JobState"] == "RUNNING")
        high = submit(lab, ALICE, "-p", "cpu", "-N1", "-n2", "--qos=high", "--wrap", "sleep 300")
        jobs.append(high)
        wait_for("high job running", lambda: job(lab, high), until=lambda j: j["JobState"] == "RUNNING")
        # the preempted job is requeued: it ends (COMPLETING), then waits in the queue again
        victim = wait_for("low job requeued", lambda: job(lab, low), until=lambda j: j["JobState"] == "PENDING")
        assert int(victim["Restarts"]) >= 1, victim
        assert "PREEMPTED" in sh(lab, "sacct", "-n", "-X", "-D", "-j", low, "-o", "State")
    finally:
        sh(lab, "scancel", *jobs)


# ---------------------------------------------------------------- fair-share (last: it waits for alice's usage)


def test_idle_account_goes_first_after_a_burst(lab):
    def shares() -> dict[str, tuple[float, float]]:
        """user -> (RawUsage, FairShare factor)."""
        out = sh(lab, "sshare", "-P", "-n", "-a", "-A", "teama,teamb", "-o", "User,RawUsage,FairShare")
        return {u.strip(): (float(raw), float(fs or 0)) for u, raw, fs in (line.split("|") for line in out.splitlines()) if u.strip()}
    # RawUsage grows at once; the fair-share factors are computed by the decay thread once per
    # PriorityCalcPeriod (1 minute here), so wait for the first computation that ranks alice below bob
    seen = wait_for("fair-share ranks idle bob above alice", deadline_s=150, every_s=2,
                    observe=shares, until=lambda f: f[BOB][1] > f[ALICE][1] > 0)
    assert seen[ALICE][0] > seen[BOB][0], seen
    wait_for("partition cpu idle", lambda: cpu_partition_jobs(lab), until=lambda ids: not ids)
    blocker = submit(lab, None, "-p", "cpu", "-N2", "-n4", "--wrap", "sleep 300")
    wait_for("blocker running", lambda: job(lab, blocker), until=lambda j: j["JobState"] == "RUNNING")
    a_job = submit(lab, ALICE, "-p", "cpu", "-N2", "-n4", "--wrap", "sleep 3")
    b_job = submit(lab, BOB, "-p", "cpu", "-N2", "-n4", "--wrap", "sleep 3")
    prio = {line.split()[0]: (int(line.split()[1]), float(line.split()[2]))
            for line in sh(lab, "sprio", "-h", "-o", "%i %Y %F").splitlines()}
    assert prio[b_job][1] > prio[a_job][1] and prio[b_job][0] > prio[a_job][0], prio
    sh(lab, "scancel", blocker)
    wait_for("bob's job started", lambda: job(lab, b_job), until=lambda j: j["JobState"] in ("RUNNING", "COMPLETED"))
    assert job(lab, a_job)["JobState"] == "PENDING"
    wait_for("alice's job done", lambda: job(lab, a_job), until=lambda j: j["JobState"] == "COMPLETED")
    starts = {j: job(lab, j)["StartTime"] for j in (a_job, b_job)}
    assert starts[b_job] < starts[a_job], starts
