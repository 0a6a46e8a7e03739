"""Benchmark the core: a 10,000-node profile through load + validate + render, and CLI start-up.

Run: python bench/render.py [--repeat N]. Prints a table with the targets
(render < 1 s and < 200 MB for 10,000 nodes; `slurmk8s --help` < 0.3 s).

    python bench/render.py --vs-helm CHART_DIR [--rounds N] [--before OTHER_CHECKOUT]

runs the comparison side by side: `helm template` of Slinky's slurm chart (CHART_DIR,
e.g. a copy of SlinkyProject/slurm-operator's helm/slurm; never committed) with 40 NodeSets x 250
replicas, and `slurmk8s render` of the 40-pool x 250-node profile; each a whole process, the two
interleaved (order alternating) for N rounds, with `slurmk8s --help` and `python -c pass`;
prints the medians and the ratio. --before adds another checkout's render (before/after).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml

from slurmk8s.output.plain import plain_tree
from slurmk8s.profile import load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[1]
POOLS, NODES_PER_POOL = 40, 250


def big_profile() -> bytes:
    """40 pools x 250 maxReplicas = 10,000 Slurm nodes; GPUs and RDMA on every other pool."""
    pools = []
    for i in range(POOLS):
        pool = {"name": f"pool{i:02d}", "replicas": 8, "minReplicas": 0, "maxReplicas": NODES_PER_POOL,
                "cpus": 96, "memory": "1800Gi", "features": [f"rack{i % 8}"]}
        if i % 2 == 0:
            pool["gpus"] = {"count": 8, "type": "h100"}
            pool["rdma"] = {"resource": "rdma/hca_shared_devices_a", "networks": ["ib-0", "ib-1"],
                            "hugepages": {"size": "2Mi", "amount": "16Gi"}}
        pools.append(pool)
    doc = {
        "apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "bench", "namespace": "hpc"},
        "spec": {"slurm": {"version": "26.05"}, "controller": {"replicas": 2}, "restapi": {"enabled": True},
                 "pools": pools,
                 "partitions": [{"name": "all", "pools": [p["name"] for p in pools], "default": True},
                                {"name": "gpu", "pools": [p["name"] for p in pools if "gpus" in p]}]},
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


def core(data: bytes) -> int:
    """load + validate + render; returns the object count (so the work cannot be skipped)."""
    return len(render(load_profile(data, "bench.yaml")).objects)


def best_of(n: int, fn, *args) -> float:
    """Best wall time of n calls."""
    times = []
    for _ in range(n):
        gc.collect()
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def cli_median(args: list[str], n: int = 5) -> float:
    """Median wall time of a CLI run in a fresh process (stdout discarded; failure aborts)."""
    exe = shutil.which("slurmk8s")
    cmd = [exe] if exe else [sys.executable, "-m", "slurmk8s.cli"]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd + args, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def helm_values() -> str:
    """The anchor's values: as many NodeSets and replicas as the profile has pools and nodes."""
    lines = ["nodesets:"]
    for i in range(POOLS):
        lines += [f"  pool{i:02d}:", "    enabled: true", f"    replicas: {NODES_PER_POOL}"]
    return "\n".join(lines) + "\n"


def timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[float, float]:
    """(wall, CPU user+system) seconds of one whole process (stdout discarded; failure aborts).
    CPU time is the steadier figure on a shared machine; wall is what a user waits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def vs_helm(chart: Path, rounds: int, before: Path | None = None) -> None:
    """`helm template` of the Slinky chart and `slurmk8s render`, interleaved, whole process each;
    with `before`, the same render from another checkout in the same rounds (before/after)."""
    helm = shutil.which("helm")
    if not helm:
        raise SystemExit("helm not found (tools/install-helm.sh installs it)")
    if not (chart / "Chart.yaml").is_file():
        raise SystemExit(f"{chart}: no Chart.yaml (pass the chart directory, e.g. .../helm/slurm)")
    with tempfile.TemporaryDirectory() as tmp:
        profile, values = Path(tmp) / "bench.yaml", Path(tmp) / "values.yaml"
        profile.write_bytes(big_profile())
        values.write_text(helm_values())
        render_args = ["-m", "slurmk8s.cli", "render", str(profile), "-o", "-"]
        checkouts = {"slurmk8s": ROOT, **({"before": before.resolve()} if before else {})}
        runs: dict[str, tuple[list[str], dict[str, str] | None, Path]] = {
            "helm": ([helm, "template", "bench", str(chart), "--namespace", "hpc", "-f", str(values)], None, ROOT)}
        for label, checkout in checkouts.items():
            # That checkout's code (-m puts the working directory first on sys.path), whatever `slurmk8s` on PATH points at; compiled bytecode kept
            # (in a cache of this run) as an installed package has it, even where the environment
            # sets PYTHONDONTWRITEBYTECODE (then every run would compile every module first).
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(PYTHONPATH=str(checkout), PYTHONPYCACHEPREFIX=str(Path(tmp) / f"pyc-{label}"))
            runs[label] = ([sys.executable, *render_args], env, checkout)
            runs[f"{label} --help"] = ([sys.executable, "-m", "slurmk8s.cli", "--help"], env, checkout)
        runs["python -c pass"] = ([sys.executable, "-c", "pass"], None, ROOT)
        # One warm-up each: page cache and .pyc files, as a user's second run has them.
        for run in runs.values():
            timed(*run)
        times: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for i in range(rounds):
            order = list(runs) if i % 2 == 0 else list(reversed(runs))
            for name in order:
                wall, used = timed(*runs[name])
                times[name].append(wall)
                cpu[name].append(used)
    version = subprocess.run([helm, "version", "--short"], capture_output=True, text=True).stdout.strip()
    print(f"{POOLS} pools/NodeSets x {NODES_PER_POOL} nodes/replicas, {rounds} interleaved rounds, whole process each")
    width = max(len(name) for name in runs)
    print(f"{'command':<{width}}  {'wall med':>8}  {'min':>6}  {'max':>6}  {'CPU med':>7}  wall runs (s)")
    for name, ts in times.items():
        walls = " ".join(f"{t:.3f}" for t in ts)
        print(f"{name:<{width}}  {statistics.median(ts):>8.3f}  {min(ts):>6.3f}  {max(ts):>6.3f}  "
              f"{statistics.median(cpu[name]):>7.3f}  {walls}")
    for label in checkouts:
        ratio = statistics.median(times[label]) / statistics.median(times["helm"])
        per_round = [s / h for s, h in zip(times[label], times["helm"])]
        cpu_ratio = statistics.median(cpu[label]) / statistics.median(cpu["helm"])
        print(f"ratio {label}/helm: {ratio:.2f} wall (medians; per round {min(per_round):.2f}-{max(per_round):.2f}), "
              f"{cpu_ratio:.2f} CPU; goal <= 1.0")
    print(f"helm {version}; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing (best of N)")
    parser.add_argument("--vs-helm", metavar="CHART_DIR", type=Path,
                        help="only the side-by-side run against `helm template` of this chart")
    parser.add_argument("--rounds", type=int, default=9, help="--vs-helm: interleaved rounds")
    parser.add_argument("--before", metavar="CHECKOUT", type=Path,
                        help="--vs-helm: also run this other checkout's render in the same rounds")
    args = parser.parse_args()
    if args.vs_helm:
        vs_helm(args.vs_helm, args.rounds, args.before)
        return

    data = big_profile()
    profile = load_profile(data, "bench.yaml")
    nodes = sum(p.max_replicas for p in profile.pools)
    assert nodes == POOLS * NODES_PER_POOL, nodes
    bundle = render(profile)

    t_load = best_of(args.repeat, load_profile, data, "bench.yaml")
    t_core = best_of(args.repeat, core, data)
    t_tree = best_of(args.repeat, lambda: plain_tree(render(load_profile(data, "bench.yaml"))))

    tracemalloc.start()
    core(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "bench.yaml"
        big.write_bytes(data)
        t_help = cli_median(["--help"])
        t_small = cli_median(["render", "profiles/kind-dev.yaml", "-o", "-"])
        t_big = cli_median(["render", str(big), "-o", "-"])

    rows = [
        (f"profile: {nodes} nodes, {len(profile.pools)} pools, {len(bundle.objects)} objects", "", ""),
        ("load + validate (best of %d)" % args.repeat, f"{t_load * 1000:.0f} ms", ""),
        ("load + validate + render (best of %d)" % args.repeat, f"{t_core * 1000:.0f} ms", "< 1000 ms"),
        ("... + plain tree as YAML text", f"{t_tree * 1000:.0f} ms", ""),
        ("peak Python memory of load+render (tracemalloc)", f"{peak / 2**20:.1f} MB", "< 200 MB"),
        ("peak RSS of this process (ru_maxrss)", f"{maxrss_mb:.1f} MB", "< 200 MB"),
        ("`slurmk8s --help` (median of 5)", f"{t_help * 1000:.0f} ms", "< 300 ms"),
        ("`slurmk8s render kind-dev.yaml -o -` (median of 5)", f"{t_small * 1000:.0f} ms", ""),
        ("`slurmk8s render <10,000 nodes> -o -` (median of 5)", f"{t_big * 1000:.0f} ms", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>10}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>10}  {target}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
