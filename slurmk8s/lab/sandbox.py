"""Pod sandboxes: one network namespace + UTS/mount namespace per pod, all on one bridge.

A lab (``LabNetwork``) owns a Linux bridge with a /24 out of 198.18.0.0/15 (reserved for
tests; by default out of 198.18.0.0/16): no default route, no NAT, nothing forwarded off the
bridge, so pods reach only each other and the host's bridge address. Each pod (``PodSandbox``)
is a named netns with a veth on that bridge; its processes are started through ``podinit`` in
fresh UTS + mount namespaces, so each sees its own hostname, /etc/hosts, tmpfs dirs and device
nodes.

Everything a lab creates is named from the lab id, and recorded in the sandbox section of the
lab's state file (``state``), so that ``teardown.teardown(lab_id)`` can clean up after a crash
from another process, and ``teardown.leftovers(lab_id)`` can prove that nothing is left.
"""

from __future__ import annotations

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmk8s.lab import podinit
from slurmk8s.lab import state as lab_state
from slurmk8s.lab.errors import LabError, LabUnavailable
from slurmk8s.lab.hosttools import POPENS, TOOL_ENV, run, start_time, tool
from slurmk8s.lab.state import lab_prefix
from slurmk8s.lab.teardown import pids_in_netns, teardown

TEST_NET = ipaddress.ip_network("198.18.0.0/15")
# Default lab subnets come from the lower half only: 198.19.0.0/16 is left to the kind/podman
# networks of the e2e suite, which may share this host with labs.
LAB_NET = ipaddress.ip_network("198.18.0.0/16")
PODINIT = Path(podinit.__file__).resolve()
_POD_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{0,62}$")
_IFNAMSIZ = 15
START_TIMEOUT_S = 20


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


def default_subnet(lab_id: str) -> ipaddress.IPv4Network:
    """The lab's /24 in 198.18.0.0/16, chosen by the id's hash so that labs rarely collide."""
    index = int(hashlib.sha1(lab_id.encode()).hexdigest()[6:12], 16) % 2 ** (24 - LAB_NET.prefixlen)
    return ipaddress.ip_network((int(LAB_NET.network_address) + (index << 8), 24))


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
        self.state_file = state_file  # made on first save, in lab_state.STATE_DIR of that moment
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
                self.state_file = lab_state.StateFile(self.lab_id)
            self.state_file.put(lab_state.SANDBOX, self._state())

    def create(self) -> LabNetwork:
        """Create the bridge; LabError if this lab already exists (run ``teardown`` first)."""
        if lab_state.read_section(self.lab_id, lab_state.SANDBOX) is not None or Path(f"/sys/class/net/{self.bridge}").exists():
            raise LabError(f"lab {self.lab_id} already exists: run teardown({self.lab_id!r}) first")
        used = _addresses_in_use()
        if any(ipaddress.ip_address(a) in self.subnet for a in used):
            raise LabError(f"lab subnet {self.subnet} is already in use on this host: pass another subnet")
        self.lab_dir.mkdir(parents=True, exist_ok=True)
        self.save()  # first, so that a failure below is still cleaned up by teardown
        # A bridge whose address is not set takes the lowest of its ports' addresses, so it changes
        # as pods come and go; the pods' ARP entries for the gateway (where the scale API answers)
        # then point at the old one and their requests stall until the entry is probed again.
        run(["ip", "link", "add", self.bridge, "address", self.bridge_mac, "type", "bridge"],
             f"create bridge {self.bridge}")
        run(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge], f"address bridge {self.bridge}")
        run(["ip", "link", "set", self.bridge, "up"], f"bring up bridge {self.bridge}")
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
        for pid in pids_in_netns([pod.netns]):  # job steps and other strays
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        run(["ip", "link", "del", pod.veth], f"delete link {pod.veth}", check=False)
        run(["ip", "netns", "del", pod.netns], f"delete netns {pod.netns}", check=False)
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
    out = run(["ip", "-j", "addr", "show"], "list addresses").stdout
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
        run(["ip", "netns", "add", ns], f"create netns {ns}")
        run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
             f"create veth {self.veth}")
        run(["ip", "link", "set", self.veth, "master", self.network.bridge, "up"], f"attach {self.veth}")
        for args in (["addr", "add", f"{self.ip}/24", "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "lo", "up"]):
            run(["ip", "-n", ns, *args], f"configure pod {self.name}")

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
        cmd = [tool("nsenter"), f"--net=/run/netns/{self.netns}", tool("unshare"), "--uts", "--mount",
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
        POPENS[proc.pid] = proc
        self.logs[proc.pid] = log
        self._specs[proc.pid] = spec
        with self.network.lock:
            self._recorded.append({"pid": proc.pid, "start": start_time(proc.pid), "argv0": spec["argv"][0]})
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
    run(["mount", "-t", "tmpfs", "-o", f"mode={mode:o}", "tmpfs", str(target)], f"mount a tmpfs at {target}")


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
    missing = [name for name in ("unshare", "nsenter", "ip") if shutil.which(name, path=TOOL_ENV["PATH"]) is None]
    if missing:
        raise LabUnavailable(f"the pod lab needs {', '.join(missing)}: apt-get install util-linux iproute2")
    done = run(["unshare", "--net", "--uts", "--mount", "--propagation", "private", "true"],
                "create namespaces", check=False)
    if done.returncode != 0:
        raise LabUnavailable(f"cannot create namespaces here (unshare exited {done.returncode}): {done.stderr.strip()}")
