"""Writing a rendered tree into a directory: all or nothing, one render at a time, never outside it.

A rendered tree is committed to git and read by GitOps tools, so its directory is handled as
untrusted input and replaced as a whole:
- the new tree is built in a staging directory next to the target and swapped in with one
  atomic rename (renameat2 RENAME_EXCHANGE), so readers and a killed render see either the old
  tree or the new one, never a mix;
- locks on the target's parent (exclusive) and on every directory above it (shared) serialize
  renders into one target, and into targets nested in each other;
- the marker file (.slurmk8s-rendered) lists what the last render wrote, one `SHA256  PATH` line
  per file (the format of `sha256sum`, so `sha256sum -c` shows what was edited since); its paths
  must be plain relative paths, and nothing it names is ever followed or deleted by name: the old
  tree is dropped as a whole, and a listed file that is not a regular file with the listed content
  is the user's (refused where the render writes, as any user file is);
- every other entry of the directory is the user's: it is carried over unchanged (hard links,
  symlinks recreated as links, directories with their owner, mode and ACLs), and a user's file
  where the render would write is refused, never overwritten;
- a filesystem mounted inside the directory is refused before anything changes: the swap would
  move it along with the old tree, and dropping the old tree would empty it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from slurmk8s.errors import OutputError, UsageError

MARKER = ".slurmk8s-rendered"
_STAGING = ".{name}.slurmk8s-{kind}-{pid}-{token}"
_MARKER_LINE = re.compile(r"([0-9a-f]{64})  (.*)")  # sha256sum's line; a bare path is an older marker's


def write_tree(tree: dict[str, str], out_dir: Path, note: Callable[[str], None] | None = None) -> list[str]:
    """Replace out_dir by tree (plus the user's own files there); returns the paths written."""
    note = note or (lambda line: print(line, file=sys.stderr, flush=True))
    for rel in tree:
        if not _clean_relative(rel) or rel == MARKER:
            raise ValueError(f"not a relative path of a rendered tree: {rel!r}")
    target = _target(Path(out_dir))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target, note):
            _recover_leftovers(target)
            _refuse_mounts(target, out_dir)
            previous = _previous_render(target)
            carried = _carried_entries(target, previous, tree)
            staging = _new_staging(target, "new")
            try:
                _fill(staging, tree, target, carried)
                _swap(staging, target)
            except BaseException:
                _remove_tree(staging)
                raise
            _remove_tree(staging)  # now the old tree (or nothing, for a first render)
    except (UsageError, OutputError):
        raise
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:  # the staging name is the target's plus about 30 characters
            raise UsageError(f"{out_dir}: the directory's name is too long") from None
        raise OutputError(f"{out_dir}: cannot write the rendered tree: {e.strerror or e}") from None
    return list(tree)


def _clean_relative(rel: str) -> bool:
    """A relative POSIX path without '', '.' or '..' components (nothing that leaves the tree)."""
    parts = rel.split("/")
    return bool(rel) and "\x00" not in rel and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _target(out_dir: Path) -> Path:
    """The absolute directory to replace (a symlink given on the command line is the user's choice: followed)."""
    if str(out_dir).startswith("~"):  # quoted, or from a file: the shell did not expand it, and neither do we
        raise UsageError(f"{out_dir}: a leading ~ is not expanded here (the shell does that when it is not "
                         "quoted); write the whole path")
    try:
        target = out_dir.resolve()
        if target.parent == target:
            raise UsageError(f"{out_dir}: cannot replace the root directory; choose a directory below it")
        if target.exists() and not target.is_dir():
            raise UsageError(f"{out_dir}: not a directory; -o needs a directory (new or from an earlier render), "
                             "or - for one YAML stream")
        existing = next(d for d in target.parents if d.exists())  # "/" at the latest
        if not existing.is_dir():
            raise UsageError(f"{out_dir}: {existing} is a file, not a directory")
        try:
            cwd = Path.cwd().resolve()
        except FileNotFoundError:  # the current directory was deleted: it cannot be the target
            cwd = Path("/")
        if cwd == target or target in cwd.parents:
            raise UsageError(f"{out_dir}: is the current directory (or holds it); a render replaces the whole "
                             "directory, so run it from outside, e.g. `slurmk8s render PROFILE -o ../NAME`")
    except RuntimeError:  # Python 3.11's resolve() on a symlink loop (3.13 raises OSError ELOOP)
        raise UsageError(f"{out_dir}: a loop of symbolic links; -o needs a directory") from None
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM):  # a runtime condition, as a read-only directory is
            raise OutputError(f"{out_dir}: cannot write the rendered tree: {e.strerror}") from None
        if e.errno == errno.ELOOP:
            raise UsageError(f"{out_dir}: a loop of symbolic links; -o needs a directory") from None
        raise UsageError(f"{out_dir}: {e.strerror or e}") from None
    return target


@contextmanager
def _locked(target: Path, note: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive lock on target's parent and shared locks on every directory above it.

    A render replaces its target with everything below it, so a render into nest/sub must not run
    while another replaces nest (its tree would be swapped into the old nest and dropped with it).
    The exclusive lock makes renders into one parent take turns; the shared ones make a render
    below another's target wait for it, and the other way round. Taken from / down, so two renders
    never wait for each other in a cycle.
    """
    import fcntl

    chain = [*reversed(target.parent.parents), target.parent]
    fds: list[int] = []
    try:
        for directory in chain:
            try:
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            except PermissionError:
                if directory == target.parent:
                    raise
                continue  # an unreadable directory above (a 0711 home): no lock there, nothing else changes
            fds.append(fd)
            mode = fcntl.LOCK_EX if directory == target.parent else fcntl.LOCK_SH
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                note(f"waiting for another slurmk8s render into {directory} to finish")
                fcntl.flock(fd, mode)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


def _mount_points(directory: Path) -> list[Path]:
    """Mount points at or below directory: every mount, a bind mount of the same filesystem included."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().splitlines()
    except OSError:  # no /proc (not Linux): another device number is what a mount looks like
        return [Path(p) for p, _, _ in os.walk(directory) if os.path.ismount(p)]
    unescape = re.compile(rb"\\([0-7]{3})")  # mountinfo writes space, tab, newline and \ as \ooo
    points = [Path(os.fsdecode(unescape.sub(lambda m: bytes([int(m[1], 8)]), line.split(b" ")[4])))
              for line in lines if len(line.split(b" ")) > 4]
    return sorted(p for p in points if p == directory or directory in p.parents)


def _refuse_mounts(target: Path, out_dir: Path) -> None:
    """Refuse a target that is a mount point or has one inside it, before anything changes."""
    below = _mount_points(target)
    if target in below:
        raise UsageError(f"{out_dir}: is a mount point; a render swaps the whole directory in, which a mount "
                         "point does not allow: render into a directory below it")
    if below:
        shown = ", ".join(str(p.relative_to(target)) for p in below[:5])
        raise UsageError(f"{out_dir}: a filesystem is mounted inside it ({shown}); a render replaces the whole "
                         "directory and cannot carry a mount over: unmount it or mount it elsewhere, then render again")


def _staging_pattern(target: Path) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(target.name)}\.slurmk8s-(new|old)-[0-9]+-[0-9a-f]{{8}}$")


def _recover_leftovers(target: Path) -> None:
    """Clean up after a render that was killed: restore a tree it had moved aside, drop its staging dirs."""
    pattern = _staging_pattern(target)
    leftovers = sorted((e for e in os.scandir(target.parent)
                        if pattern.match(e.name) and e.is_dir(follow_symlinks=False)), key=lambda e: e.name)
    for entry in leftovers:
        if entry.name.split(".slurmk8s-")[-1].startswith("old-") and not os.path.lexists(target):
            os.rename(entry.path, target)  # the previous tree, moved aside just before the kill
        elif _mount_points(Path(entry.path)):
            raise UsageError(f"{entry.path}: left by an earlier render, with a filesystem mounted inside it; "
                             "unmount it and move out what you keep, then render again")
        else:
            _remove_tree(Path(entry.path))


def _previous_render(target: Path) -> dict[str, str | None] | None:
    """What the last render wrote (path -> its SHA-256, None from an older marker without digests); None
    when target is new or empty; refuse a foreign dir."""
    if not target.exists():
        return None
    marker = target / MARKER
    if not os.path.lexists(marker):
        if not _is_empty(target):
            raise UsageError(f"{target}: directory is not empty and was not written by slurmk8s render; "
                             "choose an empty or new directory")
        return None
    if not stat.S_ISREG(os.lstat(marker).st_mode):
        raise UsageError(f"{marker}: not a regular file (a render only ever writes one); remove it and render again")
    written: dict[str, str | None] = {}
    with open(marker, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            match = _MARKER_LINE.fullmatch(line)
            digest, rel = match.groups() if match else (None, line)
            if not _clean_relative(rel):
                raise UsageError(f"{marker}:{number}: {rel!r} is not a path inside the directory; the marker was "
                                 "edited by someone else: check the directory, remove the line and render again")
            written[rel] = digest
    return written


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _still_as_written(path: str, info: os.stat_result, digest: str | None, new_text: str | None) -> bool:
    """A listed file is the last render's only while it holds what that render wrote. An older marker has no
    digests: then only a file holding what this render writes there is (replacing it loses nothing)."""
    if not stat.S_ISREG(info.st_mode):
        return False
    expected = digest if digest is not None else (_digest(new_text) if new_text is not None else None)
    if expected is None:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() == expected


def _carried_entries(target: Path, previous: dict[str, str | None] | None,
                     tree: dict[str, str]) -> list[tuple[str, os.stat_result]]:
    """The user's entries in target (not written by the last render), parents first; refuse one in the way."""
    if previous is None or not target.exists():
        return []
    needed_dirs = {rel.rsplit("/", 1)[0] for rel in tree if "/" in rel}
    needed_dirs |= {d.rsplit("/", i)[0] for d in list(needed_dirs) for i in range(1, d.count("/") + 1)}
    carried: list[tuple[str, os.stat_result]] = []
    clashes: list[str] = []

    def walk(directory: Path, prefix: str) -> bool:
        """Collect the user's entries below directory; True when it holds any."""
        found = False
        with os.scandir(directory) as entries:
            items = sorted(entries, key=lambda e: e.name)
        for entry in items:
            rel = prefix + entry.name
            if rel == MARKER:
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                at = len(carried)
                carried.append((rel, info))
                if walk(Path(entry.path), rel + "/") or _is_empty(entry.path):
                    found = True
                    if rel in tree:
                        clashes.append(f"{rel} (a directory with your files in it)")
                else:
                    del carried[at]  # only the last render's files were in it
                continue
            if rel in previous:
                if _still_as_written(entry.path, info, previous[rel], tree.get(rel)):
                    continue  # the last render's own file: dropped with the old tree
                # Edited, replaced, or listed by a hand-added line: not ours to drop or overwrite.
                found = True
                why = " without a digest (an older slurmk8s), and not what this render writes" \
                    if previous[rel] is None else ", but not what slurmk8s wrote there"
                clashes.append(f"{rel} (listed in {MARKER}{why})")
                continue
            found = True
            carried.append((rel, info))
            if rel in tree:
                clashes.append(f"{rel} (your file, not written by slurmk8s)")
            elif rel in needed_dirs:
                kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a file"
                clashes.append(f"{rel} ({kind} where the render writes a directory)")
        return found

    walk(target, "")
    if clashes:
        shown = "; ".join(clashes[:5]) + (f"; and {len(clashes) - 5} more" if len(clashes) > 5 else "")
        raise UsageError(f"{target}: the render would replace what it did not write: {shown}; move or remove "
                         "it, then render again")
    return carried


def _new_staging(target: Path, kind: str) -> Path:
    """An empty directory next to target (same filesystem, so the swap is one rename)."""
    while True:
        path = target.parent / _STAGING.format(name=target.name, kind=kind, pid=os.getpid(),
                                               token=os.urandom(4).hex())
        try:
            os.mkdir(path, 0o777)  # the umask applies, as for any directory the user creates
            return path
        except FileExistsError:
            continue


def _give_owner(path: str | Path | int, owner: os.stat_result, follow: bool = True) -> None:
    """chown to owner's user and group: a render as root must not take a user's tree. Other users cannot
    give a file away, and keep their own (as before)."""
    try:
        os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=follow)
    except PermissionError:
        pass


def _fill(staging: Path, tree: dict[str, str], old: Path, carried: list[tuple[str, os.stat_result]]) -> None:
    """Write the rendered files and carry the user's entries over into staging (which is new: no links)."""
    owner = os.stat(old) if old.is_dir() else None  # what the render writes belongs to the directory's owner
    if owner:
        _give_owner(staging, owner)
    for rel, info in carried:
        source, dest = old / rel, staging / rel
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(dest, stat.S_IMODE(info.st_mode) | stat.S_IWUSR | stat.S_IXUSR)
            _give_owner(dest, info)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(source), dest)
            _give_owner(dest, info, follow=False)
        else:
            try:
                os.link(source, dest, follow_symlinks=False)  # the same inode: owner, mode and ACLs come along
            except OSError:  # a filesystem without hard links, or one that forbids them here
                shutil.copy2(source, dest, follow_symlinks=False)
                _give_owner(dest, info, follow=False)
    for rel, text in [*tree.items(), (MARKER, "".join(f"{_digest(t)}  {r}\n" for r, t in tree.items()))]:
        path = staging / rel
        _make_dirs(path.parent, owner)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        if owner:
            _give_owner(fd, owner)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    # Modes, times and ACLs last, children first: a read-only directory is only read-only once filled.
    for rel, info in reversed(carried):
        if stat.S_ISDIR(info.st_mode):
            shutil.copystat(old / rel, staging / rel, follow_symlinks=False)
    if owner:
        shutil.copystat(old, staging)


def _make_dirs(directory: Path, owner: os.stat_result | None) -> None:
    """mkdir -p inside staging, each new directory given owner."""
    if os.path.lexists(directory):
        return
    _make_dirs(directory.parent, owner)
    os.mkdir(directory)
    if owner:
        _give_owner(directory, owner)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap(staging: Path, target: Path) -> None:
    """Put staging at target in one step; afterwards staging holds the old tree (or does not exist)."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        return
    if _exchange(staging, target):
        return
    # No atomic exchange here (an old kernel or a filesystem without it): two renames, and a
    # render killed between them leaves the old tree aside, which the next render restores.
    aside = _new_staging(target, "old")
    os.rmdir(aside)
    os.rename(target, aside)
    os.rename(staging, target)
    os.rename(aside, staging)


def _exchange(a: Path, b: Path) -> bool:
    """renameat2(RENAME_EXCHANGE): swap two paths atomically; False when the system cannot."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _is_empty(directory: str | Path) -> bool:
    with os.scandir(directory) as entries:
        return next(entries, None) is None


def _remove_tree(path: Path) -> None:
    """Delete a directory tree without following any symlink in it."""
    if os.path.lexists(path):
        shutil.rmtree(path)
