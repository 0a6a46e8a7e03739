"""What the sandbox and its teardown share of the host: its tools, its processes, its cgroup tree.

A tool runs by its absolute path with a fixed env, so that a pod's env (its PATH) cannot hide it;
a process is known by its pid and start time, so that a reused pid is never taken for it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from slurmk8s.lab.errors import LabError

CGROUP_ROOT = Path("/sys/fs/cgroup")
TOOL_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
# Popen objects of this process by pid: teardown reaps through them so that Popen.returncode stays right
POPENS: dict[int, subprocess.Popen] = {}


def run(argv: Sequence[str], what: str, timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess:
    """Run a host tool; LabError naming `what` when it is missing, times out or (with check) fails."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=TOOL_ENV,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: `{' '.join(argv)}` timed out after {timeout} s") from None
    except FileNotFoundError:
        raise LabError(f"{what}: {argv[0]} is not installed") from None
    if check and done.returncode != 0:
        raise LabError(f"{what}: `{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()}")
    return done


def tool(name: str) -> str:
    """Absolute path of a host tool."""
    found = shutil.which(name, path=TOOL_ENV["PATH"])
    if found is None:
        raise LabError(f"{name} is not installed: apt-get install util-linux iproute2")
    return found


def start_time(pid: int) -> int | None:
    """Start time of pid in clock ticks (None if gone or a zombie): tells pid reuse apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
