"""`init`: write a commented starter profile, and the JSON Schema beside it for editors; `schema` prints it.

The profile's first line is a yaml-language-server modeline naming slurmk8s.schema.json next to it,
so VS Code (Red Hat's YAML extension), Neovim, Helix and other editors using that server check and
complete the profile as it is typed. `slurmk8s schema` prints the same schema for any other place.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path

from slurmk8s.actions.render import write_stdout
from slurmk8s.errors import OutputError, UsageError
from slurmk8s.profile.schema import profile_schema

SCHEMA_FILE = "slurmk8s.schema.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_FILE}\n"
STARTER = MODELINE + """\
# A slurmk8s cluster profile. Check it with `slurmk8s validate`, look at what it makes
# with `slurmk8s render -o out/`, stand it up with `slurmk8s up`.
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: mycluster          # Slurm ClusterName and prefix of every object (DNS-1123 label)
  namespace: slurm
spec:
  slurm:
    version: "26.05"       # quote it: 22.05 .. 26.05
    # auth: slurm          # slurm (23.11+) or munge
    # config:              # extra slurm.conf lines; SchedulerParameters adds to the generator's options
    #   SchedulerParameters: bf_busy_nodes,max_rpc_cnt=150
  controller:
    replicas: 1            # 2 = primary + backup slurmctld (needs a ReadWriteMany storage class)
    storage: {size: 4Gi}
  accounting:
    enabled: true
    database:
      embedded: {storage: 10Gi}
  login:
    replicas: 1
    service: {type: ClusterIP}
    authorizedKeys: []     # "ssh-ed25519 AAAA... you@host"
  pools:
    - name: cpu
      replicas: 2          # running now
      minReplicas: 0       # elastic floor
      maxReplicas: 4       # Slurm knows cpu-[0-3]
      cpus: 2
      memory: 2Gi
      features: [cpu]
    # - name: gpu
    #   replicas: 1
    #   cpus: 32
    #   memory: 256Gi
    #   gpus: {count: 4, type: a100, resource: nvidia.com/gpu}
  partitions:
    - name: main
      pools: [cpu]
      default: true
      maxTime: "1-00:00:00"
"""


def schema_text() -> str:
    """The profile's JSON Schema, as `slurmk8s schema` prints it and `init` writes it."""
    return json.dumps(profile_schema(), indent=2, ensure_ascii=False) + "\n"


def print_schema() -> None:
    """`slurmk8s schema`: the JSON Schema on standard output."""
    write_stdout(schema_text(), "the JSON Schema")


def write_schema_beside(profile: Path) -> Path | None:
    """slurmk8s.schema.json next to a profile (the modeline names it); None when a file of that name that is
    not a slurmk8s schema is in the way (it is left alone)."""
    target = profile.parent / SCHEMA_FILE
    text = schema_text()
    if os.path.lexists(target):
        if not stat.S_ISREG(os.lstat(target).st_mode):  # a link, a FIFO (reading it would hang): not ours
            return None
        try:
            current = target.read_text(encoding="utf-8")
            ours = json.loads(current).get("$id") == json.loads(text)["$id"]
        except (OSError, ValueError, AttributeError):
            return None
        if not ours:
            return None
        if current == text:
            return target
    _write_new(target, text, replace=True)
    return target


def write_starter(path: str, force: bool = False) -> list[Path]:
    """Write the starter profile and its schema (the profile to stdout for '-'); refuse to overwrite unless forced,
    and refuse anything but a regular file (or a link to one) even then."""
    if path == "-":
        write_stdout(STARTER, "the starter profile")
        return []
    p = Path(path)
    try:
        _check_starter_path(path, p, force)
    except OSError as e:
        raise _path_error(p, e, "cannot write the starter profile") from None
    try:
        _write_new(p, STARTER, replace=force)
    except FileExistsError:
        raise UsageError(f"{p}: already exists (use --force to overwrite)") from None
    except OSError as e:
        raise OutputError(f"{p}: cannot write the starter profile: {e.strerror or e}") from None
    try:
        schema = write_schema_beside(p)
    except OSError as e:
        raise OutputError(f"{p.parent / SCHEMA_FILE}: cannot write the profile's JSON Schema: {e.strerror or e}") from None
    return [p] + ([schema] if schema else [])


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}


def _check_starter_path(path: str, p: Path, force: bool) -> None:
    """Refuse a directory, an existing file unless forced, and with --force anything but a regular file: the
    rename that writes the profile would turn a device or a FIFO (/dev/null, say) into a plain file."""
    if p.is_dir():
        raise UsageError(f"{p}: is a directory; give the profile's file name, e.g. {p / 'profile.yaml'}")
    if path.endswith("/"):  # Path drops the slash: newdir/ would become a file named newdir
        raise UsageError(f"{path}: names a directory; give the profile's file name, e.g. {p / 'profile.yaml'}")
    if os.path.lexists(p):  # a dangling symlink counts: writing would create its target
        if not force:
            raise UsageError(f"{p}: already exists (use --force to overwrite)")
        try:
            mode = os.stat(p).st_mode
        except FileNotFoundError:
            raise UsageError(f"{p}: a symbolic link to nothing; --force replaces only a regular file") from None
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise UsageError(f"{p}: {kind}; --force replaces only a regular file (or a link to one)")
    if not p.parent.is_dir():
        raise UsageError(f"{p}: directory {p.parent} does not exist (create it first)")


def _path_error(p: Path, e: OSError, doing: str) -> Exception:
    """One line for a path the system refuses: a permission is a runtime error (1), a bad name is usage (2)."""
    if e.errno in (errno.EACCES, errno.EPERM):
        return OutputError(f"{p}: {doing}: {e.strerror}")
    if e.errno == errno.ELOOP:
        return UsageError(f"{p}: a loop of symbolic links")
    return UsageError(f"{p}: {e.strerror or e}")


def _write_new(p: Path, text: str, replace: bool) -> None:
    """A new file next to the target, then one rename: an existing symlink is replaced, never followed."""
    fd, temp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temp, 0o666 & ~_umask())
        if replace:
            os.replace(temp, p)
        else:
            os.link(temp, p)  # fails if someone created p meanwhile
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
