"""Removing a lab, and proving that nothing of it is left.

Everything a lab creates is named from its id (``lab_prefix``) or recorded in the sandbox section
of its state file, so ``teardown`` can clean up after a crash from another process: the lab's
processes, netns, links and bridge, Slurm's cgroup dirs and the mounts under its lab dir.
``leftovers`` lists what of that is still present.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from slurmk8s.lab import state as lab_state
from slurmk8s.lab.hosttools import CGROUP_ROOT, POPENS, command_name, run, start_time
from slurmk8s.lab.state import lab_prefix


def _our_netns(prefix: str) -> list[str]:
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix + "-"))


def _our_links(prefix: str) -> list[str]:
    return sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefix))


def pids_in_netns(names: Iterable[str]) -> dict[int, str]:
    """pid -> netns name, for every live process whose network namespace is one of ``names``."""
    inodes = {}
    for name in names:
        try:
            st = os.stat(f"/run/netns/{name}")
            inodes[(st.st_dev, st.st_ino)] = name
        except OSError:
            continue
    found: dict[int, str] = {}
    if not inodes:
        return found
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        netns = inodes.get((st.st_dev, st.st_ino))
        if netns and start_time(int(entry)) is not None:
            found[int(entry)] = netns
    return found


def _recorded_live(state: dict | None) -> dict[int, str]:
    """Recorded pod processes still alive (same pid and start time): they may outlive their netns."""
    live = {}
    for pod, info in (state or {}).get("pods", {}).items():
        for rec in info.get("procs", []):
            if rec.get("start") is not None and start_time(rec["pid"]) == rec["start"]:
                live[rec["pid"]] = pod
    return live


def _reap(pids: Iterable[int]) -> None:
    for pid in pids:
        if pid in POPENS:
            POPENS[pid].poll()
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: its own parent reaps it


def _cgroup_names(state: dict | None) -> list[str]:
    pods = (state or {}).get("pods", {}).values()
    names = {info["hostname"] for info in pods} | {c for info in pods for c in info.get("cgroups", [])}
    names |= set((state or {}).get("cgroups", []))
    return [f"slurm_{n}" for n in sorted(names)]


def labs_sharing_cgroups(lab_id: str, slurm_nodes: set[str]) -> dict[str, list[str]]:
    """Other labs on this machine whose Slurm nodes have names among slurm_nodes: {lab: names}.

    Slurm's cgroup/v1 plugin names a node's cgroup dir slurm_<node> under the host's one tree,
    so two labs with a node of the same name would share (and tear down) each other's dirs.
    """
    wanted = {f"slurm_{n}" for n in slurm_nodes}
    shared = {}
    for path in sorted(lab_state.STATE_DIR.glob("*.json")) if lab_state.STATE_DIR.is_dir() else []:
        if path.stem == lab_id:
            continue
        try:
            doc = lab_state.read(path) or {}
        except (OSError, ValueError):
            continue
        names = sorted(set(_cgroup_names(doc.get(lab_state.SANDBOX))) & wanted)
        if names:
            shared[path.stem] = [n.removeprefix("slurm_") for n in names]
    return shared


def _cgroup_dirs(state: dict | None) -> list[Path]:
    """Slurm's per-node cgroup dirs (/sys/fs/cgroup/<ctrl>/slurm_<node>) of this lab's pods."""
    found = []
    for name in _cgroup_names(state):
        found += [d for d in CGROUP_ROOT.glob(f"*/{name}") if d.is_dir()]
    return sorted(found)


def _mounts_under(lab_dir: str | None) -> list[str]:
    if not lab_dir:
        return []
    root = os.path.realpath(lab_dir)
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                points.append(point)
    return points


def _rmdir_tree(top: Path) -> None:
    """rmdir a cgroup tree deepest first (cgroupfs refuses rm -r of its files)."""
    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
        try:
            os.rmdir(dirpath)
        except FileNotFoundError:
            pass


def leftovers(lab_id: str) -> list[str]:
    """Everything of the lab still present: processes, netns, links, cgroup dirs, mounts."""
    prefix = lab_prefix(lab_id)
    state = lab_state.read_section(lab_id, lab_state.SANDBOX)
    found = []
    procs = {**_recorded_live(state), **pids_in_netns(_our_netns(prefix))}
    found += [f"process {pid} ({command_name(pid)}) of {where}" for pid, where in sorted(procs.items())]
    found += [f"netns {n}" for n in _our_netns(prefix)]
    found += [f"link {n}" for n in _our_links(prefix)]
    # A dir with live tasks belongs to another lab that uses the same Slurm node name.
    found += [f"cgroup dir {d}" for d in _cgroup_dirs(state) if not _cgroup_tasks(d)]
    found += [f"mount {m}" for m in _mounts_under((state or {}).get("lab_dir"))]
    return found


def _cgroup_tasks(top: Path) -> list[int]:
    """Every task in a cgroup v1 tree."""
    tasks = []
    for dirpath, _dirs, files in os.walk(top):
        if "tasks" in files:
            try:
                tasks += [int(t) for t in Path(dirpath, "tasks").read_text().split()]
            except OSError:
                continue
    return tasks


def teardown(lab_id: str, deadline_s: float = 10, log: Callable[[str], None] | None = None) -> list[str]:
    """Remove everything of the lab; idempotent, and safe before setup or after a crash.

    SIGTERM to every process of the lab at once, SIGKILL after ``deadline_s``, then netns,
    veths, bridge, Slurm's cgroup dirs and mounts under the lab dir. Returns ``leftovers``
    (empty on success; the state file is kept until then so that a rerun can finish the job).
    """
    prefix = lab_prefix(lab_id)
    state = lab_state.read_section(lab_id, lab_state.SANDBOX)
    recorded = [rec["pid"] for info in (state or {}).get("pods", {}).values() for rec in info.get("procs", [])]

    def alive() -> dict[int, str]:
        _reap(recorded)
        return {**_recorded_live(state), **pids_in_netns(_our_netns(prefix))}

    signalled: set[int] = set()
    end = time.monotonic() + deadline_s
    kill_end = end + 5
    while True:
        pids = alive()
        if not pids:
            break
        now = time.monotonic()
        if now >= kill_end:
            break
        sig = signal.SIGTERM if now < end else signal.SIGKILL
        for pid in pids:
            if sig == signal.SIGKILL or pid not in signalled:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
                signalled.add(pid)
        time.sleep(0.05)
    _reap(recorded)

    for link in _our_links(prefix):
        if link != f"{prefix}br":
            run(["ip", "link", "del", link], f"delete link {link}", check=False)
    for ns in _our_netns(prefix):
        run(["ip", "netns", "del", ns], f"delete netns {ns}", check=False)
    if Path(f"/sys/class/net/{prefix}br").exists():
        run(["ip", "link", "del", f"{prefix}br"], f"delete bridge {prefix}br", check=False)

    # a cgroup dir is busy until the kernel has released its last task: retry briefly
    cg_end = time.monotonic() + 3
    while True:
        busy = []
        for top in _cgroup_dirs(state):
            try:
                _rmdir_tree(top)
            except OSError as e:
                if e.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                    raise
                busy.append(top)
        if not busy or time.monotonic() >= cg_end:
            break
        time.sleep(0.05)

    # a Slurm built without multiple-slurmd uses one <ctrl>/slurm for every node: only when no
    # other lab is registered can it be ours; rmdir removes only what no process still uses
    if not any(f != lab_state.path_of(lab_id) for f in lab_state.STATE_DIR.glob("*.json")):
        for top in CGROUP_ROOT.glob("*/slurm"):
            try:
                _rmdir_tree(top)
            except OSError:
                pass

    for point in sorted(_mounts_under((state or {}).get("lab_dir")), key=lambda p: -p.count("/")):
        run(["umount", "-l", point], f"unmount {point}", check=False)

    remaining = leftovers(lab_id)
    if not remaining:
        lab_state.path_of(lab_id).unlink(missing_ok=True)
    elif log:
        log(f"teardown of lab {lab_id} left: " + "; ".join(remaining))
    return remaining
