"""CPU and wall time of `slurmk8s --help`, a kind-dev render and a 10,000-node render, each a whole process.

Run: python bench/startup.py [--rounds N] [EXE ...]. Each EXE is a `slurmk8s` console script (default:
the one on PATH); give an installed (non-editable) package's, e.g. `python -m venv VENV &&
VENV/bin/pip install .` and VENV/bin/slurmk8s. Several EXEs run interleaved in the same rounds (before/after).
Goal: under 0.3 s for --help and kind-dev on an idle 2-core machine (the 10,000-node
profile is bench/render.py's; its goal is 1 s). The load average is printed: on a loaded machine
CPU time is the steadier figure, wall time is what a user waits.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from render import big_profile  # bench/render.py

ROOT = Path(__file__).resolve().parents[1]
GOALS_S = {"--help": 0.3, "render kind-dev": 0.3, "render 10k nodes": 1.0}


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU user+system) seconds of one whole process; stdout discarded, failure aborts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = os.times().elapsed
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    wall = os.times().elapsed - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exes", nargs="*", metavar="EXE", help="slurmk8s console scripts to compare")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (median reported)")
    args = parser.parse_args()
    exes = args.exes or [shutil.which("slurmk8s") or sys.exit("no slurmk8s on PATH")]
    # The .pyc files an installed package has (pip compiles them at install), even where the
    # environment says not to write bytecode.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    big = Path(tempfile.mkdtemp()) / "bench-10k.yaml"
    big.write_bytes(big_profile())
    commands = {"--help": ["--help"], "render kind-dev": ["render", "profiles/kind-dev.yaml", "-o", "-"],
                "render 10k nodes": ["render", str(big), "-o", "-"]}
    runs = {(exe, name): [exe, *argv] for exe in exes for name, argv in commands.items()}
    for cmd in runs.values():  # warm-up: page cache and bytecode
        timed(cmd, env)
    wall: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for i in range(args.rounds):
        for key in list(runs) if i % 2 == 0 else list(reversed(runs)):
            w, c = timed(runs[key], env)
            wall[key].append(w)
            cpu[key].append(c)
    width = max(len(exe) for exe in exes)
    print(f"{'slurmk8s':<{width}}  {'command':<16}  {'CPU med':>7}  {'CPU min':>7}  {'wall med':>8}  goal (CPU)")
    for (exe, name), times in cpu.items():
        met = "met" if statistics.median(times) < GOALS_S[name] else "MISSED"
        print(f"{exe:<{width}}  {name:<16}  {statistics.median(times):>7.3f}  {min(times):>7.3f}  "
              f"{statistics.median(wall[exe, name]):>8.3f}  < {GOALS_S[name]} s: {met}")
    print(f"{args.rounds} rounds; python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    big.unlink()
    big.parent.rmdir()


if __name__ == "__main__":
    main()
