"""The pod lab on rendered bundles: real slurmctld/slurmd/slurmdbd/MariaDB, real jobs.

Profiles: kind-dev (26.05, auth/slurm), legacy-munge (22.05, munge), and a GPU profile on
24.11 (auth/slurm). Needs root and the project's images (.ci/install-lab.sh).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.lab import lifecycle, sandbox, verify
from slurmk8s.lab.errors import LabUnavailable

import slurmfacts
from labenv import boot_or_skip, down_and_check_clean
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "kind-dev-26.05": ROOT / "profiles/kind-dev.yaml",
    "legacy-munge-22.05": ROOT / "profiles/legacy-munge.yaml",
    "gpu-24.11": ROOT / "tests/lab/profiles/gpu-2411.yaml",
}

pytestmark = pytest.mark.lab
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture(scope="module", params=sorted(PROFILES), ids=sorted(PROFILES))
def booted(request):
    """A booted lab per profile (with its profile path), torn down (and checked clean) afterwards."""
    lab, bundle = boot_or_skip(PROFILES[request.param])
    lab.profile_path = PROFILES[request.param]
    yield lab, bundle
    down_and_check_clean(lab)


def running_pods(lab) -> dict[str, object]:
    """Slurm node -> its running pool pod (what the lab runs, not what verify reads)."""
    return {p.slurm_node: p for p in lab.pods if p.pool}


def job_of(check) -> str:
    """The job id a verify check reports in its detail ("job 12 COMPLETED")."""
    return re.search(r"\bjob (\d+)\b", check.detail).group(1)


def test_every_running_pool_member_is_idle_with_rendered_partitions_features_gres(booted):
    lab, bundle = booted
    check = verify.check_nodes_idle(lab, bundle)
    assert check.ok, check.detail
    # Slurm's own view against the profile: each running pod is an idle node on its pod's host,
    # with the pool's features and GPUs; every other node is powered down.
    pools = {p.name: p for p in read_profile(lab.profile_path).pools}
    pods = running_pods(lab)
    for name, pod in pods.items():
        info, pool = slurmfacts.node(lab, name), pools[pod.pool]
        assert info["State"].split("+")[0] == "IDLE" and "POWERED_DOWN" not in info["State"], info
        assert info["NodeHostName"] == pod.hostname, info
        assert info["AvailableFeatures"] == (",".join(pool.features) or "(null)"), info
        gres = f"gpu:{pool.gpus.type + ':' if pool.gpus.type else ''}{pool.gpus.count}" if pool.gpus else "(null)"
        assert info["Gres"] == gres, info
    states = slurmfacts.node_states(lab)
    assert {n for n, s in states.items() if not s.endswith("~")} == set(pods), states


def test_srun_on_all_nodes_prints_exactly_the_pod_hostnames(booted):
    lab, bundle = booted
    checks = verify.check_srun_hostnames(lab, bundle)
    assert checks and all(c.ok for c in checks), [str(c) for c in checks]
    # the same, from Slurm's own partition list: each partition's running nodes run srun as their pods
    pods = running_pods(lab)
    for part, nodes in slurmfacts.partitions(lab).items():
        here = sorted(n for n in nodes if n in pods)
        if here:
            out = slurmfacts.run(lab, "srun", "-p", part, "-w", ",".join(here), f"-N{len(here)}", "hostname")
            assert sorted(out.split()) == sorted(pods[n].hostname for n in here), (part, out)


def test_batch_job_completes(booted):
    lab, bundle = booted
    checks = verify.check_sbatch(lab, bundle)
    assert checks and all(c.ok for c in checks), [str(c) for c in checks]
    pods = running_pods(lab)
    for check in checks:
        job = job_of(check)
        record = wait_for(f"job {job} final in sacct", lambda: slurmfacts.jobs(lab, job).get(job, {}),
                          until=lambda r: r.get("State") in FINAL)
        assert (record["State"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
        nodes = slurmfacts.hostnames(lab, record["NodeList"])
        assert nodes and set(nodes) <= set(pods), record


def test_gpu_job_sees_its_gpu_and_cannot_open_the_other(booted):
    lab, bundle = booted
    check = verify.check_gpu_isolation(lab, bundle)
    gpu_pools = [p for p in read_profile(lab.profile_path).pools if p.gpus]
    if not gpu_pools:
        assert not check.applies and check.ok, str(check)  # reported as SKIP, never as a pass
        return
    assert check.applies and check.ok, check.detail
    # Slurm gives a one-GPU step exactly one device of its node
    node = sorted(n for n, pod in running_pods(lab).items() if pod.pool == gpu_pools[0].name)[0]
    out = slurmfacts.run(lab, "srun", "-w", node, "--gres=gpu:1", "printenv", "CUDA_VISIBLE_DEVICES")
    assert out.strip() == "0", out


def test_sacct_lists_jobs_with_tres_through_slurmdbd_and_mariadb(booted):
    lab, bundle = booted
    ran = [job_of(c) for c in verify.check_sbatch(lab, bundle)]
    check = verify.check_sacct(lab, bundle)
    assert check.ok, check.detail
    records = wait_for("the batch jobs final in sacct", lambda: slurmfacts.jobs(lab),
                       until=lambda r: all(r.get(j, {}).get("State") in FINAL for j in ran))
    for job in ran:
        assert records[job]["State"] == "COMPLETED" and "cpu=" in records[job]["AllocTRES"], records[job]


def boot_time(lab) -> int:
    """When the running slurmctld started (scontrol show config's BOOT_TIME), in epoch seconds."""
    config = slurmfacts.run(lab, *slurmfacts.EPOCH, "scontrol", "show", "config")
    return int(config.split("BOOT_TIME", 1)[1].split("=", 1)[1].split()[0])


def test_pending_job_survives_a_slurmctld_restart(booted):
    lab, bundle = booted
    first_boot = boot_time(lab)
    check = verify.check_state_survives_restart(lab, bundle)
    assert check.ok, check.detail
    # Slurm's record: a new slurmctld, and the job it knew was the one submitted before it booted;
    # it never ran, and was cancelled (by the check) after the restart
    job, second_boot = job_of(check), boot_time(lab)
    record = wait_for(f"job {job} cancelled in sacct", lambda: slurmfacts.jobs(lab, job).get(job, {}),
                      until=lambda r: r.get("State", "").startswith("CANCELLED"))
    assert first_boot < second_boot, (first_boot, second_boot)
    assert int(record["Submit"]) <= second_boot <= int(record["End"]) and record["NodeList"] == "None assigned", \
        (record, second_boot)


def test_lab_exec_cli_runs_client_commands_in_the_login_pod(booted):
    lab, bundle = booted
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "exec", str(lab.profile_path), "--",
                           "scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"ClusterName             = {bundle.cluster}" in done.stdout


def test_lab_exec_cli_exits_with_the_commands_code(booted):
    lab, bundle = booted
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "exec", str(lab.profile_path), "--",
                           "sh", "-c", "echo out; echo err >&2; exit 7"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (7, "out\n", "err\n")


def test_lab_exec_cli_interrupted_exits_130_and_stops_the_command(booted):
    lab, bundle = booted
    marker = f"{os.getpid() % 1000 + 6000}"  # a sleep of this many seconds is ours
    proc = subprocess.Popen([sys.executable, "-m", "slurmk8s.cli", "lab", "exec", str(lab.profile_path), "--",
                             "sleep", marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sleeper = wait_for("the command running in the pod", lambda: sleeps(marker), until=bool, deadline_s=60)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, stderr) == (130, "interrupted\n")
    wait_for("the command stopped with the CLI", lambda: sleeps(marker), until=lambda left: not left, deadline_s=30)
    assert sleeper


def sleeps(seconds: str) -> list[int]:
    """Pids of `sleep SECONDS` processes on this machine."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()]:
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_a_version_without_a_lab_build_is_refused_up_front_with_exit_2(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text((ROOT / "profiles/kind-dev.yaml").read_text().replace('version: "26.05"', 'version: "25.11"'))
    done = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "lab", "up", str(profile)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("the lab has no Slurm 25.11 images")
    assert "Traceback" not in done.stderr


def test_without_root_the_lab_says_so_and_exits_2(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabUnavailable, match="needs root") as e:
        sandbox.preflight()
    assert e.value.exit_code == 2


# ---------------------------------------------------------------- what the kubelet would apply

# Capability bits (linux/capability.h): containerd's default set, and sshd's rendered one.
DEFAULT_CAPS = sum(1 << b for b in (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31))
SSHD_CAPS = sum(1 << b for b in (0, 5, 6, 7, 10, 18, 29))  # CHOWN KILL SETGID SETUID NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE
RELOAD_CAPS = sum(1 << b for b in (0, 1, 3))  # CHOWN DAC_OVERRIDE FOWNER: identity-reload writes users' keys and homes
# What each long-running container's process is on a kubelet: uid, gid, groups, CapEff, CapBnd, NoNewPrivs
# (None: every capability this machine's root holds, as a privileged container gets from containerd).
EXPECTED = {
    "slurmctld": (401, 401, {401}, 0, 0, 1),
    "slurmdbd": (401, 401, {401}, 0, 0, 1),
    "mariadb": (999, 999, {999}, 0, 0, 1),
    "sshd": (0, 0, {0}, SSHD_CAPS, SSHD_CAPS, 1),
    "sackd": (401, 401, {401}, 0, 0, 1),  # login's, as SlurmUser (auth/slurm)
    "identity-reload": (0, 0, {0}, RELOAD_CAPS, RELOAD_CAPS, 1),
    "munged": (0, 0, {0}, DEFAULT_CAPS, DEFAULT_CAPS, 1),
    "slurmd": (0, 0, {0}, None, None, 0),
}
# slurmd and sshd clear their own supplementary groups when they start (exec into their containers gets {0})
DAEMON_GROUPS = {"slurmd": set(), "sshd": set()}


def _status(pid: int) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)


def _fs_group(lab, pod: str) -> set[int]:
    """The pod's fsGroup, which the kubelet adds to every container's groups."""
    fs_group = lab.pod(pod).security.fs_group
    return set() if fs_group is None else {fs_group}


def _running(lab) -> list[tuple[str, str, int]]:
    """(pod, container, pid) of every container process still running."""
    state = lifecycle.load_state(lab.lab_id)
    return [(pod, c, pid) for pod, info in sorted(state["pods"].items()) for c, pid in info["containers"].items()
            if Path(f"/proc/{pid}").exists() and _status(pid).get("State", "Z")[0] != "Z"]


def test_every_daemon_runs_with_the_user_groups_and_capabilities_of_its_security_context(booted):
    lab, _ = booted
    held = int(_status(os.getpid())["CapPrm"], 16)
    seen = set()
    for pod, container, pid in _running(lab):
        uid, gid, groups, eff, bnd, nnp = EXPECTED[container]
        st = _status(pid)
        got = (st["Uid"].split(), st["Gid"].split(), set(map(int, st["Groups"].split())),
               int(st["CapEff"], 16), int(st["CapBnd"], 16), int(st["NoNewPrivs"]))
        groups = DAEMON_GROUPS.get(container, groups | _fs_group(lab, pod))
        want = ([str(uid)] * 4, [str(gid)] * 4, groups, held if eff is None else eff, held if bnd is None else bnd, nnp)
        assert got == want, f"{pod}/{container} (pid {pid})"
        seen.add(container)
    assert {"slurmctld", "slurmdbd", "mariadb", "sshd", "slurmd"} <= seen, seen


def test_exec_runs_as_the_container_user_as_kubectl_exec_does(booted):
    lab, _ = booted
    for pod, container, _pid in _running(lab):
        uid, _gid, groups, *_ = EXPECTED[container]
        done = lab.exec(["sh", "-c", "id -u; id -G"], pod=pod, container=container, timeout=15)
        assert done.returncode == 0, done.stderr
        got_uid, got_groups = done.stdout.split("\n", 1)
        assert (int(got_uid), set(map(int, got_groups.split()))) == (uid, groups | _fs_group(lab, pod)), \
            f"{pod}/{container}"


def _pod(lab, component: str) -> str:
    return next(p.name for p in lab.pods if p.component == component)


def test_slurmdbd_reads_its_0600_config_as_slurm_401(booted):
    lab, _ = booted
    pod = _pod(lab, "accounting")
    done = lab.exec(["sh", "-c", "stat -c '%a %u %g' /etc/slurm/slurmdbd.conf && grep -c '^StoragePass=' "
                     "/etc/slurm/slurmdbd.conf && id -u"], pod=pod, container="slurmdbd", timeout=15)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["600 401 401", "1", "401"]


def test_the_controller_reads_the_service_account_token_through_its_fs_group(booted):
    lab, bundle = booted
    pod = lab.pod(_pod(lab, "controller"))
    token = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    if not pod.service_account_token:
        # the spec opts out of the token (no elastic pool, no API access): the container must not hold one
        done = lab.exec(["test", "-e", token], pod=pod.name, container="slurmctld", timeout=15)
        assert done.returncode == 1, (done.stdout, done.stderr)
        return
    # the user ResumeProgram runs as: SlurmUser, the slurmctld container's identity
    done = lab.exec(["sh", "-c", f"stat -L -c '%a %u %g' {token} && wc -c < {token}"], pod=pod.name,
                    container="slurmctld", timeout=15)
    assert done.returncode == 0, done.stderr
    mode, size = done.stdout.split("\n")[:2]
    assert mode == "640 0 401" and int(size) > 0
    # the same user without the fsGroup cannot: it is the group, not root's powers, that lets it read
    state = lifecycle.load_state(lab.lab_id)["pods"][pod.name]
    who = dict(state["exec"]["slurmctld"]["identity"], gid=65534, groups=[65534])
    denied = sandbox.run_entered(state["containers"]["slurmctld"], ["cat", token], {"PATH": "/usr/bin:/bin"}, who, 15)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr


def test_volumes_have_the_kubelet_s_modes_and_claims_keep_theirs(booted):
    lab, _ = booted
    ctl = _pod(lab, "controller")
    # an emptyDir with fsGroup 401: setgid, group 401, which the init container closes from 0777 to 0755
    # (no job user may add a file there); the state claim (local-path, hostPath) comes 0777 without
    # setgid, and the init container closes it to 0700 for SlurmUser (slurmctld refuses less)
    done = lab.exec(["stat", "-c", "%a %U %G", "/etc/slurm", "/var/spool/slurmctld"], pod=ctl, container="slurmctld")
    assert done.stdout.split("\n")[:2] == ["2755 root slurm", "700 slurm slurm"], done.stderr
    worker = _pod(lab, "worker")  # no fsGroup: a plain emptyDir closed to 0755 by init, a Memory one 1777 (tmpfs root)
    done = lab.exec(["stat", "-c", "%a %U %G", "/etc/slurm", "/dev/shm"], pod=worker, container="slurmd")
    assert done.stdout.split("\n")[:2] == ["755 root root", "1777 root root"], done.stderr
