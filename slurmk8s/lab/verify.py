"""The lab's smoke suite: real Slurm commands against a booted bundle, each check a pass or a fail.

Every job names the nodes it means to use (`-p PART -w NODES`): Slurm may otherwise resume a
powered-down node of an elastic pool to place it, which is correct Slurm but not what a check
of the running nodes tests. A resume is checked on purpose, once per elastic pool, last.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from slurmk8s import naming
from slurmk8s.lab.lifecycle import Lab
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.plan import Pod, max_replicas, pod_for, workloads
from slurmk8s.render import Bundle

JOB_DEADLINE_S = 60


@dataclass(frozen=True)
class Check:
    """One smoke check's outcome."""

    name: str
    ok: bool
    detail: str
    applies: bool = True  # False: nothing to check in this profile (reported as SKIP)

    def __str__(self) -> str:
        word = "SKIP" if not self.applies else "PASS" if self.ok else "FAIL"
        return f"{word}  {self.name}: {self.detail}"


def _run(lab: Lab, argv: list[str], timeout: float = 60) -> str:
    done = lab.exec(argv, timeout=timeout)
    if done.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def running_nodes(lab: Lab) -> dict[str, str]:
    """Slurm node name -> pod hostname of every running pool member."""
    return {p.slurm_node: p.hostname for p in lab.pods if p.component == naming.WORKER}


def partitions(lab: Lab, bundle: Bundle) -> dict[str, list[str]]:
    """Partition -> its Slurm nodes (Slurm's expansion), the default first, then in the rendered order."""
    found = [(m.group(1), m.group(2), "Default=YES" in m.group(3).split())
             for m in re.finditer(r"^PartitionName=(\S+) Nodes=(\S+)(.*)$", bundle.files["slurm.conf"], re.M)]
    found.sort(key=lambda part: not part[2])  # stable
    return {name: expand(lab, nodes) for name, nodes, _ in found}


def node_list(nodes) -> str:
    """Nodes as one -w argument (Slurm accepts a comma-separated list)."""
    return ",".join(sorted(nodes))


def expand(lab: Lab, hostlist: str) -> list[str]:
    """Slurm's own expansion of a host list (scontrol show hostnames)."""
    return _run(lab, ["scontrol", "show", "hostnames", hostlist]).split()


def rendered_nodes(lab: Lab, slurm_conf: str) -> dict[str, dict[str, str]]:
    """Per Slurm node, what the rendered slurm.conf says: partitions, features, gres."""
    nodes: dict[str, dict[str, str]] = {}
    for m in re.finditer(r"^NodeName=(\S+) (.*)$", slurm_conf, re.M):
        keys = dict(kv.split("=", 1) for kv in m.group(2).split())
        for n in expand(lab, m.group(1)):
            nodes[n] = {"features": keys.get("Features", ""), "gres": keys.get("Gres", ""), "partitions": ""}
    for m in re.finditer(r"^PartitionName=(\S+) Nodes=(\S+)", slurm_conf, re.M):
        for n in expand(lab, m.group(2)):
            parts = nodes[n]["partitions"].split(",") if nodes[n]["partitions"] else []
            nodes[n]["partitions"] = ",".join(sorted(parts + [m.group(1)]))
    return nodes


def check_nodes_idle(lab: Lab, bundle: Bundle) -> Check:
    """Every running pool member idle, in its partitions, with its features and gres."""
    expected = rendered_nodes(lab, bundle.files["slurm.conf"])
    rows: dict[str, dict[str, set[str] | str]] = {}
    for line in _run(lab, ["sinfo", "-h", "-N", "-o", "%N|%P|%t|%f|%G"]).splitlines():
        node, part, state, features, gres = line.split("|")
        row = rows.setdefault(node, {"partitions": set(), "state": state, "features": features, "gres": gres})
        row["partitions"].add(part.rstrip("*"))
    problems = []
    for node in sorted(running_nodes(lab)):
        row, want = rows.get(node), expected[node]
        if row is None:
            problems.append(f"{node} missing")
            continue
        if row["state"] != "idle":
            problems.append(f"{node} is {row['state']}")
        if ",".join(sorted(row["partitions"])) != want["partitions"]:
            problems.append(f"{node} in {sorted(row['partitions'])}, rendered {want['partitions']}")
        if (row["features"] if row["features"] != "(null)" else "") != want["features"]:
            problems.append(f"{node} features {row['features']}, rendered {want['features']}")
        gres = row["gres"] if row["gres"] != "(null)" else ""
        if gres.split("(")[0] != want["gres"]:
            problems.append(f"{node} gres {gres}, rendered {want['gres']}")
    detail = "; ".join(problems) or f"{len(running_nodes(lab))} node(s) idle with rendered partitions/features/gres"
    return Check("nodes idle in sinfo", not problems, detail)


def guarded(name: str, check: Callable[[], Check]) -> Check:
    """check(), or a failed Check called name when a Slurm command in it fails."""
    try:
        return check()
    except LabError as e:
        return Check(name, False, str(e))


def per_partition(lab: Lab, bundle: Bundle, what: str, check: Callable[[str, dict[str, str]], Check]) -> list[Check]:
    """check(partition, its running nodes -> hostnames) for each partition; one with none running is a SKIP."""
    running = running_nodes(lab)
    results = []
    for part, nodes in partitions(lab, bundle).items():
        here = {n: running[n] for n in nodes if n in running}
        if here:
            results.append(check(part, here))
        else:
            results.append(Check(f"{what} in partition {part}", True, "no running node (a resume is checked on its own)",
                                 applies=False))
    return results


def check_srun_hostnames(lab: Lab, bundle: Bundle) -> list[Check]:
    """In each partition, srun on its running nodes prints exactly their pod hostnames."""
    def one(part: str, nodes: dict[str, str]) -> Check:
        argv = ["srun", "-p", part, "-w", node_list(nodes), f"-N{len(nodes)}", "hostname"]

        def run() -> Check:
            got, want = sorted(_run(lab, argv).split()), sorted(nodes.values())
            return Check(" ".join(argv), got == want, f"printed {got}" + ("" if got == want else f", pods {want}"))
        return guarded(" ".join(argv), run)
    return per_partition(lab, bundle, "srun hostname", one)


def submit(lab: Lab, *args: str) -> str:
    """sbatch with --parsable; the job id."""
    return _run(lab, ["sbatch", "--parsable", "-o", "/dev/null", *args]).strip().split(";")[0]


def wait_state(lab: Lab, job: str, states: set[str], deadline_s: float = JOB_DEADLINE_S) -> str:
    """Poll the job's state (scontrol, then sacct once it has left the queue) until it is one of states."""
    end = time.monotonic() + deadline_s
    state = "?"
    while time.monotonic() < end:
        try:
            out = lab.exec(["scontrol", "-o", "show", "job", job], timeout=15).stdout
        except LabError:  # a controller still starting answers late
            continue
        m = re.search(r"JobState=(\S+)", out)
        if m:
            state = m.group(1)
        else:
            acct = lab.exec(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], timeout=15).stdout.split()
            state = acct[0] if acct else state
        if state in states:
            return state
        time.sleep(0.2)
    return state


def check_sbatch(lab: Lab, bundle: Bundle) -> list[Check]:
    """In each partition, a batch job over its running nodes reaches COMPLETED."""
    def one(part: str, nodes: dict[str, str]) -> Check:
        def run() -> Check:
            job = submit(lab, "-p", part, "-w", node_list(nodes), f"-N{len(nodes)}", "--wrap", "srun true")
            state = wait_state(lab, job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})
            return Check(f"sbatch job completes in partition {part}", state == "COMPLETED", f"job {job} {state}")
        return guarded(f"sbatch job completes in partition {part}", run)
    return per_partition(lab, bundle, "sbatch job completes", one)


GPU_PROBE = ('echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; '
             'for d in /dev/nvidia[0-9]*; do if cat "$d" >/dev/null 2>/tmp/err; then echo "$d open"; '
             'else echo "$d $(cat /tmp/err)"; fi; done')


def gpu_partition(bundle: Bundle) -> tuple[str, str] | None:
    """(partition, pool) of a GPU pool, or None without GPUs."""
    conf = bundle.files["slurm.conf"]
    gpu_node = re.search(r"^NodeName=(\S+) .*Gres=gpu", conf, re.M)
    if not gpu_node:
        return None
    prefix = gpu_node.group(1).split("[")[0].rstrip("-")
    for m in re.finditer(r"^PartitionName=(\S+) Nodes=(\S+)", conf, re.M):
        if any(part.split("[")[0].rstrip("-") == prefix for part in m.group(2).split(",")):
            return m.group(1), prefix
    return None


def check_gpu_isolation(lab: Lab, bundle: Bundle) -> Check:
    """--gres=gpu:1 sets CUDA_VISIBLE_DEVICES; ConstrainDevices denies the other GPU's device.

    The fake devices have no driver: opening the allowed one fails with ENXIO ("No such device
    or address"); a device the job's cgroup denies fails with EPERM ("Operation not permitted").
    """
    found = gpu_partition(bundle)
    if not found:
        return Check("GPU isolation", True, "no GPU pool in this profile", applies=False)
    partition, pool = found
    running = sorted(n for n in running_nodes(lab) if n.rsplit("-", 1)[0] == pool)
    if not running:
        return Check("GPU isolation", True, f"no running node of GPU pool {pool}", applies=False)

    def run() -> Check:
        out = _run(lab, ["srun", "-p", partition, "-w", running[0], "--gres=gpu:1", "sh", "-c", GPU_PROBE])
        visible = re.search(r"CUDA_VISIBLE_DEVICES=(\S*)", out)
        allowed = [line for line in out.splitlines() if "No such device or address" in line]
        denied = [line for line in out.splitlines() if "Operation not permitted" in line]
        ok = bool(visible and visible.group(1)) and len(allowed) == 1 and len(denied) >= 1
        return Check("GPU isolation (--gres=gpu:1)", ok, " | ".join(out.strip().splitlines()))
    return guarded("GPU isolation (--gres=gpu:1)", run)


def check_sacct(lab: Lab, bundle: Bundle) -> Check:
    """sacct (slurmdbd + MariaDB) lists the finished jobs with their TRES."""
    if "AccountingStorageType=accounting_storage/slurmdbd" not in bundle.files["slurm.conf"]:
        return Check("sacct shows jobs with TRES", True, "accounting is off in this profile", applies=False)
    end = time.monotonic() + 30
    rows: list[list[str]] = []
    while time.monotonic() < end:
        out = _run(lab, ["sacct", "-n", "-X", "-P", "-o", "JobID,State,AllocTRES"])
        rows = [line.split("|") for line in out.splitlines() if line]
        if rows and all(r[1] not in ("RUNNING", "PENDING") for r in rows) and all("cpu=" in r[2] for r in rows):
            break
        time.sleep(0.5)
    ok = bool(rows) and all("cpu=" in r[2] for r in rows)
    return Check("sacct shows jobs with TRES", ok, "; ".join("/".join(r) for r in rows) or "no jobs in sacct")


def check_state_survives_restart(lab: Lab, bundle: Bundle) -> Check:
    """A held (pending) job is still there after slurmctld is killed and restarted."""
    job = submit(lab, "--hold", "--wrap", "true")
    ctl = next(p for p in lab.pods if p.component == naming.CONTROLLER)
    lab.restart_container(ctl.name, "slurmctld")
    state = wait_state(lab, job, {"PENDING"}, deadline_s=45)
    lab.exec(["scancel", job], timeout=15)
    return Check("pending job survives slurmctld restart", state == "PENDING", f"job {job} {state} after restart")


def check_elastic_resume(lab: Lab, bundle: Bundle) -> list[Check]:
    """Per elastic pool: a job on its lowest powered-down node makes Slurm resume it, and the pod starts.

    ResumeProgram scales the pool's StatefulSet through the lab's scale API; the job must run
    on that node (its pod's hostname) within ResumeTimeout.
    """
    conf = bundle.files["slurm.conf"]
    timeout = re.search(r"^ResumeTimeout=(\d+)$", conf, re.M)
    if "ResumeProgram=" not in conf or not timeout:
        return [Check("resume of a powered-down node", True, "no power saving in this profile", applies=False)]
    running, parts = running_nodes(lab), partitions(lab, bundle)
    results: list[Check] = []
    pools: dict[str, list[Pod]] = {}  # elastic pool -> its members that do not run
    for w in workloads(bundle):
        pool = w["metadata"].get("labels", {}).get(naming.LABEL_POOL)
        floor = w["metadata"].get("annotations", {}).get(naming.ANNOTATION_MIN_REPLICAS)
        if pool and w["kind"] == "StatefulSet" and floor is not None and int(floor) < max_replicas(w):
            pods = (pod_for(bundle, w, i) for i in range(max_replicas(w)))
            pools.setdefault(pool, []).extend(p for p in pods if p.slurm_node not in running)
    if not pools:
        return [Check("resume of a powered-down node", True, "no elastic pool in this profile", applies=False)]
    for pool, idle in sorted(pools.items()):
        if not idle:
            results.append(Check(f"resume in pool {pool}", True, "every node of the pool runs", applies=False))
            continue
        pod = min(idle, key=lambda p: p.first_node + p.ordinal)
        part = next((name for name, nodes in parts.items() if pod.slurm_node in nodes), None)
        if part is None:
            results.append(Check(f"resume in pool {pool}", False, f"{pod.slurm_node} is in no partition"))
            continue
        results.append(resume_check(lab, pod, part, float(timeout.group(1))))
    return results


def resume_check(lab: Lab, pod: Pod, partition: str, resume_timeout_s: float) -> Check:
    """srun on a powered-down node prints its pod's hostname, and that pod now runs."""
    argv = ["srun", "-p", partition, "-w", pod.slurm_node, "hostname"]
    name = f"resume of powered-down {pod.slurm_node} ({' '.join(argv)})"

    def run() -> Check:
        out = _run(lab, argv, timeout=resume_timeout_s + 60).split()
        started = any(p.name == pod.name for p in lab.pods)
        detail = f"printed {out}" + ("" if out == [pod.hostname] else f", expected {[pod.hostname]}") + \
            (f"; pod {pod.name} started" if started else f"; pod {pod.name} is not running")
        return Check(name, out == [pod.hostname] and started, detail)
    result = guarded(name, run)
    if not result.ok:  # what slurmctld thinks of the node says where the resume stopped
        shown = lab.exec(["scontrol", "-o", "show", "node", pod.slurm_node], timeout=15)
        facts = re.findall(r"\b(State|Reason|NodeAddr|LastBusyTime|ResumeAfterTime)=(\S+)", shown.stdout)
        result = Check(result.name, False, f"{result.detail}; slurmctld: {' '.join(f'{k}={v}' for k, v in facts)}")
    return result


CHECKS: tuple[Callable[[Lab, Bundle], Check | list[Check]], ...] = (
    check_nodes_idle, check_srun_hostnames, check_sbatch, check_gpu_isolation, check_sacct,
    check_state_survives_restart, check_elastic_resume,
)


def run_checks(lab: Lab, bundle: Bundle) -> list[Check]:
    """Every smoke check; an exception in one is that check's failure."""
    results = []
    for check in CHECKS:
        name = check.__doc__.splitlines()[0]
        try:
            outcome = check(lab, bundle)
        except LabError as e:
            outcome = Check(name, False, str(e))
        results += outcome if isinstance(outcome, list) else [outcome]
    return results
