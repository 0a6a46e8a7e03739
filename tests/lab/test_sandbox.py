"""Pod sandboxes for real: namespaces, bridge, mounts, devices, teardown, and a Slurm smoke.

Needs root (namespaces, bridges, mounts); every lab gets a unique id and is torn down.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from slurmk8s.lab import podinit, rootfs
from slurmk8s.lab import state as lab_state
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.runtime import wait_until
from slurmk8s.lab.sandbox import Bind, LabNetwork, Tmpfs, fake_gpus, preflight
from slurmk8s.lab.teardown import labs_sharing_cgroups, leftovers, teardown

IS_ROOT = os.geteuid() == 0
PATH_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def _skip(reason: str) -> None:
    print(f"SKIP: {reason}")
    pytest.skip(reason)


@pytest.fixture
def needs_root() -> None:
    if not IS_ROOT:
        _skip("the pod lab needs root (namespaces, bridges, mounts)")


@pytest.fixture
def net(needs_root, tmp_path):
    """A fresh lab network, torn down afterwards even when the test fails."""
    lab_id = f"t-{uuid.uuid4().hex[:10]}"
    assert teardown(lab_id) == []  # safe before setup
    network = LabNetwork(lab_id, lab_dir=tmp_path / "lab").create()
    yield network
    teardown(lab_id, deadline_s=3)


def _py(pod, code: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return pod.exec_in([sys.executable, "-I", "-c", code], env=PATH_ENV, timeout=timeout)


ECHO_SERVER = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    conn, peer = srv.accept()
    with conn:
        conn.sendall(f"{peer[0]} {conn.recv(100).decode()}".encode())
"""

ECHO_CLIENT = """
import socket
with socket.create_connection(("{ip}", 7000), timeout=2) as s:
    s.sendall(b"hello")
    print(s.recv(200).decode())
"""


# ---------------------------------------------------------------- pure helpers (no root)


def test_resolve_in_root_keeps_absolute_symlinks_inside_the_rootfs(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "var").mkdir()
    (tmp_path / "var/run").symlink_to("/run")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/escape").symlink_to("../../../../..")
    assert podinit.resolve_in_root(str(tmp_path), "/var/run/munge") == str(tmp_path / "run/munge")
    assert podinit.resolve_in_root(str(tmp_path), "/etc/escape/x") == str(tmp_path / "x")
    assert podinit.resolve_in_root("/", "/var/run/../run") == "/var/run"


def test_wait_until_returns_the_value_or_times_out_with_the_reason():
    calls = iter([0, None, "ready"])
    assert wait_until(lambda: next(calls), 5, "thing", interval=0.01) == "ready"

    def broken():
        raise OSError("connection refused")

    started = time.monotonic()
    with pytest.raises(LabError, match=r"(?s)thing: not ready after 0.3 s.*connection refused"):
        wait_until(broken, 0.3, "thing", interval=0.05)
    assert time.monotonic() - started < 2


def test_labs_with_slurm_nodes_of_the_same_name_are_found(tmp_path, monkeypatch):
    """Two labs with a node cpu-2 would share /sys/fs/cgroup/*/slurm_cpu-2 (boot refuses the second)."""
    monkeypatch.setattr(lab_state, "STATE_DIR", tmp_path)
    (tmp_path / "dev-1.json").write_text(json.dumps({"pods": {"dev-cpu-2": {"hostname": "dev-cpu-2", "cgroups": ["cpu-2"]}},
                                                     "cgroups": ["cpu-0", "cpu-2"]}))
    (tmp_path / "gpu-2.json").write_text(json.dumps({"pods": {}, "cgroups": ["a100-0"]}))
    (tmp_path / "mine.json").write_text(json.dumps({"pods": {}, "cgroups": ["cpu-2"]}))
    assert labs_sharing_cgroups("mine", {"cpu-2", "cpu-3", "a100-1"}) == {"dev-1": ["cpu-2"]}
    assert labs_sharing_cgroups("mine", {"h100-0"}) == {}


def test_lab_names_fit_interface_limits():
    network = LabNetwork("a-lab-with-a-rather-long-name-0123456789-0123456789-0123456789")
    other = LabNetwork("another-lab")
    assert len(network.bridge) <= 15 and network.bridge != other.bridge
    assert network.subnet != other.subnet and network.subnet.subnet_of(other.subnet.supernet(new_prefix=15))
    with pytest.raises(LabError, match="lab subnet 10.0.0.0/24"):
        LabNetwork("x", subnet="10.0.0.0/24")
    with pytest.raises(LabError, match="lab id 'Bad_Id'"):
        LabNetwork("Bad_Id")


def test_default_subnets_stay_out_of_the_e2e_half_of_the_test_block():
    import ipaddress
    subnets = {LabNetwork(f"lab-{i}").subnet for i in range(2000)}
    e2e = ipaddress.ip_network("198.19.0.0/16")
    assert all(s.prefixlen == 24 and s.subnet_of(ipaddress.ip_network("198.18.0.0/16")) for s in subnets), \
        sorted(str(s) for s in subnets if s.subnet_of(e2e))
    assert len(subnets) > 200  # the hash still spreads labs over the whole /16
    # an explicit subnet may still be anywhere in 198.18.0.0/15, and nowhere else
    assert str(LabNetwork("x", subnet="198.19.7.0/24").subnet) == "198.19.7.0/24"
    with pytest.raises(LabError, match=r"lab subnet 198.20.0.0/24: expected a /24 inside 198.18.0.0/15"):
        LabNetwork("x", subnet="198.20.0.0/24")


# ---------------------------------------------------------------- namespaces (root)


@pytest.mark.lab
def test_preflight_passes_as_root(needs_root):
    preflight()


@pytest.mark.lab
def test_two_pods_reach_each_other_over_the_bridge(net):
    a = net.add_pod("a", "pod-a")
    b = net.add_pod("b", "pod-b")
    server = a.start([sys.executable, "-I", "-c", ECHO_SERVER, a.ip, "7000"], PATH_ENV)
    idle = b.start(["sleep", "60"], PATH_ENV)
    client = ECHO_CLIENT.format(ip=a.ip)
    reply = wait_until(lambda: _py(b, client).stdout.strip(), 10, "echo server in pod a",
                       proc=server, log_path=a.log_of(server))
    # the server saw pod b's own address: the packet crossed the bridge between two netns
    assert reply == f"{b.ip} hello"
    assert idle.poll() is None
    # only the lab's /24 is routable from a pod: no default route leads off the bridge
    routes = a.exec_in(["ip", "route"], timeout=5).stdout
    assert routes.split()[0] == str(net.subnet) and "default" not in routes


@pytest.mark.lab
def test_hostname_inside_is_the_pod_hostname(net):
    pod = net.add_pod("h", "slurmctl-0-t")
    pod.start(["sleep", "60"], PATH_ENV)
    assert pod.exec_in(["hostname"], timeout=5).stdout.strip() == "slurmctl-0-t"
    assert socket.gethostname() != "slurmctl-0-t"


@pytest.mark.lab
def test_bind_mounts_are_visible_inside_only(net, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text(net.hosts_text({"db-t": "198.18.0.99"}))
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=lab\n")
    pod = net.add_pod("m", "pod-m")
    host_hosts = Path("/etc/hosts").read_text()
    pod.start(["sleep", "60"], PATH_ENV,
              mounts=[Bind(conf, "/run/slurmk8s-test/slurm.conf", readonly=True), Bind(hosts, "/etc/hosts"),
                      Tmpfs("/run")])
    assert pod.exec_in(["cat", "/run/slurmk8s-test/slurm.conf"]).stdout == "ClusterName=lab\n"
    assert "198.18.0.99 db-t" in pod.exec_in(["cat", "/etc/hosts"]).stdout
    assert pod.exec_in(["sh", "-c", "echo x > /run/slurmk8s-test/slurm.conf"]).returncode != 0  # readonly
    assert not Path("/run/slurmk8s-test").exists()
    assert Path("/etc/hosts").read_text() == host_hosts


@pytest.mark.lab
def test_fake_gpus_exist_only_in_their_pod(net):
    host_had = Path("/dev/nvidia0").exists()
    gpu = net.add_pod("g", "pod-g", devices=fake_gpus(2))
    cpu = net.add_pod("c", "pod-c")
    gpu.start(["sleep", "60"], PATH_ENV)
    cpu.start(["sleep", "60"], PATH_ENV)
    probe = """
import errno, json, os, stat
out = {}
for n in ("/dev/nvidia0", "/dev/nvidia1", "/dev/null"):
    try:
        st = os.stat(n)
    except FileNotFoundError:
        out[n] = "absent"; continue
    try:
        os.close(os.open(n, os.O_RDWR)); opened = "ok"
    except OSError as e:
        opened = errno.errorcode[e.errno]
    out[n] = [stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev), opened]
print(json.dumps(out))
"""
    inside = json.loads(_py(gpu, probe).stdout)
    # no driver behind major 195: open() reaches the (missing) driver, ENXIO/ENODEV, not ENOENT
    assert inside["/dev/nvidia0"][:3] == [True, 195, 0] and inside["/dev/nvidia0"][3] in ("ENXIO", "ENODEV")
    assert inside["/dev/nvidia1"][:3] == [True, 195, 1]
    assert inside["/dev/null"] == [True, 1, 3, "ok"]  # the rest of /dev still works
    other = json.loads(_py(cpu, probe).stdout)
    assert other["/dev/nvidia0"] == "absent" and other["/dev/nvidia1"] == "absent"
    assert Path("/dev/nvidia0").exists() == host_had


@pytest.mark.lab
def test_wait_until_fails_fast_with_the_dead_process_output(net):
    pod = net.add_pod("d", "pod-d")
    proc = pod.start(["sh", "-c", "echo starting; echo 'fatal: bad slurm.conf line 3' >&2; exit 3"], PATH_ENV)
    started = time.monotonic()
    with pytest.raises(LabError) as info:
        wait_until(lambda: False, 30, "slurmctld in pod d", proc=proc, log_path=pod.log_of(proc))
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert f"slurmctld in pod d: process {proc.pid} exited with code 3" in message
    assert "fatal: bad slurm.conf line 3" in message


@pytest.mark.lab
def test_podinit_failure_is_readable(net):
    pod = net.add_pod("f", "pod-f")
    proc = pod.start(["no-such-daemon", "-D"], PATH_ENV)
    with pytest.raises(LabError, match=r"(?s)exited with code 127.*exec no-such-daemon"):
        wait_until(lambda: False, 10, "no-such-daemon", proc=proc, log_path=pod.log_of(proc))


def _status(pid: int) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)


@pytest.mark.lab
def test_a_process_runs_as_its_identity_and_exec_joins_it_as_the_same(net):
    pod = net.add_pod("u", "pod-u")
    # uid 401 with groups 401 and 4242, SETUID (bit 7) and NET_BIND_SERVICE (bit 10) in its bounding set
    who = {"uid": 401, "gid": 401, "groups": [401, 4242], "caps": [7, 10], "no_new_privs": True}
    proc = pod.start(["sleep", "60"], PATH_ENV, identity=who)
    st = _status(proc.pid)
    assert (st["Uid"].split(), st["Gid"].split(), st["Groups"].split()) == (["401"] * 4, ["401"] * 4, ["401", "4242"])
    # not root: nothing effective or permitted; the bounding set keeps what setuid binaries could get
    assert (int(st["CapEff"], 16), int(st["CapPrm"], 16), int(st["CapBnd"], 16)) == (0, 0, 1 << 7 | 1 << 10)
    assert st["NoNewPrivs"] == "1"
    done = pod.exec_in(["sh", "-c", "id -u; id -G; grep -E '^(CapBnd|NoNewPrivs)' /proc/self/status"], proc=proc)
    assert done.stdout.split() == ["401", "401", "4242", "CapBnd:", f"{1 << 7 | 1 << 10:016x}", "NoNewPrivs:", "1"]


@pytest.mark.lab
def test_root_keeps_exactly_its_capability_set_effective(net):
    pod = net.add_pod("r", "pod-r")
    who = {"uid": 0, "gid": 0, "groups": [0], "caps": [0, 10], "no_new_privs": False}
    proc = pod.start(["sleep", "60"], PATH_ENV, identity=who)
    st = _status(proc.pid)
    assert int(st["CapEff"], 16) == int(st["CapBnd"], 16) == 1 << 0 | 1 << 10 and st["NoNewPrivs"] == "0"
    # CAP_SYS_ADMIN is gone: even root cannot mount now
    done = pod.exec_in(["mount", "-t", "tmpfs", "t", "/mnt"], proc=proc)
    assert done.returncode != 0 and "permission denied" in (done.stderr + done.stdout).lower()


def _tiny_image(top: Path) -> tuple[Path, list[Bind]]:
    """An image of a few host binaries, and binds of the host's libraries they need (read-only)."""
    image = top / "image"
    for d in ("usr/bin", "etc"):
        (image / d).mkdir(parents=True)
    (image / "etc/motd").write_text("from the image\n")
    for tool in ("sh", "cat", "sleep", "grep"):
        shutil.copy(shutil.which(tool), image / "usr/bin" / tool)
    (image / "lib").symlink_to("usr/lib")
    (image / "lib64").symlink_to("usr/lib64")
    return image, [Bind(Path(p).resolve(), f"/usr/{Path(p).resolve().name}", readonly=True) for p in ("/lib", "/lib64")]


@pytest.mark.lab
def test_writes_land_in_the_container_s_own_layer_never_in_the_image(net, tmp_path):
    image, mounts = _tiny_image(tmp_path)
    pod = net.add_pod("l", "pod-l")
    first = pod.start(["sh", "-c", "echo changed > /etc/motd; exec sleep 60"], PATH_ENV, mounts=mounts,
                      rootfs=image, layer=tmp_path / "layers/a")
    wait_until(lambda: (tmp_path / "layers/a/upper/etc/motd").exists(), 10, "the write", proc=first)
    assert (image / "etc/motd").read_text() == "from the image\n"
    second = pod.start(["sleep", "60"], PATH_ENV, mounts=mounts, rootfs=image, layer=tmp_path / "layers/b")
    assert pod.exec_in(["cat", "/etc/motd"], proc=second).stdout == "from the image\n"
    assert pod.exec_in(["cat", "/etc/motd"], proc=first).stdout == "changed\n"


@pytest.mark.lab
def test_an_unprivileged_container_gets_read_only_sys_and_cgroups_and_a_minimal_dev(net, tmp_path):
    image, libs = _tiny_image(tmp_path)
    pod = net.add_pod("s", "pod-s", devices=fake_gpus(1))
    sys_mounts = "grep -E ' /sys(/[^ ]*)? ' /proc/self/mountinfo"
    unprivileged = pod.start(["sleep", "60"], PATH_ENV, mounts=libs, rootfs=image, layer=tmp_path / "a",
                             unprivileged=True)
    lines = pod.exec_in(["sh", "-c", sys_mounts], proc=unprivileged).stdout.splitlines()
    assert len(lines) > 1 and all(line.split()[5].startswith("ro") for line in lines), lines
    assert any("/sys/fs/cgroup" in line for line in lines)
    host = next(line.split()[5] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split()[4] == "/sys")
    inside = next(line.split()[5] for line in lines if line.split()[4] == "/sys")
    assert inside.split(",")[1:] == host.split(",")[1:]  # the other flags (nosuid, relatime...) are kept
    # runc's few nodes, its own devpts and shm, and the pod's device; none of the host's disks
    dev = pod.exec_in(["sh", "-c", "cd /dev && echo *; echo x > /dev/null && echo null-ok"], proc=unprivileged)
    assert dev.stdout.split() == ["core", "fd", "full", "null", "nvidia0", "ptmx", "pts", "random", "shm",
                                  "stderr", "stdin", "stdout", "tty", "urandom", "zero", "null-ok"], dev.stderr
    privileged = pod.start(["sleep", "60"], PATH_ENV, mounts=libs, rootfs=image, layer=tmp_path / "b")
    lines = pod.exec_in(["sh", "-c", sys_mounts], proc=privileged).stdout.splitlines()
    assert lines[0].split()[5].startswith("rw"), lines
    host_nodes = sorted(p.name for p in Path("/dev").iterdir() if p.is_block_device())
    seen = pod.exec_in(["sh", "-c", "cd /dev && echo *"], proc=privileged).stdout.split()
    assert host_nodes and set(host_nodes) <= set(seen)


def _cgroup_controller() -> Path | None:
    for ctrl in ("pids", "freezer", "memory", "cpu"):
        path = Path("/sys/fs/cgroup", ctrl)
        if (path / "cgroup.procs").exists():
            return path
    return None


@pytest.mark.lab
def test_teardown_removes_everything_and_can_run_twice(needs_root, tmp_path):
    lab_id = f"t-{uuid.uuid4().hex[:10]}"
    network = LabNetwork(lab_id, lab_dir=tmp_path / "lab").create()
    try:
        a = network.add_pod("a", f"{lab_id}-a")
        b = network.add_pod("b", f"{lab_id}-b", devices=fake_gpus(1))
        stubborn = a.start(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], PATH_ENV)
        b.start(["sh", "-c", "setsid sleep 300 & exec sleep 300"], PATH_ENV, mounts=[Tmpfs("/run")])
        # sh + its sleep in a; the setsid'd sleep and the exec'd sleep in b
        wait_until(lambda: sum(x.startswith("process") for x in leftovers(lab_id)) >= 3, 5, "pod processes")
        ctrl = _cgroup_controller()
        if ctrl is not None:  # what slurmd leaves behind: slurm_<node>/uid_0/job_1/step_0
            (ctrl / f"slurm_{lab_id}-a/uid_0/job_1/step_0").mkdir(parents=True)
        mnt = network.lab_dir / "mnt"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], check=True)
        before = leftovers(lab_id)
        assert any(x.startswith("process") for x in before)
        assert f"netns {network.prefix}-a" in before and f"link {network.bridge}" in before
        assert f"mount {mnt}" in before
        if ctrl is not None:
            assert f"cgroup dir {ctrl}/slurm_{lab_id}-a" in before
        started = time.monotonic()
        assert teardown(lab_id, deadline_s=0.5) == []
        assert time.monotonic() - started < 5
        assert stubborn.returncode == -9  # ignored SIGTERM, got SIGKILL after the deadline
        assert leftovers(lab_id) == []
        assert teardown(lab_id) == []
    finally:
        teardown(lab_id, deadline_s=1)


@pytest.mark.lab
def test_the_bridge_keeps_its_address_and_pods_keep_reaching_the_gateway(net):
    """An unset bridge address follows the lowest port's, so it changed as pods came and went, and
    pods' ARP entries for the gateway (where the lab's scale API answers) went stale: requests stalled."""
    address = Path(f"/sys/class/net/{net.bridge}/address")
    assert address.read_text().strip() == net.bridge_mac
    server = socket.create_server((net.gateway, 7001))
    server.settimeout(10)
    try:
        _, _, c = (net.add_pod(n, f"{net.lab_id}-{n}") for n in "abc")
        c.start(["sleep", "600"], PATH_ENV)  # something to exec beside
        probe = f"import socket; socket.create_connection(('{net.gateway}', 7001), timeout=2).close()"

        def reach(pod) -> None:
            client = pod.exec_in([sys.executable, "-I", "-c", probe], env=PATH_ENV, timeout=10)
            server.accept()[0].close()
            assert client.returncode == 0, client.stderr
        reach(c)  # c learns the gateway's address
        net.remove_pod("a")
        net.remove_pod("b")
        net.add_pod("d", f"{net.lab_id}-d")
        assert address.read_text().strip() == net.bridge_mac
        reach(c)  # at once, with what it learned before
    finally:
        server.close()


@pytest.mark.lab
def test_two_labs_coexist(needs_root, tmp_path):
    ids = [f"t-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        nets = [LabNetwork(i, lab_dir=tmp_path / i).create() for i in ids]
        pods = [n.add_pod("w0", f"{n.lab_id}-w0") for n in nets]
        for pod in pods:
            pod.start(["sleep", "60"], PATH_ENV)
        assert nets[0].subnet != nets[1].subnet
        # same pod name in two labs: separate netns, and no route from one lab into the other
        probe = f"import socket; socket.create_connection(('{pods[1].ip}', 9), timeout=1)"
        assert "unreachable" in _py(pods[0], probe).stderr
        assert teardown(ids[0]) == []
        assert pods[1].exec_in(["hostname"]).stdout.strip() == f"{ids[1]}-w0"
    finally:
        for i in ids:
            teardown(i, deadline_s=1)


# ---------------------------------------------------------------- Slurm smoke


def _image_for(name: str, series: str) -> Path:
    """The exported tree of one of the project's images (each carries munge and the Slurm clients)."""
    ref = rootfs.project_image(name, series)
    try:
        found = rootfs.local_images().get(ref)
    except LabError as e:
        _skip(str(e))
    if found is None:
        _skip(f"{ref} is not built: slurmk8s images build --slurm {series}")
    return rootfs.resolve([ref], series, log=lambda _: None)[ref].path


@pytest.mark.lab
@pytest.mark.parametrize("series", ["22.05", "24.11", "26.05"])
def test_slurm_runs_across_two_pods(net, tmp_path, request, series):
    ctl_root, node_root = _image_for("slurmctld", series), _image_for("slurmd", series)
    layers = tmp_path / "layers"  # each process writes into a layer of its own, never into the image
    started = time.monotonic()
    ctl_host, workers = f"{net.lab_id}-ctl", [f"{net.lab_id}-w{i}" for i in range(2)]
    ctl = net.add_pod("ctl", ctl_host)
    # worker 0 has two fake GPUs: checks private /dev inside the chroot and Slurm's gres on top
    nodes = [net.add_pod(f"w{i}", h, devices=fake_gpus(2 if i == 0 else 0)) for i, h in enumerate(workers)]

    # munged wants every directory above its socket searchable by all; pytest's tmp dirs are 0700
    sock = Path(tempfile.mkdtemp(prefix="slurmk8s-munge-"))
    request.addfinalizer(lambda: shutil.rmtree(sock, ignore_errors=True))
    sock.chmod(0o755)
    etc, state = tmp_path / "etc", tmp_path / "munge-state"
    etc.mkdir()
    state.mkdir(mode=0o700)
    (tmp_path / "hosts").write_text(net.hosts_text())
    (etc / "slurm.conf").write_text(f"""\
ClusterName=t{net.prefix}
SlurmctldHost={ctl_host}
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
StateSaveLocation=/var/spool
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
MailProg=/bin/true
MpiDefault=none
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName={workers[0]} CPUs=1 RealMemory=100 Gres=gpu:2 State=UNKNOWN
NodeName={workers[1]} CPUs=1 RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    (etc / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    (etc / "gres.conf").write_text(f"AutoDetect=off\nNodeName={workers[0]} Name=gpu File=/dev/nvidia[0-1]\n")
    (state / "munge.key").write_bytes(os.urandom(1024))  # what mungekey -c writes
    (state / "munge.key").chmod(0o600)
    mounts = [Bind(tmp_path / "hosts", "/etc/hosts"), Bind(etc, "/etc/slurm"), Tmpfs("/run"),
              Bind(sock, "/run/munge"), Tmpfs("/var/spool"), Tmpfs("/var/log"), Tmpfs("/tmp")]

    # munged from the same image, in the controller's pod; the others reach its socket through the bind
    munged = ctl.start(["munged", "-F", "--key-file=/state/munge.key", "--socket=/run/munge/munge.socket.2",
                        "--pid-file=/state/munged.pid", "--log-file=/state/munged.log", "--seed-file=/state/seed"],
                       PATH_ENV, mounts=mounts + [Bind(state, "/state")], rootfs=ctl_root, layer=layers / "munged",
                       stdout_path=tmp_path / "munged.out")
    wait_until(lambda: (sock / "munge.socket.2").exists(), 10, "munged", proc=munged,
               log_path=[tmp_path / "munged.out", state / "munged.log"])
    slurmctld = ctl.start(["slurmctld", "-D", "-i"], PATH_ENV, mounts=mounts, rootfs=ctl_root, layer=layers / "ctl")
    version = ctl.exec_in(["slurmctld", "-V"], proc=slurmctld, timeout=10).stdout.split()
    assert version[-1].startswith(series), version
    wait_until(lambda: "UP" in ctl.exec_in(["scontrol", "ping"], proc=slurmctld, timeout=5).stdout, 30,
               "slurmctld", proc=slurmctld, log_path=ctl.log_of(slurmctld))
    slurmds = [n.start(["slurmd", "-D"], PATH_ENV, mounts=mounts, rootfs=node_root, layer=layers / n.name)
               for n in nodes]

    def idle() -> bool:
        out = ctl.exec_in(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], proc=slurmctld, timeout=5).stdout
        for pod, proc in zip(nodes, slurmds, strict=True):
            if proc.poll() is not None:
                raise LabError(f"slurmd in {pod.name} exited {proc.returncode}: {pod.log_of(proc).read_text()[-500:]}")
        return set(out.split()) == set(workers)

    wait_until(idle, 30, "2 idle slurmd", proc=slurmctld,
               log_path=[ctl.log_of(slurmctld)] + [n.log_of(p) for n, p in zip(nodes, slurmds, strict=True)])
    booted = time.monotonic() - started
    run = ctl.exec_in(["srun", "-N2", "hostname"], proc=slurmctld, timeout=30)
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.split()) == sorted(workers)
    srun_s = time.monotonic() - started - booted
    gpu = ctl.exec_in(["srun", "-w", workers[0], "--gres=gpu:1", "printenv", "CUDA_VISIBLE_DEVICES"],
                      proc=slurmctld, timeout=30)
    assert (gpu.returncode, gpu.stdout.strip()) == (0, "0"), gpu.stderr

    # proctrack/cgroup leaves /sys/fs/cgroup/<ctrl>/slurm_<node> behind: teardown must remove it
    # (of either worker: once only w1's was there when this looked)
    cgroups = [x for x in leftovers(net.lab_id) if x.startswith("cgroup dir")]
    assert any(f"slurm_{w}" in x for w in workers for x in cgroups), cgroups
    down = time.monotonic()
    assert teardown(net.lab_id, deadline_s=5) == []
    print(f"Slurm {' '.join(version[1:])}: boot {booted:.2f} s, srun -N2 {srun_s:.2f} s, "
          f"teardown {time.monotonic() - down:.2f} s")
    assert leftovers(net.lab_id) == []
