"""Benchmark: `slurmk8s up profiles/gpu-ib.yaml` against the recording API stub with 20 ms per request.

Runs the same up (fresh cluster, then a no-op re-apply) with objects of a stage applied one
at a time and in parallel, and prints request counts and wall time side by side.

    python bench/up.py [--latency 0.02] [--parallel 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "kube"))  # the stub is a test fixture, not product code

from apistub import ApiStub  # noqa: E402

from slurmk8s.actions.up import UpOptions, run_up  # noqa: E402
from slurmk8s.actions.interface import connect  # noqa: E402

PROFILE = str(REPO / "profiles" / "gpu-ib.yaml")


def measure(workers: int, latency: float) -> list[tuple[int, float]]:
    """(requests, seconds) of a first up and of a second, unchanged up."""
    stub = ApiStub(latency=latency).start()
    # gpu-ib's h100 pool bursts with KEDA: the cluster serves its CRD (the preflight checks it does)
    stub.discovery["/apis/keda.sh/v1alpha1"] = [{"name": "scaledobjects", "kind": "ScaledObject", "namespaced": True}]
    stub.discovery["/apis/monitoring.coreos.com/v1"] = [  # gpu-ib's ServiceMonitor
        {"name": "servicemonitors", "kind": "ServiceMonitor", "namespaced": True}]
    try:
        kubeconfig = stub.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        results = []
        for _ in range(2):
            stub.reset_log()
            started = time.perf_counter()
            run_up(PROFILE, connect(str(kubeconfig), workers=workers), UpOptions(wait=False, workers=workers), echo=lambda line: None)
            results.append((len(stub.requests), time.perf_counter() - started))
        return results
    finally:
        stub.stop()


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every request")
    parser.add_argument("--parallel", type=int, default=8, help="workers of the parallel run")
    args = parser.parse_args()
    sequential = measure(1, args.latency)
    parallel = measure(args.parallel, args.latency)
    print(f"slurmk8s up {Path(PROFILE).relative_to(REPO)}, API stub with {args.latency * 1000:.0f} ms per request")
    print(f"{'run':<22}{'requests':>10}{'sequential':>13}{f'parallel ({args.parallel})':>15}{'speed-up':>10}")
    for label, (seq, par) in zip(("first up (creates)", "second up (no-op)"), zip(sequential, parallel)):
        assert seq[0] == par[0], "both modes must send the same requests"
        print(f"{label:<22}{seq[0]:>10}{seq[1]:>12.2f}s{par[1]:>14.2f}s{seq[1] / par[1]:>9.1f}x")


if __name__ == "__main__":
    main()
