"""Image build speed: cold (nothing cached) and warm (everything cached), per Slurm series.

    sudo PYTHONPATH=$PWD python bench/images.py [SERIES ...]    # default: 22.05 24.11 26.05

Cold starts from an empty apt cache and a base image that does not exist yet (its own names
and cache dir), so it pays debootstrap, apt-get update, the downloads and six builds; warm is
the same command right after. The real images and cache are never touched; the bench's own
images are removed at the end.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slurmk8s.debian import SLURM_RELEASES
from slurmk8s.images import build

REGISTRY = "localhost/slurmk8s-bench"
BASE_REPO = "localhost/slurmk8s-bench-base/debian"


def timed(series: str, options: build.BuildOptions) -> tuple[float, list[build.ImageResult]]:
    started = time.monotonic()
    results = build.build_series(series, options, log=lambda line: None)
    return time.monotonic() - started, results


def remove(results: list[build.ImageResult], series: str) -> None:
    """The bench's own tags and base image, by name."""
    refs = [ref for r in results for ref in r.refs] + [f"{BASE_REPO}:{SLURM_RELEASES[series].suite}"]
    subprocess.run(["podman", "rmi", *refs], capture_output=True)


def main(series_list: list[str]) -> None:
    print(f"{'Slurm':<7}{'suite':<10}{'cold s':>8}{'warm s':>8}  cold outcomes / warm outcomes")
    for series in series_list:
        with tempfile.TemporaryDirectory(prefix="slurmk8s-bench-images-", dir="/var/tmp") as cache:
            options = build.BuildOptions(registry=REGISTRY, cache_dir=Path(cache), base_repo=BASE_REPO)
            cold_s, cold = timed(series, options)
            try:
                warm_s, warm = timed(series, options)
            finally:
                remove(cold, series)
        summary = [",".join(sorted({r.outcome for r in results})) for results in (cold, warm)]
        print(f"{series:<7}{SLURM_RELEASES[series].suite:<10}{cold_s:>8.1f}{warm_s:>8.1f}  {summary[0]} / {summary[1]}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:] or list(SLURM_RELEASES))
