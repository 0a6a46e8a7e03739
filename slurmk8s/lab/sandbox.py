"""Pod sandboxes: one network namespace + UTS/mount namespace per pod, all on one bridge.

A lab (``LabNetwork``) owns a Linux bridge with a /24 out of 198.18.0.0/15 (reserved for
tests; by default out of 198.18.0.0/16): no default route, no NAT, nothing forwarded off the
bridge, so pods reach only each other and the host's bridge address. Each pod (``PodSandbox``)
is a named netns with a veth on that bridge; its processes are started through ``podinit`` in
fresh UTS + mount namespaces, so each sees its own hostname, /etc/hosts, tmpfs dirs and device
nodes.

Everything a lab creates is named from the lab id, and recorded in the sandbox section of the
lab's state file (``state``), so that ``teardown(lab_id)`` can clean up after a crash from another
process, and ``leftovers(lab_id)`` can prove that nothing is left.
"""

from __future__ import annotations

import errno
import hashlib
import ipaddress
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmk8s.lab import podinit
from slurmk8s.lab import state as lab_state
from slurmk8s.lab.errors import LabError, LabUnavailable

STATE_DIR = lab_state.STATE_DIR  # a module name, so tests can move it
TEST_NET = ipaddress.ip_network("198.18.0.0/15")
# Default lab subnets come from the lower half only: 198.19.0.0/16 is left to the kind/podman
# networks of the e2e suite, which may share this host with labs.
LAB_NET = ipaddress.ip_network("198.18.0.0/16")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PODINIT = Path(podinit.__file__).resolve()
TOOL_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
_LAB_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_POD_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
_IFNAMSIZ = 15
START_TIMEOUT_S = 20
# Popen objects of this process by pid: teardown reaps through them so that Popen.returncode stays right
_POPENS: dict[int, subprocess.Popen] = {}


@dataclass(frozen=True)
class Bind:
    """Bind-mount host path ``src`` at ``dst`` inside the pod (dst created if missing)."""

    src: str | Path
    dst: str
    readonly: bool = False


@dataclass(frozen=True)
class Tmpfs:
    """A private tmpfs at ``dst`` inside the pod."""

    dst: str
    options: str = "mode=755"


@dataclass(frozen=True)
class DeviceNode:
    """A character device node that exists only in one pod's private /dev."""

    path: str
    major: int
    minor: int
    mode: int = 0o666


def fake_gpus(count: int) -> tuple[DeviceNode, ...]:
    """NVIDIA-like device nodes /dev/nvidia0..count-1 (char 195:N); no driver behind them."""
    return tuple(DeviceNode(f"/dev/nvidia{i}", 195, i) for i in range(count))


# ---------------------------------------------------------------- names and state


def lab_prefix(lab_id: str) -> str:
    """Prefix of every netns and link of a lab: 'sk' + 6 hex digits of the id's hash."""
    if not _LAB_ID.match(lab_id):
        raise LabError(f"lab id {lab_id!r}: expected lowercase letters, digits and '-', at most 63")
    return "sk" + hashlib.sha1(lab_id.encode()).hexdigest()[:6]


def default_subnet(lab_id: str) -> ipaddress.IPv4Network:
    """The lab's /24 in 198.18.0.0/16, chosen by the id's hash so that labs rarely collide."""
    index = int(hashlib.sha1(lab_id.encode()).hexdigest()[6:12], 16) % 2 ** (24 - LAB_NET.prefixlen)
    return ipaddress.ip_network((int(LAB_NET.network_address) + (index << 8), 24))


def _state_file(lab_id: str) -> Path:
    return lab_state.path_of(lab_id, STATE_DIR)


def _load_state(lab_id: str) -> dict | None:
    """The sandbox section of the lab's state file."""
    return lab_state.read_section(lab_id, lab_state.SANDBOX, STATE_DIR)


def _run(argv: Sequence[str], what: str, timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess:
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


def _tool(name: str) -> str:
    """Absolute path of a host tool, so that a pod's env (its PATH) cannot hide it."""
    found = shutil.which(name, path=TOOL_ENV["PATH"])
    if found is None:
        raise LabError(f"{name} is not installed: apt-get install util-linux iproute2")
    return found


def _proc_start_time(pid: int) -> int | None:
    """Start time of pid in clock ticks (None if gone or a zombie): tells pid reuse apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


# ---------------------------------------------------------------- network


class LabNetwork:
    """The bridge of one lab and the registry of its pods."""

    def __init__(self, lab_id: str, subnet: str | None = None, lab_dir: str | Path | None = None,
                 state_file: lab_state.StateFile | None = None):
        self.lab_id = lab_id
        self.prefix = lab_prefix(lab_id)
        self.bridge = f"{self.prefix}br"
        self.subnet = ipaddress.ip_network(subnet) if subnet else default_subnet(lab_id)
        if self.subnet.prefixlen != 24 or not self.subnet.subnet_of(TEST_NET):
            raise LabError(f"lab subnet {self.subnet}: expected a /24 inside {TEST_NET} (reserved for tests)")
        self.gateway = str(self.subnet.network_address + 1)
        # locally administered, unicast, fixed for the lab's life
        self.bridge_mac = "02:" + ":".join(hashlib.sha1(f"{lab_id}/bridge".encode()).hexdigest()[i:i + 2]
                                           for i in range(0, 10, 2))
        self.lab_dir = Path(lab_dir) if lab_dir else Path("/tmp") / f"slurmk8s-lab-{lab_id}"
        self.pods: dict[str, PodSandbox] = {}
        self.lock = threading.RLock()  # pods are added, started and removed from several threads
        self.state_file = state_file  # made on first save, in the STATE_DIR of that moment
        self._cgroups_seen: set[str] = set()  # of removed pods too: their dirs may outlive them

    def _state(self) -> dict:
        """A copy (save runs while other threads add pods and processes)."""
        return {
            "lab_id": self.lab_id, "prefix": self.prefix, "bridge": self.bridge, "subnet": str(self.subnet),
            "lab_dir": str(self.lab_dir),
            "pods": {p.name: {"hostname": p.hostname, "ip": p.ip, "netns": p.netns, "veth": p.veth,
                              "cgroups": list(p.cgroup_names), "procs": list(p._recorded)}
                     for p in list(self.pods.values())},
            "cgroups": sorted(self._cgroups_seen | {c for p in self.pods.values() for c in p.cgroup_names}),
        }

    def save(self) -> None:
        """Record the lab's pods and processes for a later ``teardown``/``leftovers``."""
        with self.lock:
            if self.state_file is None:
                self.state_file = lab_state.StateFile(self.lab_id, STATE_DIR)
            self.state_file.put(lab_state.SANDBOX, self._state())

    def create(self) -> LabNetwork:
        """Create the bridge; LabError if this lab already exists (run ``teardown`` first)."""
        if _load_state(self.lab_id) is not None or Path(f"/sys/class/net/{self.bridge}").exists():
            raise LabError(f"lab {self.lab_id} already exists: run teardown({self.lab_id!r}) first")
        used = _addresses_in_use()
        if any(ipaddress.ip_address(a) in self.subnet for a in used):
            raise LabError(f"lab subnet {self.subnet} is already in use on this host: pass another subnet")
        self.lab_dir.mkdir(parents=True, exist_ok=True)
        self.save()  # first, so that a failure below is still cleaned up by teardown
        # A bridge whose address is not set takes the lowest of its ports' addresses, so it changes
        # as pods come and go; the pods' ARP entries for the gateway (where the scale API answers)
        # then point at the old one and their requests stall until the entry is probed again.
        _run(["ip", "link", "add", self.bridge, "address", self.bridge_mac, "type", "bridge"],
             f"create bridge {self.bridge}")
        _run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge], f"address bridge {self.bridge}")
        _run(["ip", "link", "set", self.bridge, "up"], f"bring up bridge {self.bridge}")
        return self

    def add_pod(self, name: str, hostname: str | None = None, ip: str | None = None,
                devices: Iterable[DeviceNode] = (), index: int | None = None,
                cgroup_names: Iterable[str] = ()) -> PodSandbox:
        """Create a pod sandbox (netns + veth on the bridge); ip defaults to .10 + its index.

        ``cgroup_names``: Slurm node names whose cgroup dirs (slurm_<name>) teardown removes,
        when they differ from the hostname (NodeHostname != NodeName).
        """
        with self.lock:
            if name in self.pods:
                raise LabError(f"pod {name} already exists in lab {self.lab_id}")
            index = len(self.pods) if index is None else index
            if any(p.index == index for p in self.pods.values()):
                raise LabError(f"pod {name}: index {index} is taken in lab {self.lab_id}")
            ip = ip or str(self.subnet.network_address + 10 + index)
            taken = {self.gateway} | {p.ip for p in self.pods.values()}
            if ipaddress.ip_address(ip) not in self.subnet or ip in taken or ip.endswith((".0", ".255")):
                raise LabError(f"pod {name}: ip {ip} is not a free host address of {self.subnet}")
            pod = PodSandbox(self, name, hostname or name, ip, index, tuple(devices), tuple(cgroup_names))
            self.pods[name] = pod
            self.save()
        pod.create()
        return pod

    def remove_pod(self, name: str, grace_s: float = 30) -> None:
        """Stop a pod as the kubelet would (SIGTERM, SIGKILL after grace_s) and delete its netns and veth."""
        pod = self.pods[name]
        live = [p for p in pod.processes if p.poll() is None]
        for proc in live:
            proc.terminate()
        end = time.monotonic() + grace_s
        for proc in live:
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in _pids_in_netns([pod.netns]):  # job steps and other strays
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _run(["ip", "link", "del", pod.veth], f"delete link {pod.veth}", check=False)
        _run(["ip", "netns", "del", pod.netns], f"delete netns {pod.netns}", check=False)
        with self.lock:
            self._cgroups_seen |= {f"{c}" for c in pod.cgroup_names}
            del self.pods[name]
            self.save()

    def hosts_text(self, extra: Mapping[str, str] | None = None) -> str:
        """An /etc/hosts for the pods: localhost, every pod's hostname, then ``extra`` name -> ip."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{p.ip} {p.hostname}" for p in self.pods.values()]
        lines += [f"{ip} {name}" for name, ip in (extra or {}).items()]
        return "\n".join(lines) + "\n"

    def destroy(self, deadline_s: float = 10) -> list[str]:
        """Tear the whole lab down (see ``teardown``); returns what could not be removed."""
        return teardown(self.lab_id, deadline_s=deadline_s)

    def __enter__(self) -> LabNetwork:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def _addresses_in_use() -> list[str]:
    out = _run(["ip", "-j", "addr", "show"], "list addresses").stdout
    return [a["local"] for link in json.loads(out or "[]") for a in link.get("addr_info", []) if "local" in a]


# ---------------------------------------------------------------- pods


class PodSandbox:
    """One pod: a netns with eth0 on the lab bridge; processes started in it by ``start``."""

    def __init__(self, network: LabNetwork, name: str, hostname: str, ip: str, index: int,
                 devices: tuple[DeviceNode, ...] = (), cgroup_names: tuple[str, ...] = ()):
        if not _POD_NAME.match(name) or not _POD_NAME.match(hostname):
            raise LabError(f"pod {name!r} / hostname {hostname!r}: expected a DNS label")
        self.network = network
        self.name = name
        self.hostname = hostname
        self.ip = ip
        self.devices = devices
        self.index = index
        self.cgroup_names = cgroup_names
        self.netns = f"{network.prefix}-{name}"
        self.veth = f"{network.prefix}v{index}"
        if len(self.veth) > _IFNAMSIZ:
            raise LabError(f"pod {name}: interface name {self.veth} is longer than {_IFNAMSIZ}")
        self.processes: list[subprocess.Popen] = []
        self.logs: dict[int, Path] = {}
        self._specs: dict[int, dict] = {}
        self._recorded: list[dict] = []

    def create(self) -> None:
        """Create the netns, the veth pair (eth0 inside), addresses and links."""
        ns = self.netns
        _run(["ip", "netns", "add", ns], f"create netns {ns}")
        _run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
             f"create veth {self.veth}")
        _run(["ip", "link", "set", self.veth, "master", self.network.bridge, "up"], f"attach {self.veth}")
        for args in (["addr", "add", f"{self.ip}/24", "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "lo", "up"]):
            _run(["ip", "-n", ns, *args], f"configure pod {self.name}")

    def start(self, argv: Sequence[str], env: Mapping[str, str], mounts: Iterable[Bind | Tmpfs] = (),
              rootfs: str | Path | None = None, workdir: str | None = None,
              stdout_path: str | Path | None = None, layer: str | Path | None = None,
              identity: Mapping | None = None, unprivileged: bool = False) -> subprocess.Popen:
        """Run argv in the foreground inside the pod, with exactly ``env``; Popen.pid is the command.

        The command sees the pod hostname, ``mounts`` (shallowest first), the pod's device
        nodes, and, given a rootfs, runs chrooted in it with /proc, /dev and /sys. Given a
        ``layer`` dir too, it runs on an overlay of the rootfs whose writes land in a fresh
        layer/upper (a container's own writable layer) and no lab dir; without one, the rootfs
        is shared and the lab dir is bound in. ``identity`` (kubelet.Identity.to_spec()) is the
        user, groups and capabilities it execs as; None keeps the host's root. ``unprivileged``
        gives it what a runtime gives an unprivileged container: /sys and the cgroup trees below
        it read-only, and a minimal /dev of its own (the pod's device nodes included).
        Output (stdout and stderr) is appended to ``stdout_path`` (default lab_dir/NAME.out).
        """
        if not argv:
            raise LabError(f"pod {self.name}: empty command")
        if rootfs is not None and not Path(rootfs, "usr/bin").is_dir():
            raise LabError(f"pod {self.name}: rootfs {rootfs} is not a Debian root file system")
        spec = {
            "hostname": self.hostname,
            "rootfs": str(rootfs) if rootfs else None,
            "layer": _fresh_layer(Path(layer)) if layer and rootfs else None,
            "lab_dir": None if layer else str(self.network.lab_dir),
            "mounts": [_mount_spec(m) for m in mounts],
            "devices": [{"path": d.path, "major": d.major, "minor": d.minor, "mode": d.mode} for d in self.devices],
            "workdir": workdir,
            "argv": [str(a) for a in argv],
            "env": dict(env),
            "identity": dict(identity) if identity else None,
            "readonly_sys": unprivileged,
            "minimal_dev": unprivileged,
        }
        log = Path(stdout_path) if stdout_path else self.network.lab_dir / f"{self.name}.out"
        log.parent.mkdir(parents=True, exist_ok=True)
        # podinit holds the pipe's write end until its final exec (close-on-exec): EOF means the
        # command runs in its namespaces, so exec_in right after start sees the pod, not the host
        ready_r, ready_w = os.pipe()
        spec["ready_fd"] = ready_w
        cmd = [_tool("nsenter"), f"--net=/run/netns/{self.netns}", _tool("unshare"), "--uts", "--mount",
               "--propagation", "private", "--", sys.executable, "-I", "-S", str(PODINIT), podinit.encode_spec(spec)]
        try:
            with log.open("ab") as out:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        env=TOOL_ENV, start_new_session=True, pass_fds=(ready_w,))
        except OSError as e:
            os.close(ready_r)
            raise LabError(f"pod {self.name}: cannot start {argv[0]}: {e}") from e
        finally:
            os.close(ready_w)
        self.processes.append(proc)
        _POPENS[proc.pid] = proc
        self.logs[proc.pid] = log
        self._specs[proc.pid] = spec
        with self.network.lock:
            self._recorded.append({"pid": proc.pid, "start": _proc_start_time(proc.pid), "argv0": spec["argv"][0]})
            self.network.save()
        with os.fdopen(ready_r, "rb") as ready:
            if not select.select([ready], [], [], START_TIMEOUT_S)[0]:
                proc.kill()
                raise LabError(f"pod {self.name}: {argv[0]} not started after {START_TIMEOUT_S} s:\n{tail(log)}")
            ready.read()
        return proc

    def log_of(self, proc: subprocess.Popen) -> Path:
        """The output file of a process started by ``start``."""
        return self.logs[proc.pid]

    def exec_in(self, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 30,
                input: str | None = None, proc: subprocess.Popen | None = None) -> subprocess.CompletedProcess:
        """Run a one-off command in the namespaces, root and cwd of a running pod process, as its user.

        ``proc`` defaults to the pod's first live process; ``env`` to that process's env.
        Output is captured as text; LabError if nothing runs in the pod or on timeout.
        """
        target = proc or next((p for p in self.processes if p.poll() is None), None)
        if target is None or target.poll() is not None:
            why = "" if target is None else (f" ({self._specs[target.pid]['argv'][0]} exited "
                                             f"{target.returncode}; last output:\n{tail(self.logs[target.pid])})")
            raise LabError(f"pod {self.name}: no running process to exec {argv[0]!r} in{why}")
        spec = self._specs[target.pid]
        return run_entered(target.pid, argv, dict(env) if env is not None else spec["env"], spec["identity"],
                           timeout, input, f"pod {self.name}")


def _fresh_layer(top: Path) -> dict:
    """Empty upper/work dirs of an overlay, and its mount point: a restarted container starts clean."""
    if top.exists():
        shutil.rmtree(top)
    dirs = {name: top / name for name in ("upper", "work", "merged")}
    for d in dirs.values():
        d.mkdir(parents=True)
    return {name: str(d) for name, d in dirs.items()}


def run_entered(pid: int, argv: Sequence[str], env: Mapping[str, str], identity: Mapping | None,
                timeout: float, input: str | None = None, what: str = "") -> subprocess.CompletedProcess:
    """Run argv in the namespaces, root and cwd of pid as ``identity`` (kubectl exec into its container)."""
    spec = {"enter": pid, "argv": [str(a) for a in argv], "env": dict(env),
            "identity": dict(identity) if identity else None}
    cmd = [sys.executable, "-I", "-S", str(PODINIT), podinit.encode_spec(spec)]
    try:
        return subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=TOOL_ENV,
                              stdin=subprocess.DEVNULL if input is None else None)
    except subprocess.TimeoutExpired:
        raise LabError(f"{what or f'process {pid}'}: `{' '.join(map(str, argv))}` timed out after {timeout} s") from None


def _mount_spec(m: Bind | Tmpfs | tuple) -> dict:
    if isinstance(m, tuple) and not isinstance(m, (Bind, Tmpfs)):
        m = Bind(*m)
    if isinstance(m, Bind):
        if not str(m.dst).startswith("/"):
            raise LabError(f"bind {m.src} -> {m.dst}: destination must be absolute")
        return {"type": "bind", "src": str(Path(m.src).resolve()), "dst": m.dst, "readonly": m.readonly}
    if isinstance(m, Tmpfs):
        if not m.dst.startswith("/"):
            raise LabError(f"tmpfs {m.dst}: destination must be absolute")
        return {"type": "tmpfs", "dst": m.dst, "options": m.options}
    raise LabError(f"unknown mount {m!r}: expected Bind, Tmpfs or (src, dst)")


def mount_tmpfs(target: Path, mode: int = 0o755) -> None:
    """A tmpfs at target on the host (teardown unmounts whatever is mounted under the lab dir)."""
    target.mkdir(parents=True, exist_ok=True)
    _run(["mount", "-t", "tmpfs", "-o", f"mode={mode:o}", "tmpfs", str(target)], f"mount a tmpfs at {target}")


# ---------------------------------------------------------------- logs


def tail(path: str | Path, lines: int = 20) -> str:
    """The last lines of a text file ('' if it does not exist)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


# ---------------------------------------------------------------- preflight


def preflight() -> None:
    """LabError unless we are root, the namespace tools exist and namespaces can be created."""
    if os.geteuid() != 0:
        raise LabUnavailable("the pod lab needs root (network, UTS and mount namespaces, bridges, mounts)")
    missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool, path=TOOL_ENV["PATH"]) is None]
    if missing:
        raise LabUnavailable(f"the pod lab needs {', '.join(missing)}: apt-get install util-linux iproute2")
    done = _run(["unshare", "--net", "--uts", "--mount", "--propagation", "private", "true"],
                "create namespaces", check=False)
    if done.returncode != 0:
        raise LabUnavailable(f"cannot create namespaces here (unshare exited {done.returncode}): {done.stderr.strip()}")


# ---------------------------------------------------------------- teardown


def _our_netns(prefix: str) -> list[str]:
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix + "-"))


def _our_links(prefix: str) -> list[str]:
    return sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefix))


def _pids_in_netns(names: Iterable[str]) -> dict[int, str]:
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
        name = inodes.get((st.st_dev, st.st_ino))
        if name and _proc_start_time(int(entry)) is not None:
            found[int(entry)] = name
    return found


def _recorded_live(state: dict | None) -> dict[int, str]:
    """Recorded pod processes still alive (same pid and start time): they may outlive their netns."""
    live = {}
    for pod, info in (state or {}).get("pods", {}).items():
        for rec in info.get("procs", []):
            if rec.get("start") is not None and _proc_start_time(rec["pid"]) == rec["start"]:
                live[rec["pid"]] = pod
    return live


def _reap(pids: Iterable[int]) -> None:
    for pid in pids:
        if pid in _POPENS:
            _POPENS[pid].poll()
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
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
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
    state = _load_state(lab_id)
    found = []
    procs = {**_recorded_live(state), **_pids_in_netns(_our_netns(prefix))}
    found += [f"process {pid} ({_comm(pid)}) of {where}" for pid, where in sorted(procs.items())]
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
    state = _load_state(lab_id)
    recorded = [rec["pid"] for info in (state or {}).get("pods", {}).values() for rec in info.get("procs", [])]

    def alive() -> dict[int, str]:
        _reap(recorded)
        return {**_recorded_live(state), **_pids_in_netns(_our_netns(prefix))}

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
            _run(["ip", "link", "del", link], f"delete link {link}", check=False)
    for ns in _our_netns(prefix):
        _run(["ip", "netns", "del", ns], f"delete netns {ns}", check=False)
    if Path(f"/sys/class/net/{prefix}br").exists():
        _run(["ip", "link", "del", f"{prefix}br"], f"delete bridge {prefix}br", check=False)

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
    if not any(f != _state_file(lab_id) for f in STATE_DIR.glob("*.json")):
        for top in CGROUP_ROOT.glob("*/slurm"):
            try:
                _rmdir_tree(top)
            except OSError:
                pass

    for point in sorted(_mounts_under((state or {}).get("lab_dir")), key=lambda p: -p.count("/")):
        _run(["umount", "-l", point], f"unmount {point}", check=False)

    remaining = leftovers(lab_id)
    if not remaining:
        _state_file(lab_id).unlink(missing_ok=True)
    elif log:
        log(f"teardown of lab {lab_id} left: " + "; ".join(remaining))
    return remaining
