"""Lab speed: the timeline of a boot to the first COMPLETED job, and teardown, per Slurm release.

    sudo python bench/lab.py                         # 3 nodes, each release, timelines and a table
    sudo python bench/lab.py --nodes 3 16 --repeat 2
    sudo python bench/lab.py --before CHECKOUT       # the same boots of an older checkout, interleaved

Each boot runs in its own process on the slurmk8s of the checkout it measures (this one, or
--before's; an older checkout's lab records no timeline, so only its totals are shown).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
VERSIONS = ("22.05", "24.11", "26.05")


def profile_text(version: str, nodes: int) -> bytes:
    """A one-pool profile with `nodes` running 1-CPU nodes."""
    import yaml
    doc = {
        "apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "bench"},
        "spec": {"slurm": {"version": version, "images": {"registry": "registry.example.org/hpc"}},
                 "pools": [{"name": "cpu", "replicas": nodes, "cpus": 1, "memory": "1Gi"}]},
    }
    return yaml.safe_dump(doc).encode()


def one_run(version: str, nodes: int, first_job: str = "sbatch") -> dict:
    """Boot, one job, teardown, in this process: the timeline (seconds since boot started) and the totals.

    first_job "sbatch": a batch job, polled until COMPLETED; "srun": `srun -N1 true`, which
    slurmctld allocates as it is asked (a batch job waits for the scheduler's first pass).
    """
    from slurmk8s.lab import lifecycle, verify
    from slurmk8s.profile import load_profile
    from slurmk8s.render import render

    bundle = render(load_profile(profile_text(version, nodes), "bench"))
    started, wall = time.monotonic(), time.time()
    lab = lifecycle.boot(bundle, log=lambda line: None)
    events = [list(e) for e in getattr(lab, "events", [])]
    events.append([time.monotonic() - started, "boot returned"])
    if first_job == "srun":
        done = lab.exec(["srun", "-N1", "true"], timeout=60)
        booted = time.monotonic() - started
        job, state = "1", "COMPLETED" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()}"
        events.append([booted, f"srun -N1 true returned ({state})"])
    else:
        job = verify.submit(lab, "-N1", "--wrap", "true")
        events.append([time.monotonic() - started, f"job {job} submitted"])
        state = verify.wait_state(lab, job, {"COMPLETED", "FAILED"})
        booted = time.monotonic() - started
        events.append([booted, f"job {job} {state}"])
    if state != "COMPLETED":
        raise SystemExit(f"{version}/{nodes}: job {job} ended {state}")
    ctl = next(p for p in lab.pods if p.component == "controller")
    events += slurmctld_events(lab.log_path(ctl, "slurmctld").read_text(errors="replace"), job, wall)
    started = time.monotonic()
    left = lifecycle.down(lab.lab_id)
    if left:
        raise SystemExit(f"{version}/{nodes}: teardown left {left}")
    return {"events": events, "first_job_s": booted, "teardown_s": time.monotonic() - started}


# slurmctld's own word on the job, where its log has timestamps (24.11 and later log them to stderr)
JOB_LINES = (("_slurm_rpc_submit_batch_job: JobId={job} ", "slurmctld: job {job} submitted"),
             ("sched: Allocate JobId={job} ", "slurmctld: job {job} allocated"),
             ("prolog_running_decr: Configuration for JobId={job} ", "slurmctld: job {job} prolog done"),
             ("_job_complete: JobId={job} done", "slurmctld: job {job} complete"))


def slurmctld_events(log: str, job: str, wall_start: float) -> list[list]:
    """[seconds since the boot started, what] for slurmctld's log lines about the job."""
    found = []
    for line in log.splitlines():
        m = re.match(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)\] (.*)$", line)
        if not m:
            continue
        for marker, what in JOB_LINES:
            if marker.format(job=job) in m.group(2):
                at = datetime.datetime.fromisoformat(m.group(1)).timestamp() - wall_start
                found.append([at, what.format(job=job)])
    return found


def run_in(checkout: Path, version: str, nodes: int, first_job: str) -> dict:
    """one_run in a fresh process on checkout's slurmk8s."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--one", version, str(nodes), first_job],
                          env=env, capture_output=True, text=True, cwd=checkout)
    if done.returncode != 0:
        raise SystemExit(f"{checkout} {version}/{nodes}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=3, metavar=("VERSION", "NODES", "JOB"), help=argparse.SUPPRESS)
    parser.add_argument("--first-job", nargs="+", choices=("sbatch", "srun"), default=["sbatch"],
                        help="how the first job is run (both: each boot measured once per way)")
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--nodes", nargs="+", type=int, default=[3])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--before", type=Path, action="append", default=[],
                        help="an older checkout, run interleaved with this one (repeatable)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one[0], int(args.one[1]), args.one[2])))
        return
    variants = {"now": HERE} | {path.name: path.resolve() for path in args.before}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    table = []
    for version in args.versions:
        for nodes in args.nodes:
            for first_job in args.first_job:
                runs: dict[str, list[dict]] = {v: [] for v in variants}
                for _ in range(args.repeat):
                    for name, checkout in variants.items():
                        runs[name].append(run_in(checkout, version, nodes, first_job))
                print(f"\nSlurm {version}, {nodes} nodes, first job by {first_job}, "
                      "timeline of the last run of now (s since boot started):")
                for at, what in sorted(runs["now"][-1]["events"]):
                    print(f"  {at:6.2f}  {what}")
                sys.stdout.flush()
                for name in variants:
                    table.append((version, nodes, first_job, name,
                                  [round(r["first_job_s"], 2) for r in runs[name]],
                                  statistics.median(r["teardown_s"] for r in runs[name])))
    width = max(len(v) for v in variants) + 2
    print(f"\n{'Slurm':<7}{'nodes':>6}  {'job':<8}{'variant':<{width}}{'boot->1st job s (median)':>25}"
          f"{'teardown s':>12}   runs")
    for version, nodes, first_job, name, firsts, down in table:
        print(f"{version:<7}{nodes:>6}  {first_job:<8}{name:<{width}}{statistics.median(firsts):>25.2f}{down:>12.2f}"
              f"   {firsts}")


if __name__ == "__main__":
    main()
