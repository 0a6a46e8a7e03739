"""Init of one pod process: set up its private view of the machine, become its user, exec its command.

Runs as ``python -I -S podinit.py SPEC`` inside fresh UTS + mount namespaces (and the pod's
network namespace), started by ``sandbox.PodSandbox.start``; SPEC is ``encode_spec(dict)``.
Standard library only, so it runs by file path whether slurmk8s is pip-installed or not, and
only modules that load in a few milliseconds (no site, json, re or socket): every lab exec
starts one. Every mount lands in the pod's private
mount namespace and disappears with its last process.

SPEC keys: hostname, rootfs (or null), layer (or null: {"upper", "work", "merged"} dirs of a
writable overlay on the rootfs, as a container runtime gives each container), readonly_sys
(with a rootfs: /sys and everything mounted below it read-only), minimal_dev (with a rootfs: an
unprivileged container's /dev instead of the host's), lab_dir (or null),
mounts (list of {"type": "bind", "src", "dst", "readonly"} or {"type": "tmpfs", "dst", "options"}),
devices (list of {"path", "major", "minor", "mode"}), workdir, argv, env, identity (or null:
{"uid", "gid", "groups", "caps", "no_new_privs"}, applied last, as runc does), ready_fd (a pipe
the starter reads to EOF: it closes when the command has been exec'd or init has failed).

With {"enter": PID, "argv", "env", "identity"} instead, it joins the namespaces, root and cwd of
the running PID and execs argv as ``identity`` (what ``kubectl exec`` does in a container).
"""

from __future__ import annotations

import binascii
import ctypes
import marshal
import os
import stat
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
# per-mount flags a read-only remount must repeat, or it would clear them
_KEEP = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
         "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
_libc.setns.argtypes = (ctypes.c_int, ctypes.c_int)
_libc.sethostname.argtypes = (ctypes.c_char_p, ctypes.c_size_t)


def encode_spec(spec: dict) -> str:
    """The argv form of a spec (the same interpreter decodes it: marshal needs no parser to import)."""
    return binascii.b2a_base64(marshal.dumps(spec), newline=False).decode()


def decode_spec(text: str) -> dict:
    return marshal.loads(binascii.a2b_base64(text))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class InitError(Exception):
    """A setup step failed; printed as one line before exiting 126."""


def mount(src: str | None, dst: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    """mount(2) without forking mount(8)."""
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    if _libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise InitError(f"mount {src} -> {dst} ({fstype or 'bind'}): {os.strerror(err)}")


def resolve_in_root(root: str, path: str) -> str:
    """Host path of ``path`` as seen from inside ``root``: symlinks cannot escape it.

    A rootfs holds absolute symlinks (/var/run -> /run); joining naively would follow
    them onto the host's own /run.
    """
    if root == "/":
        return os.path.normpath(path)
    parts = [p for p in path.split("/") if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise InitError(f"too many symlinks resolving {path} in {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise InitError(f"{what}: {os.strerror(ctypes.get_errno())}")


def become(identity: dict) -> None:
    """Drop to the container's user as runc does: bounding set, groups, gid, uid, then capabilities.

    A uid 0 process keeps its bounding set effective (and so after exec); any other uid loses
    every capability at setuid and at exec. no_new_privs stops setuid binaries and file
    capabilities from giving any back.
    """
    caps = set(identity["caps"])
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        if cap not in caps:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    os.setgroups(identity["groups"])
    os.setresgid(identity["gid"], identity["gid"], identity["gid"])
    os.setresuid(identity["uid"], identity["uid"], identity["uid"])
    mask = sum(1 << c for c in caps if c <= last) if identity["uid"] == 0 else 0
    data = (_CapData * 2)(_CapData(mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0), _CapData(mask >> 32, mask >> 32, 0))
    _check(_libc.capset(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data), "capset")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    if identity["no_new_privs"]:
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")


def enter(pid: int) -> None:
    """Join the net, UTS and mount namespaces of pid, then its root and cwd (nsenter -n -u -m -r -w)."""
    fds = {ns: os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY) for ns in ("net", "uts", "mnt")}
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    cwd = os.open(f"/proc/{pid}/cwd", os.O_RDONLY | os.O_DIRECTORY)
    for ns, fd in fds.items():
        _check(_libc.setns(fd, 0), f"enter the {ns} namespace of {pid}")
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.fchdir(cwd)
    os.close(root)
    os.close(cwd)


def remount_readonly_tree(top: str) -> None:
    """Make top and every mount below it read-only (a recursive bind is read-only at its top only)."""
    with open("/proc/self/mountinfo") as fh:
        entries = [line.split() for line in fh]
    for fields in entries:
        point = fields[4].replace("\\040", " ")
        if point == top or point.startswith(top + "/"):
            flags = sum(_KEEP.get(opt, 0) for opt in fields[5].split(","))
            mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)


def _make_target(target: str, like_dir: bool) -> None:
    if os.path.lexists(target):
        return
    if like_dir:
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()


def _host_dev_submounts() -> list[str]:
    """Mount points below /dev (pts, shm, mqueue...), shallowest first."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = line.split()[4]
            if point.startswith("/dev/"):
                found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"))


def private_dev(target: str, devices: list[dict]) -> None:
    """Mount a tmpfs /dev at ``target``: copies of the host's nodes, its submounts, plus ``devices``.

    The extra nodes (fake GPUs) exist only in this tmpfs: nothing is written to the host's /dev.
    """
    points = _host_dev_submounts()
    # the top ones only: rbind brings what is mounted below them
    submounts = [m for m in points if not any(m.startswith(o + "/") for o in points if o != m)]
    # O_PATH fds keep the host's submounts reachable after /dev itself is covered
    fds = {m: os.open(m, os.O_PATH) for m in submounts}
    entries = []
    for dirpath, dirnames, filenames in os.walk("/dev"):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in fds]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            entries.append((path[len("/dev"):], os.lstat(path), os.readlink(path) if os.path.islink(path) else None))
    mount("tmpfs", target, "tmpfs", 0, "mode=755")
    for rel, st, link in entries:
        dst = target + rel
        if link is not None:
            os.symlink(link, dst)
        elif stat.S_ISDIR(st.st_mode):
            os.makedirs(dst, exist_ok=True)
            os.chmod(dst, stat.S_IMODE(st.st_mode))
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            os.mknod(dst, st.st_mode, st.st_rdev)
            os.chmod(dst, stat.S_IMODE(st.st_mode))
            os.chown(dst, st.st_uid, st.st_gid)
    for point, fd in fds.items():
        dst = target + point[len("/dev"):]
        os.makedirs(dst, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", dst, None, MS_BIND | MS_REC)
        os.close(fd)
    for dev in devices:
        dst = target + dev["path"][len("/dev"):]
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.lexists(dst):
            os.unlink(dst)
        os.mknod(dst, stat.S_IFCHR | dev["mode"], os.makedev(dev["major"], dev["minor"]))
        os.chmod(dst, dev["mode"])


# runc's default devices of an unprivileged container (libcontainer/specconv): name, major, minor
_DEFAULT_DEVICES = (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9),
                    ("tty", 5, 0))
_DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
              ("stderr", "/proc/self/fd/2"), ("core", "/proc/kcore"), ("ptmx", "pts/ptmx"))


def minimal_dev(target: str, devices: list[dict]) -> None:
    """The /dev a runtime gives an unprivileged container: a tmpfs with runc's few nodes, its own
    devpts, an empty shm dir (the pod's is bound there) and the pod's ``devices``."""
    mount("tmpfs", target, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    for name, major, minor in _DEFAULT_DEVICES:
        os.mknod(f"{target}/{name}", stat.S_IFCHR | 0o666, os.makedev(major, minor))
        os.chmod(f"{target}/{name}", 0o666)
    for name, link in _DEV_LINKS:
        os.symlink(link, f"{target}/{name}")
    os.mkdir(f"{target}/pts")
    mount("devpts", f"{target}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
    os.mkdir(f"{target}/shm", 0o1777)
    os.chmod(f"{target}/shm", 0o1777)
    for dev in devices:
        path = target + dev["path"][len("/dev"):]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mknod(path, stat.S_IFCHR | dev["mode"], os.makedev(dev["major"], dev["minor"]))
        os.chmod(path, dev["mode"])


def setup(spec: dict) -> None:
    """Everything before exec: hostname, /dev, /proc, /sys, binds, tmpfs, chroot, cwd."""
    name = spec["hostname"].encode()
    _check(_libc.sethostname(name, len(name)), f"sethostname {spec['hostname']}")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = spec.get("rootfs") or "/"
    layer = spec.get("layer")
    if layer:  # the container's own writable layer over the image's files
        mount("overlay", layer["merged"], "overlay", 0,
              f"lowerdir={root},upperdir={layer['upper']},workdir={layer['work']}")
        root = layer["merged"]
    devices = spec.get("devices") or []
    for dev in devices:
        if not dev["path"].startswith("/dev/"):
            raise InitError(f"device {dev['path']}: must be below /dev/")
    mounts = list(spec.get("mounts") or [])
    if root != "/" and spec.get("lab_dir"):
        mounts.append({"type": "bind", "src": spec["lab_dir"], "dst": spec["lab_dir"]})
    # bind sources are host paths: hold them before a tmpfs (say /tmp) can cover them
    sources = {}
    for m in mounts:
        if m["type"] == "bind":
            try:
                sources[m["src"]] = os.open(m["src"], os.O_PATH)
            except FileNotFoundError:
                raise InitError(f"bind source {m['src']} does not exist") from None
    if root != "/":
        for point in ("/proc", "/sys", "/dev"):  # as runc, create a mount point the image lacks
            os.makedirs(resolve_in_root(root, point), exist_ok=True)
        mount("proc", resolve_in_root(root, "/proc"), "proc")
        mount("/sys", resolve_in_root(root, "/sys"), None, MS_BIND | MS_REC)
        if spec.get("readonly_sys"):  # what a runtime gives an unprivileged container
            remount_readonly_tree(resolve_in_root(root, "/sys"))
        if spec.get("minimal_dev"):
            minimal_dev(resolve_in_root(root, "/dev"), devices)
        elif devices:
            private_dev(resolve_in_root(root, "/dev"), devices)
        else:
            mount("/dev", resolve_in_root(root, "/dev"), None, MS_BIND | MS_REC)
        hosts = resolve_in_root(root, "/etc/hosts")
        if not os.path.exists(hosts):  # minbase debootstrap makes none; it is a bind target
            open(hosts, "a").close()
    elif devices:
        private_dev("/dev", devices)
    # shallowest first: a tmpfs /run must exist before /run/munge is bound onto it
    for m in sorted(mounts, key=lambda m: os.path.normpath(m["dst"]).count("/")):
        target = resolve_in_root(root, m["dst"])
        if m["type"] == "tmpfs":
            os.makedirs(target, exist_ok=True)
            mount("tmpfs", target, "tmpfs", 0, m.get("options") or "mode=755")
        elif m["type"] == "bind":
            fd = sources[m["src"]]
            _make_target(target, os.path.isdir(f"/proc/self/fd/{fd}"))
            mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            if m.get("readonly"):
                mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        else:
            raise InitError(f"unknown mount type {m['type']!r}")
    for fd in sources.values():
        os.close(fd)
    if root != "/":
        os.chroot(root)
    os.chdir(spec.get("workdir") or "/")


def exec_in_path(argv: list[str], env: dict[str, str]) -> None:
    """execvpe by hand: os.execvpe imports a module lazily, which the new root does not have."""
    if "/" in argv[0]:
        os.execve(argv[0], argv, env)
    denied = None
    for directory in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        try:
            os.execve(os.path.join(directory or ".", argv[0]), argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as e:  # as execvp: keep looking, report EACCES if nothing runs
            denied = e
    raise denied or FileNotFoundError(2, "No such file or directory", argv[0])


def main() -> None:
    """Parse the spec from argv[1], set up (or enter), become the user, exec; exit 126 (setup) or 127 (exec)."""
    spec = decode_spec(sys.argv[1])
    try:
        if spec.get("enter") is not None:
            enter(spec["enter"])
        else:
            setup(spec)
        if spec.get("identity"):
            become(spec["identity"])
    except (InitError, OSError) as e:
        print(f"podinit[{spec.get('hostname') or spec.get('enter')}]: {e}", file=sys.stderr, flush=True)
        sys.exit(126)
    argv = spec["argv"]
    if spec.get("ready_fd") is not None:
        os.set_inheritable(spec["ready_fd"], False)  # closed by the exec below: the starter's signal
    try:
        exec_in_path(argv, spec["env"])
    except OSError as e:
        print(f"podinit[{spec.get('hostname')}]: exec {argv[0]}: {e}", file=sys.stderr, flush=True)
        sys.exit(127)


if __name__ == "__main__":
    main()
