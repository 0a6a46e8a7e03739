"""`images build|save`: the project's Slurm and MariaDB images, per Slurm series."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from slurmk8s.images.build import BuildOptions, ImageResult, build_series, check_request, save_series
from slurmk8s.progress import Progress


def build_images(series: list[str], options: BuildOptions, echo: Callable[[str], None] = print) -> list[ImageResult]:
    """Build or reuse the images of each series and print one table of what happened."""
    for s in series:
        check_request(s, options)  # every argument is checked before anything is built
    results, started = [], time.monotonic()
    live = Progress(sys.stderr)  # a live line on a terminal while a build step runs, timestamped lines in a log
    for s in series:
        results += build_series(s, options, log=echo, progress=live)
    echo(results_table(results))
    built = sum(r.outcome == "built" for r in results)
    echo(f"{len(results)} images for Slurm {', '.join(series)} in {time.monotonic() - started:.1f} s "
         f"({built} built, {len(results) - built} reused)")
    return results


def results_table(results: list[ImageResult]) -> str:
    """One line per image: outcome, seconds, version, every tag."""
    rows = [("IMAGE", "VERSION", "OUTCOME", "SECONDS")]
    rows += [(" ".join(r.refs), r.version, r.outcome, f"{r.seconds:.1f}") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def save_images(series: list[str], options: BuildOptions, out_dir: str,
                echo: Callable[[str], None] = print) -> list[Path]:
    """Write docker-archive tarballs of the built images of each series into out_dir."""
    for s in series:
        check_request(s, options)
    paths = []
    for s in series:
        for path, written in save_series(s, options, Path(out_dir), log=echo):
            if not written:
                echo(f"  kept {path} (same image)")
            paths.append(path)
    echo(f"{len(paths)} archives in {out_dir} (load with: kind load image-archive FILE, "
         f"or podman load -i FILE)")
    return paths
