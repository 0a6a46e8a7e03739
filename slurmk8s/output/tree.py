"""Writing a rendered tree into a directory: all or nothing, one render at a time, never outside it.

A rendered tree is committed to git and read by GitOps tools, so its directory is handled as
untrusted input and replaced as a whole:
- the new tree is built in a staging directory next to the target and swapped in with one
  atomic rename (renameat2 RENAME_EXCHANGE), so readers and a killed render see either the old
  tree or the new one, never a mix;
- an exclusive lock on the parent directory serializes renders into the same target;
- the marker file (.slurmk8s-rendered) only says which files an earlier render wrote; its
  lines must be plain relative paths, and nothing it names is ever opened, followed or deleted
  (the old tree is dropped as a whole, links not followed);
- every other entry of the directory is the user's: it is carried over unchanged (hard links,
  symlinks recreated as links), and a user's file where the render would write is refused,
  never overwritten.
"""

from __future__ import annotations

import errno
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
        raise OutputError(f"{out_dir}: cannot write the rendered tree: {e.strerror or e}") from None
    return list(tree)


def _clean_relative(rel: str) -> bool:
    """A relative POSIX path without '', '.' or '..' components (nothing that leaves the tree)."""
    parts = rel.split("/")
    return bool(rel) and "\x00" not in rel and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _target(out_dir: Path) -> Path:
    """The absolute directory to replace (a symlink given on the command line is the user's choice: followed)."""
    target = out_dir.expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise UsageError(f"{out_dir}: not a directory; -o needs a directory (new or from an earlier render), "
                         "or - for one YAML stream")
    existing = next(d for d in target.parents if d.exists())
    if not existing.is_dir():
        raise UsageError(f"{out_dir}: {existing} is a file, not a directory")
    if target.parent == target:
        raise UsageError(f"{out_dir}: cannot replace the root directory; choose a directory below it")
    try:
        cwd = Path.cwd().resolve()
    except FileNotFoundError:  # the current directory was deleted: it cannot be the target
        cwd = Path("/")
    if cwd == target or target in cwd.parents:
        raise UsageError(f"{out_dir}: is the current directory (or holds it); a render replaces the whole "
                         "directory, so run it from outside, e.g. `slurmk8s render PROFILE -o ../NAME`")
    if target.is_dir() and os.path.ismount(target):
        raise UsageError(f"{out_dir}: is a mount point; a render swaps the whole directory in, which a mount "
                         "point does not allow: render into a directory below it")
    return target


@contextmanager
def _locked(target: Path, note: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive lock on target's parent directory (other renders into it wait)."""
    import fcntl

    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note(f"waiting for another slurmk8s render into {target.parent} to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _staging_pattern(target: Path) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(target.name)}\.slurmk8s-(new|old)-[0-9]+-[0-9a-f]{{8}}$")


def _recover_leftovers(target: Path) -> None:
    """Clean up after a render that was killed: restore a tree it had moved aside, drop its staging dirs."""
    pattern = _staging_pattern(target)
    leftovers = sorted(e for e in os.scandir(target.parent)
                       if pattern.match(e.name) and e.is_dir(follow_symlinks=False))
    for entry in leftovers:
        if pattern.match(entry.name).group(1) == "old" and not os.path.lexists(target):
            os.rename(entry.path, target)  # the previous tree, moved aside just before the kill
        else:
            _remove_tree(Path(entry.path))


def _previous_render(target: Path) -> set[str] | None:
    """Paths the last render wrote (from the marker); None when target is new or empty; refuse a foreign dir."""
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
    written = set()
    with open(marker, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            rel = line.rstrip("\n")
            if not _clean_relative(rel):
                raise UsageError(f"{marker}:{number}: {rel!r} is not a path inside the directory; the marker was "
                                 "edited by someone else: check the directory, remove the line and render again")
            written.add(rel)
    return written


def _carried_entries(target: Path, previous: set[str] | None, tree: dict[str, str]) -> list[tuple[str, os.stat_result]]:
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
                continue  # the last render's own file (or what replaced it): dropped with the old tree
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


def _fill(staging: Path, tree: dict[str, str], old: Path, carried: list[tuple[str, os.stat_result]]) -> None:
    """Write the rendered files and carry the user's entries over into staging (which is new: no links)."""
    if old.is_dir():
        os.chmod(staging, stat.S_IMODE(os.stat(old).st_mode))
    for rel, info in carried:
        source, dest = old / rel, staging / rel
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(dest, stat.S_IMODE(info.st_mode) | stat.S_IWUSR | stat.S_IXUSR)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(source), dest)
        else:
            try:
                os.link(source, dest, follow_symlinks=False)
            except OSError:  # a filesystem without hard links, or one that forbids them here
                shutil.copy2(source, dest, follow_symlinks=False)
    for rel, text in [*tree.items(), (MARKER, "".join(f"{r}\n" for r in tree))]:
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    for rel, info in carried:  # directories get their own modes back once they are filled
        if stat.S_ISDIR(info.st_mode):
            os.chmod(staging / rel, stat.S_IMODE(info.st_mode))


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
