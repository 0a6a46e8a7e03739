"""What a kubelet (1.34) and its runtime (containerd 1.6 with runc, kind's node) make of a pod spec.

Pure: the rules only, so that each can be tested against the source it follows. The lab's
processes and files get exactly these users, groups, capabilities and modes.

- Who a container runs as: kubelet ``determineEffectiveSecurityContext`` and
  ``verifyRunAsNonRoot`` (pkg/kubelet/kuberuntime), containerd ``WithUser``/``WithUserID``/
  ``WithAdditionalGIDs`` (oci/spec_opts.go) and ``WithCapabilities`` (pkg/cri/opts).
- Volume files: ``SetUpAt`` of the emptyDir, configMap, secret and projected plugins, the
  atomic writer (pkg/volume/util/atomic_writer.go) and ``changeFilePermission``
  (pkg/volume/volume_linux.go) for fsGroup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# Kernel capability numbers (linux/capability.h), by their Kubernetes names.
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
)
# containerd's defaultUnixCaps (oci/spec.go): what a container gets when it names no capabilities.
RUNTIME_DEFAULT_CAPS = frozenset({
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP", "SETPCAP",
    "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
})

# emptyDir setupDir: 0777 whatever the umask. A Memory medium is a tmpfs mounted without a
# mode option, whose root the kernel makes 1777. configMap volumes wrap a disk emptyDir;
# secret and projected volumes a Memory one.
EMPTY_DIR_MODE = 0o777
MEMORY_DIR_MODE = 0o1777
# The atomic writer's timestamped data dir; MkdirAll of nested item paths under the kubelet's umask 022.
DATA_DIR_MODE = 0o755
NESTED_DIR_MODE = 0o755
# The default modes the API server fills in: configMap/secret defaultMode, and the projected
# service-account volume the ServiceAccount admission plugin adds (ProjectedVolumeSourceDefaultMode).
DEFAULT_MODE = 0o644
PROJECTED_DEFAULT_MODE = 0o644
# changeFilePermission (fsGroup): group rw (ro for read-only volumes), dirs also x and setgid.
_RW_MASK, _RO_MASK, _EXEC_MASK, _SETGID = 0o660, 0o440, 0o110, 0o2000


class SpecError(ValueError):
    """The kubelet would refuse to create this container (CreateContainerConfigError)."""


@dataclass(frozen=True)
class PodSecurity:
    """The pod securityContext fields that decide users, groups and volume ownership."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    fs_group: int | None = None
    supplemental_groups: tuple[int, ...] = ()

    @classmethod
    def from_spec(cls, sc: Mapping[str, Any] | None) -> PodSecurity:
        sc = sc or {}
        return cls(sc.get("runAsUser"), sc.get("runAsGroup"), sc.get("runAsNonRoot"), sc.get("fsGroup"),
                   tuple(sc.get("supplementalGroups", ())))


@dataclass(frozen=True)
class ContainerSecurity:
    """A container securityContext (unset fields are None)."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    privileged: bool | None = None
    allow_privilege_escalation: bool | None = None
    add: tuple[str, ...] | None = None  # None: no capabilities field at all
    drop: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, sc: Mapping[str, Any] | None) -> ContainerSecurity:
        sc = sc or {}
        caps = sc.get("capabilities")
        return cls(sc.get("runAsUser"), sc.get("runAsGroup"), sc.get("runAsNonRoot"), sc.get("privileged"),
                   sc.get("allowPrivilegeEscalation"),
                   None if caps is None else tuple(caps.get("add", ())), tuple((caps or {}).get("drop", ())))


@dataclass(frozen=True)
class Identity:
    """Who a container's processes are: uid, gid, supplementary groups, capabilities, no_new_privs.

    ``bounding`` is the capability bounding set (runc sets it from the spec); a process
    running as uid 0 has the same set effective and permitted after its exec, a non-root one
    has none (execve clears them: no ambient capabilities, containerd sets none).
    """

    uid: int
    gid: int
    groups: tuple[int, ...]
    bounding: frozenset[str]
    no_new_privs: bool
    privileged: bool = False

    @property
    def effective(self) -> frozenset[str]:
        return self.bounding if self.uid == 0 else frozenset()

    def to_spec(self) -> dict[str, Any]:
        """The form podinit applies (capabilities by number)."""
        return {"uid": self.uid, "gid": self.gid, "groups": list(self.groups),
                "caps": sorted(CAPABILITIES.index(c) for c in self.bounding), "no_new_privs": self.no_new_privs}


def capability_set(sc: ContainerSecurity, all_caps: Iterable[str] = CAPABILITIES) -> frozenset[str]:
    """The bounding set: privileged gets all; else the runtime default, ALL first, then each add, then each drop.

    Names the kernel does not know are left out, as runc does (with a warning).
    """
    known = frozenset(all_caps)
    if sc.privileged:
        return known
    add = {c.upper().removeprefix("CAP_") for c in sc.add or ()}
    drop = {c.upper().removeprefix("CAP_") for c in sc.drop}
    caps = set(RUNTIME_DEFAULT_CAPS)
    if "ALL" in add:
        caps = set(known)
    if "ALL" in drop:
        caps = set()
    return frozenset(((caps | add) - drop) & known)


def effective_run_as_user(pod: PodSecurity, sc: ContainerSecurity) -> int | None:
    """runAsUser, the container's over the pod's (DetermineEffectiveRunAsUser)."""
    return sc.run_as_user if sc.run_as_user is not None else pod.run_as_user


def fs_user(pod: PodSecurity, containers: Iterable[ContainerSecurity]) -> int | None:
    """FsUserFrom: the runAsUser every container (init ones too) sets alike, else None."""
    found = None
    for sc in containers:
        uid = effective_run_as_user(pod, sc)
        if uid is None or (found is not None and uid != found):
            return None
        found = uid
    return found


@dataclass(frozen=True)
class Account:
    """One /etc/passwd entry of an image."""

    name: str
    uid: int
    gid: int
    home: str


def parse_passwd(text: str) -> list[Account]:
    """The entries of an /etc/passwd text (malformed lines skipped, as libc does)."""
    found = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[2].isdigit() and fields[3].isdigit():
            found.append(Account(fields[0], int(fields[2]), int(fields[3]), fields[5]))
    return found


def parse_group(text: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """(name, gid, members) of each /etc/group line."""
    found = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[2].isdigit():
            found.append((fields[0], int(fields[2]), tuple(m for m in fields[3].split(",") if m)))
    return found


def _image_user(image_user: str, accounts: list[Account]) -> tuple[int | None, str]:
    """(uid, username) the kubelet reads from an image's USER: only its user part counts."""
    user = image_user.split(":", 1)[0]
    if not user:
        return 0, ""
    if user.isdigit():
        return int(user), ""
    return None, user


def identity(pod: PodSecurity, sc: ContainerSecurity, image_user: str = "", passwd: str = "", group: str = "",
             all_caps: Iterable[str] = CAPABILITIES) -> Identity:
    """The user, groups and capabilities a kubelet and containerd give a container; SpecError if refused."""
    accounts = parse_passwd(passwd)
    run_as_user = effective_run_as_user(pod, sc)
    run_as_group = sc.run_as_group if sc.run_as_group is not None else pod.run_as_group
    non_root = sc.run_as_non_root if sc.run_as_non_root is not None else pod.run_as_non_root
    image_uid, image_name = _image_user(image_user, accounts)
    if non_root:
        if run_as_user == 0:
            raise SpecError("container's runAsUser breaks non-root policy")
        if run_as_user is None and image_uid is None:
            raise SpecError(f"container has runAsNonRoot and image has non-numeric user ({image_name}), "
                            "cannot verify user is non-root")
        if run_as_user is None and image_uid == 0:
            raise SpecError("container has runAsNonRoot and image will run as root")
    uid = run_as_user if run_as_user is not None else image_uid
    if uid is None:  # a user name: containerd looks it up in the image
        account = next((a for a in accounts if a.name == image_name), None)
        if account is None:
            raise SpecError(f"unable to find user {image_name}: no matching entries in passwd file")
        uid = account.uid
    account = next((a for a in accounts if a.uid == uid), None)
    # WithUserID: the primary group from the image's passwd entry, 0 without one
    gid = run_as_group if run_as_group is not None else (account.gid if account else 0)
    # WithAdditionalGIDs: the groups that list the user by name (not its own group), then the
    # pod's fsGroup and supplementalGroups; containerd merges them with the gid, sorted
    members = {g for name, g, users in parse_group(group) if account and account.name in users and name != account.name}
    extra = ({pod.fs_group} if pod.fs_group is not None else set()) | set(pod.supplemental_groups)
    groups = tuple(sorted({gid} | members | extra))
    privileged = bool(sc.privileged)
    return Identity(uid, gid, groups, capability_set(sc, all_caps),
                    no_new_privs=sc.allow_privilege_escalation is False and not privileged, privileged=privileged)


def home_of(uid: int, passwd: str) -> str:
    """runc's HOME when the env has none: the user's home in the image's passwd, else /."""
    account = next((a for a in parse_passwd(passwd) if a.uid == uid), None)
    return account.home if account and account.home else "/"


def container_argv(command: tuple[str, ...], args: tuple[str, ...], entrypoint: tuple[str, ...],
                   cmd: tuple[str, ...]) -> tuple[str, ...]:
    """command replaces the image's Entrypoint, args its Cmd; a command without args drops the Cmd."""
    if command:
        return command + args
    return entrypoint + (args or cmd)


def token_file(default_mode: int, fs_user_id: int | None, fs_group: int | None) -> tuple[int, int]:
    """(mode before fsGroup, owner uid) of the projected service-account token.

    The projected plugin writes it with the volume's defaultMode, or 0600 when the pod has an
    fsUser or an fsGroup (the fsGroup pass then adds group read: 0640); the atomic writer
    chowns it to the fsUser.
    """
    mode = 0o600 if fs_user_id is not None or fs_group is not None else default_mode
    return mode, fs_user_id if fs_user_id is not None else 0


def fs_group_mode(mode: int, is_dir: bool, read_only: bool) -> int:
    """changeFilePermission: the mode a file or dir gets when the pod has an fsGroup."""
    mask = _RO_MASK if read_only else _RW_MASK
    if is_dir:
        mask |= _SETGID | _EXEC_MASK
    return mode | mask
