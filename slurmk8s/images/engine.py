"""The container engine's command line (podman, or docker with the same verbs), behind one class.

Every failure becomes an ImageError naming the step and carrying the engine's own output.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

from slurmk8s.debian import tail
from slurmk8s.images.errors import ImageError
from slurmk8s.progress import Progress

ENGINES = ("podman", "docker")
PROGRESS_EVERY = 2.0  # seconds between two looks at a long step's log
LOG_TAIL = 65536  # bytes of the log read for the current step (apt's output can run to megabytes)
# The step a build is at: podman's (and docker's classic builder's) "STEP 3/9: RUN ...", BuildKit's "#7 [3/9] RUN ...".
_STEP = re.compile(r"^(STEP \d+/\d+: .*|#\d+ \[[^]]*\d+/\d+\] .*)$", re.MULTILINE)


def current_step(log: str) -> str | None:
    """The last build step named in an engine's output, cut to one short line."""
    steps = _STEP.findall(log)
    return steps[-1][:120] if steps else None


class Engine:
    """Runs ``podman`` or ``docker``; long steps append their output to ``log_file``."""

    def __init__(self, name: str, log_file: Path, progress: Progress | None = None,
                 progress_every: float = PROGRESS_EVERY):
        if name not in ENGINES:
            raise ValueError(name)
        self.name = name
        self.log_file = Path(log_file)
        self.progress = progress  # a long step shows what it is doing (images build); None: silent
        self.progress_every = progress_every

    def check(self) -> None:
        """ImageError unless the engine is installed and answers (a docker CLI without its daemon does not)."""
        hint = "bash tools/install-podman.sh" if self.name == "podman" else "install and start docker"
        if shutil.which(self.name) is None:
            raise ImageError(f"{self.name} is not installed ({hint})")
        done = self._query(["info"], timeout=120)
        if done.returncode != 0:
            raise ImageError(f"{self.name} does not work here ({hint}): {tail(done.stderr or done.stdout, 3)}")

    def _query(self, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([self.name, *args], capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ImageError(f"{self.name} {args[0]} timed out after {timeout:.0f} s") from None

    def _must(self, args: list[str], what: str, timeout: float = 120) -> str:
        done = self._query(args, timeout)
        if done.returncode != 0:
            raise ImageError(f"{what}: {self.name} exited {done.returncode}: {tail(done.stderr or done.stdout, 10)}")
        return done.stdout

    def _logged(self, args: list[str], what: str, timeout: float, stdin=subprocess.DEVNULL) -> None:
        with self.log_file.open("ab") as out:
            out.write(f"\n$ {self.name} {' '.join(args)}\n".encode())
            out.flush()
            start = out.tell()
            with subprocess.Popen([self.name, *args], stdin=stdin, stdout=out, stderr=subprocess.STDOUT) as proc:
                rc = self._wait(proc, what, start, time.monotonic() + timeout)
        if rc != 0:
            outcome = "timed out" if rc is None else f"failed ({self.name} exited {rc})"
            raise ImageError(f"{what} {outcome}; last output ({self.log_file}):\n"
                             f"{tail(self.log_file.read_text(errors='replace'))}")

    def _wait(self, proc: subprocess.Popen, what: str, start: int, deadline: float) -> int | None:
        """The step's exit code, None when it ran past the deadline (then it is killed). While it runs, the
        progress line names the step and the build step it is at."""
        try:
            while True:
                try:
                    return proc.wait(timeout=max(min(self.progress_every, deadline - time.monotonic()), 0))
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        proc.kill()
                        proc.wait()
                        return None
                    if self.progress is not None:
                        with self.log_file.open("rb") as log:
                            log.seek(max(start, log.seek(0, 2) - LOG_TAIL))  # the last step is near the end
                            step = current_step(log.read().decode(errors="replace"))
                        self.progress.update(f"{what}: {step}" if step else what)
        except BaseException:  # Ctrl-C, or a progress line that could not be written: the step ends too
            proc.kill()
            proc.wait()
            raise
        finally:
            if self.progress is not None:
                self.progress.done()

    def image_id(self, ref: str) -> str | None:
        """The full id of an image, None when there is none by that name."""
        done = self._query(["image", "inspect", "--format", "{{.Id}}", ref])
        if done.returncode != 0:
            return None
        return done.stdout.strip() or None

    def labels(self, ref: str) -> dict[str, str] | None:
        """An image's labels, None when there is no such image."""
        done = self._query(["image", "inspect", "--format", "{{json .Config.Labels}}", ref])
        if done.returncode != 0:
            return None
        return json.loads(done.stdout or "null") or {}

    def images_labelled(self, label: str, value: str) -> list[str]:
        """Ids of every image carrying ``label=value``."""
        out = self._must(["images", "--no-trunc", "--filter", f"label={label}={value}", "--format", "{{.ID}}"],
                         f"list images labelled {label}")
        return sorted({line.strip() for line in out.splitlines() if line.strip()})

    def import_rootfs(self, rootfs: Path, ref: str, changes: list[str], timeout: float = 900) -> None:
        """``tar -C rootfs -c . | <engine> import`` with Containerfile-style ``changes``."""
        args = ["import", *(arg for c in changes for arg in ("--change", c)), "-", ref]
        with subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                              stdout=subprocess.PIPE) as tar:
            assert tar.stdout is not None  # stdout=PIPE
            try:
                self._logged(args, f"import {rootfs} as {ref}", timeout, stdin=tar.stdout)
            except ImageError:
                tar.kill()  # the engine's error is the one to report, not tar's broken pipe
                raise
            finally:
                tar.stdout.close()
                tar.wait()
        if tar.returncode != 0:
            raise ImageError(f"tar of {rootfs} exited {tar.returncode}")

    def run_script(self, image: str, script: str, args: list[str], mounts: list[tuple[Path, str]],
                   network: str, what: str, timeout: float = 1800) -> str:
        """Run ``sh -c script`` in a throwaway container; its stdout (stderr is appended to the log)."""
        argv = [self.name, "run", "--rm", f"--network={network}"]
        for host, container in mounts:
            argv += ["-v", f"{host}:{container}"]
        argv += ["--entrypoint", "/bin/sh", image, "-c", script, "sh", *args]
        with self.log_file.open("ab") as log:
            log.write(f"\n$ {self.name} run ... {image} ({what})\n".encode())
            log.flush()
            try:
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                      text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ImageError(f"{what} timed out after {timeout:.0f} s (log: {self.log_file})") from None
        if done.returncode != 0:
            raise ImageError(f"{what} failed ({self.name} run exited {done.returncode}); last output "
                             f"({self.log_file}):\n{tail(done.stdout + self.log_file.read_text(errors='replace'))}")
        return done.stdout

    def build(self, containerfile: Path, context: Path, tags: tuple[str, ...], labels: dict[str, str],
              what: str, timeout: float = 3600) -> None:
        """Build offline, never from the engine's layer cache (our key decides what is current)."""
        args = ["build", "--network=none", "--no-cache", "-f", str(containerfile)]
        for key, value in sorted(labels.items()):
            args += ["--label", f"{key}={value}"]
        for tag in tags:
            args += ["-t", tag]
        self._logged([*args, str(context)], what, timeout)

    def tag(self, image: str, ref: str) -> None:
        """Give an existing image one more name."""
        self._must(["tag", image, ref], f"tag {image} as {ref}")

    def remove_if_unused(self, image_id: str) -> bool:
        """Remove an image no name and no container uses any more; False when something still does."""
        done = self._query(["rmi", image_id])
        return done.returncode == 0

    def save(self, ref: str, path: Path, timeout: float = 900) -> None:
        """Write an image as a docker-archive tarball (what ``kind load image-archive`` reads)."""
        fmt = ["--format", "docker-archive"] if self.name == "podman" else []
        self._logged(["save", *fmt, "-o", str(path), ref], f"save {ref} to {path}", timeout)
