"""`render -o DIR` treats DIR as untrusted and replaces it whole (issue 16, data loss and security).

Marker lines never name files to delete, symlinks in the tree are never followed, the user's
files are kept (or the render refuses), concurrent renders take turns, and a killed render
leaves the previous tree in place and nothing that a later render refuses.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import slurmk8s
from slurmk8s.errors import SlurmK8sError, UsageError
from slurmk8s.output.plain import MARKER, write_tree
from inprocess import run_cli

ROOT = Path(__file__).resolve().parents[2]
CODE = str(Path(slurmk8s.__file__).resolve().parents[1])  # subprocesses run the code under test
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"


def slurmk8s(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`slurmk8s ARGS` through cli.main in this process (tests/inprocess.py); a render that is killed, held
    or run as another user is a real process (run_hooked, and the subprocesses below)."""
    return run_cli(args, cwd=cwd, timeout=120)


def files(root: Path) -> dict[str, bytes | str]:
    """Relative path -> content (files) or '-> target' (symlinks), not following links."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_file():
                out[rel] = path.read_bytes()
    return out


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".slurmk8s-" in p.name)


def marker_line(rel: str, text: str) -> bytes:
    """The marker's line for one file: sha256sum's format."""
    return f"{hashlib.sha256(text.encode()).hexdigest()}  {rel}\n".encode()


def one_line(run: subprocess.CompletedProcess, code: int) -> str:
    assert (run.returncode, run.stdout) == (code, ""), run.stderr
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.splitlines()
    return line


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    """tmp_path/out holding a plain render of kind-dev (marker included)."""
    out = tmp_path / "out"
    assert slurmk8s("render", str(KIND_DEV), "-o", str(out)).returncode == 0
    return out


@pytest.mark.parametrize("entry", ["../victim.txt", "/ABS/victim.txt", "x/../../emptyd/sub/file", ""],
                         ids=["dotdot", "absolute", "dotdot-inside", "empty-line"])
def test_marker_lines_outside_the_tree_are_refused(rendered: Path, tmp_path: Path, entry: str) -> None:
    """A marker committed by someone else once made render delete any file it could write."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    (tmp_path / "emptyd" / "sub").mkdir(parents=True)
    entry = entry.replace("/ABS", str(tmp_path))
    marker = rendered / MARKER
    lines = marker.read_text().splitlines()
    marker.write_text("\n".join(lines[:3] + [entry] + lines[3:]) + "\n")
    before = files(rendered)
    line = one_line(slurmk8s("render", str(GPU_IB), "-o", str(rendered)), 2)
    assert line == (f"{marker}:4: {entry!r} is not a path inside the directory; the marker was edited by someone "
                    "else: check the directory, remove the line and render again")
    assert victim.read_text() == "keep\n" and (tmp_path / "emptyd" / "sub").is_dir()
    assert files(rendered) == before


def test_a_symlink_in_place_of_a_generated_file_is_refused_not_followed(rendered: Path, tmp_path: Path) -> None:
    """The link's target once received the new ConfigMap (git stores symlinks: a commit can plant one).
    A link is not what the last render wrote, so it is the user's: refused where the render writes."""
    precious = tmp_path / "precious.txt"
    precious.write_text("PRECIOUS\n")
    link = rendered / "manifests" / "configmap-dev-slurm-config.yaml"
    link.unlink()
    link.symlink_to(precious)
    changed = tmp_path / "changed.yaml"
    changed.write_text(KIND_DEV.read_text().replace("      cpus: 1\n", "      cpus: 2\n"))
    line = one_line(slurmk8s("render", str(changed), "-o", str(rendered)), 2)
    assert line == (f"{rendered}: the render would replace what it did not write: manifests/configmap-dev-slurm-"
                    f"config.yaml (listed in {MARKER}, but not what slurmk8s wrote there); move or remove it, then "
                    "render again")
    assert precious.read_text() == "PRECIOUS\n" and os.readlink(link) == str(precious)
    link.unlink()
    assert slurmk8s("render", str(changed), "-o", str(rendered)).returncode == 0
    assert "CPUs=2" in yaml.safe_load(link.read_text())["data"]["slurm.conf"]


def test_a_symlinked_directory_where_the_render_writes_is_refused(rendered: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (rendered / "manifests").rename(elsewhere)
    (rendered / "manifests").symlink_to(elsewhere)
    before = files(elsewhere)
    line = one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered)), 2)
    assert line == (f"{rendered}: the render would replace what it did not write: manifests (a symbolic link where "
                    "the render writes a directory); move or remove it, then render again")
    assert files(elsewhere) == before


def test_the_users_files_are_kept_and_never_overwritten(rendered: Path) -> None:
    """kustomization.yaml of the user: kept by a plain render, refused by a kustomize render, never deleted."""
    mine = rendered / "kustomization.yaml"
    mine.write_text("# MY OWN OVERLAY\n")
    (rendered / "manifests" / "extra").mkdir()
    (rendered / "manifests" / "extra" / "patch.yaml").write_text("p: 1\n")
    (rendered / "notes").symlink_to("../somewhere/else")
    os.chmod(rendered / "manifests" / "extra", 0o750)
    assert slurmk8s("render", str(KIND_DEV), "-o", str(rendered)).returncode == 0
    kept = files(rendered)
    assert kept["kustomization.yaml"] == b"# MY OWN OVERLAY\n"
    assert kept["manifests/extra/patch.yaml"] == b"p: 1\n" and kept["notes"] == "-> ../somewhere/else"
    assert (rendered / "manifests" / "extra").stat().st_mode & 0o777 == 0o750
    line = one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered), "--format", "kustomize"), 2)
    assert line == (f"{rendered}: the render would replace what it did not write: kustomization.yaml (your file, "
                    "not written by slurmk8s); move or remove it, then render again")
    assert slurmk8s("render", str(KIND_DEV), "-o", str(rendered)).returncode == 0
    assert files(rendered) == kept


def run_hooked(hook: str, *args: str, **popen) -> subprocess.Popen:
    """slurmk8s ARGS in a subprocess whose slurmk8s.output.tree was patched by hook (Python code)."""
    code = f"import os, signal, sys\nfrom slurmk8s.output import tree\n{hook}\nsys.argv = ['slurmk8s', *sys.argv[1:]]\n" \
           "from slurmk8s.cli import main\nmain()\n"
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, env={**os.environ, "PYTHONPATH": CODE},
                            **popen)


def read_line(stream, limit: float = 60) -> str:
    """The next line of a child's pipe; a bound (not a pause): fails if nothing comes within limit seconds."""
    ready, _, _ = select.select([stream], [], [], limit)
    assert ready, "the child said nothing"
    return stream.readline()


def test_concurrent_renders_take_turns(rendered: Path, tmp_path: Path) -> None:
    """Two renders into one directory once left a tree mixing both profiles; now the second waits for the first."""
    hold = "real = tree._fill\ndef held(*a):\n    print('LOCKED', flush=True); sys.stdin.readline(); real(*a)\ntree._fill = held\n"
    first = run_hooked(hold, "render", str(GPU_IB), "-o", str(rendered), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    try:
        assert read_line(first.stdout) == "LOCKED\n"  # first holds the lock, its tree half built
        second = subprocess.Popen([sys.executable, "-m", "slurmk8s.cli", "render", str(KIND_DEV), "-o", str(rendered)],
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": CODE})
        assert read_line(second.stderr) == f"waiting for another slurmk8s render into {tmp_path} to finish\n"
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0
    finally:
        first.kill()
    fresh = tmp_path / "fresh"
    assert slurmk8s("render", str(KIND_DEV), "-o", str(fresh)).returncode == 0
    assert files(rendered) == files(fresh)  # exactly the second render, nothing of the first
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("existing", [True, False], ids=["over-an-earlier-render", "into-a-new-directory"])
def test_a_killed_render_leaves_the_old_tree_and_nothing_in_the_way(tmp_path: Path, existing: bool) -> None:
    out = tmp_path / "out"
    if existing:
        assert slurmk8s("render", str(KIND_DEV), "-o", str(out)).returncode == 0
    before = files(out) if existing else None
    kill = "def killed(*a):\n    os.kill(os.getpid(), signal.SIGKILL)\ntree._swap = killed\n"
    child = run_hooked(kill, "render", str(GPU_IB), "-o", str(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert child.wait(timeout=120) == -signal.SIGKILL
    assert (files(out) if existing else out.exists()) == (before if existing else False)
    assert len(leftovers(tmp_path)) == 1  # its staging directory, full of the unfinished tree
    run = slurmk8s("render", str(GPU_IB), "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert leftovers(tmp_path) == [] and (out / "manifests" / "statefulset-research-h100.yaml").is_file()


def test_without_an_atomic_exchange_a_killed_render_is_recovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two-rename fallback: a tree moved aside by a render killed between the renames comes back."""
    out = tmp_path / "out"
    write_tree({"a.yaml": "1\n"}, out)
    (out / "mine.txt").write_text("user\n")
    from slurmk8s.output import tree as tree_module
    monkeypatch.setattr(tree_module, "_exchange", lambda a, b: False)
    write_tree({"a.yaml": "2\n"}, out)
    assert files(out) == {"a.yaml": b"2\n", "mine.txt": b"user\n", MARKER: marker_line("a.yaml", "2\n")}
    os.rename(out, tmp_path / f".out.slurmk8s-old-{os.getpid()}-0123abcd")  # the kill between the renames
    write_tree({"b.yaml": "3\n"}, out)
    assert files(out) == {"b.yaml": b"3\n", "mine.txt": b"user\n", MARKER: marker_line("b.yaml", "3\n")}
    assert leftovers(tmp_path) == []


def test_several_leftover_staging_directories_are_all_cleaned(tmp_path: Path) -> None:
    """Two killed renders leave two staging directories; the next render drops both (they were once
    sorted as os.DirEntry objects, which do not compare: a TypeError)."""
    out = tmp_path / "out"
    write_tree({"a.yaml": "1\n"}, out)
    for suffix in ("0123abcd", "4567cdef"):
        (tmp_path / f".out.slurmk8s-new-{os.getpid()}-{suffix}" / "manifests").mkdir(parents=True)
    assert len(leftovers(tmp_path)) == 2
    write_tree({"b.yaml": "2\n"}, out)
    assert leftovers(tmp_path) == []
    assert files(out) == {"b.yaml": b"2\n", MARKER: marker_line("b.yaml", "2\n")}


def test_output_that_is_a_file_or_the_current_directory_is_one_line(tmp_path: Path, rendered: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert one_line(slurmk8s("render", str(KIND_DEV), "-o", str(afile)), 2) == (
        f"{afile}: not a directory; -o needs a directory (new or from an earlier render), or - for one YAML stream")
    assert one_line(slurmk8s("render", str(KIND_DEV), "-o", f"{afile}/sub"), 2) == (
        f"{afile}/sub: {afile} is a file, not a directory")
    assert one_line(slurmk8s("render", str(KIND_DEV), "-o", ".", cwd=rendered), 2) == (
        ".: is the current directory (or holds it); a render replaces the whole directory, so run it from outside, "
        "e.g. `slurmk8s render PROFILE -o ../NAME`")
    assert afile.read_text() == "x"


def test_a_read_only_directory_is_one_line(tmp_path: Path) -> None:
    """As root only a dropped capability makes a directory read-only: setpriv drops DAC override."""
    readonly = tmp_path / "ro"
    readonly.mkdir(mode=0o555)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]
    if os.geteuid() != 0:
        drop = []
    run = subprocess.run([*drop, sys.executable, "-m", "slurmk8s.cli", "render", str(KIND_DEV), "-o",
                          str(readonly / "out")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": CODE})
    assert one_line(run, 1) == f"{readonly}/out: cannot write the rendered tree: Permission denied"
    assert list(readonly.iterdir()) == []


def test_a_full_disk_keeps_the_old_tree(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = files(rendered)
    real_open = os.open
    written = []

    def full(path, flags, mode=0o777, **kw):
        if flags & os.O_CREAT and len(written) >= 5:
            raise OSError(28, "No space left on device", str(path))
        written.append(path)
        return real_open(path, flags, mode, **kw)

    from slurmk8s.output import tree as tree_module
    monkeypatch.setattr(tree_module.os, "open", full)
    with pytest.raises(SlurmK8sError) as info:
        write_tree({f"f{i}.yaml": "x\n" for i in range(20)}, rendered)
    assert str(info.value) == f"{rendered}: cannot write the rendered tree: No space left on device"
    monkeypatch.undo()
    assert files(rendered) == before and leftovers(rendered.parent) == []


@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"], ids=["full", "closed"])
def test_stdout_that_cannot_be_written_is_one_line(redirect: str) -> None:
    command = f"exec {sys.executable} -m slurmk8s.cli render {KIND_DEV} -o - {redirect}"
    run = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": CODE})
    expected = {"full": "cannot write the YAML stream to standard output: No space left on device",
                "closed": "cannot write the YAML stream: standard output is closed"}
    assert (run.returncode, run.stderr) == (1, expected["full" if "full" in redirect else "closed"] + "\n")


def test_a_foreign_directory_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("x")
    with pytest.raises(UsageError, match="not written by slurmk8s render"):
        write_tree({"a.yaml": "1\n"}, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


# --- issue 24: mounts, the marker's digests, ownership, nested renders, bad -o paths --------------------------

def needs_root() -> None:
    """Mounts, chown and device nodes need root: a failure, not a skip (the suite runs as root here and in CI)."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root (mount, chown, mknod); run the suite as root, as CI does")


def mounts_below(directory: Path) -> list[str]:
    """Mount points under directory, deepest first (from this process's mountinfo)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    return sorted((p for p in points if p.startswith(f"{directory}/")), key=len, reverse=True)


@pytest.mark.parametrize("kind", ["tmpfs", "bind"], ids=["tmpfs", "bind-mount-of-the-same-filesystem"])
def test_a_filesystem_mounted_inside_the_output_is_refused_before_any_change(rendered: Path, tmp_path: Path,
                                                                              kind: str) -> None:
    """The old tree's rmtree once crossed into the mount and emptied it (then failed with EBUSY, every time)."""
    needs_root()
    data = rendered / "data"
    data.mkdir()
    source = tmp_path / "elsewhere"
    source.mkdir()
    mount = ["mount", "-t", "tmpfs", "tmpfs"] if kind == "tmpfs" else ["mount", "--bind", str(source)]
    mount.append(str(data))
    subprocess.run(mount, check=True)
    try:
        (data / "important.txt").write_text("PRECIOUS\n")
        before = files(rendered)
        line = one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered)), 2)
        assert line == (f"{rendered}: a filesystem is mounted inside it (data); a render replaces the whole directory "
                        "and cannot carry a mount over: unmount it or mount it elsewhere, then render again")
        assert os.path.ismount(data) or kind == "bind"
        assert mounts_below(tmp_path) == [str(data)]
        assert files(rendered) == before and leftovers(tmp_path) == []
    finally:
        for point in mounts_below(tmp_path):  # wherever a broken render moved it
            subprocess.run(["umount", point], check=True)
    if kind == "bind":
        assert (source / "important.txt").read_text() == "PRECIOUS\n"
    run = slurmk8s("render", str(KIND_DEV), "-o", str(rendered))
    assert run.returncode == 0, run.stderr


def test_a_leftover_staging_directory_with_a_mount_inside_is_not_emptied(rendered: Path, tmp_path: Path) -> None:
    """What the old code left behind (the mount moved into its staging directory): every later render then
    emptied it again and failed with EBUSY. Now: one line, the mount and its files untouched."""
    needs_root()
    leftover = tmp_path / f".out.slurmk8s-new-{os.getpid()}-0123abcd"
    (leftover / "data").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(leftover / "data")], check=True)
    try:
        (leftover / "data" / "important.txt").write_text("PRECIOUS\n")
        assert one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered)), 2) == (
            f"{leftover}: left by an earlier render, with a filesystem mounted inside it; unmount it and move out "
            "what you keep, then render again")
        assert (leftover / "data" / "important.txt").read_text() == "PRECIOUS\n"
    finally:
        for point in mounts_below(tmp_path):
            subprocess.run(["umount", point], check=True)
    run = slurmk8s("render", str(KIND_DEV), "-o", str(rendered))
    assert run.returncode == 0, run.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("line", ["MYNOTES.md", f"{'0' * 64}  MYNOTES.md"], ids=["bare-path", "made-up-digest"])
def test_a_line_added_to_the_marker_deletes_no_user_file(rendered: Path, line: str) -> None:
    """`echo MYNOTES.md >> .slurmk8s-rendered` once made the next render delete MYNOTES.md."""
    (rendered / "MYNOTES.md").write_text("mine\n")
    with open(rendered / MARKER, "a") as f:
        f.write(line + "\n")
    why = " without a digest (an older slurmk8s), and not what this render writes" if line == "MYNOTES.md" \
        else ", but not what slurmk8s wrote there"
    assert one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered)), 2) == (
        f"{rendered}: the render would replace what it did not write: MYNOTES.md (listed in {MARKER}{why}); move or "
        "remove it, then render again")
    assert (rendered / "MYNOTES.md").read_text() == "mine\n"


def test_an_edited_generated_file_is_refused_not_overwritten(rendered: Path) -> None:
    edited = rendered / "slurm" / "slurm.conf"
    edited.write_text(edited.read_text() + "# my note\n")
    line = one_line(slurmk8s("render", str(KIND_DEV), "-o", str(rendered)), 2)
    assert line == (f"{rendered}: the render would replace what it did not write: slurm/slurm.conf (listed in "
                    f"{MARKER}, but not what slurmk8s wrote there); move or remove it, then render again")
    assert edited.read_text().endswith("# my note\n")


def test_an_older_marker_without_digests_still_works(tmp_path: Path) -> None:
    """A tree from before the digests: files holding what this render writes are replaced, the marker upgraded;
    a listed file this render would change is not known to be ours, so it is refused."""
    out = tmp_path / "out"
    write_tree({"a.yaml": "1\n", "b.yaml": "2\n", "gone.yaml": "3\n"}, out)
    (out / MARKER).write_text("a.yaml\nb.yaml\ngone.yaml\n")
    with pytest.raises(UsageError) as info:
        write_tree({"a.yaml": "1\n", "b.yaml": "changed\n"}, out)
    assert str(info.value) == (
        f"{out.resolve()}: the render would replace what it did not write: b.yaml (listed in {MARKER} without a digest "
        f"(an older slurmk8s), and not what this render writes); gone.yaml (listed in {MARKER} without a digest (an "
        "older slurmk8s), and not what this render writes); move or remove it, then render again")
    (out / "b.yaml").unlink()
    (out / "gone.yaml").unlink()
    write_tree({"a.yaml": "1\n", "b.yaml": "changed\n"}, out)
    assert files(out) == {"a.yaml": b"1\n", "b.yaml": b"changed\n",
                          MARKER: marker_line("a.yaml", "1\n") + marker_line("b.yaml", "changed\n")}


def posix_acl(*entries: tuple[int, int, int]) -> bytes:
    """The system.posix_acl_access xattr: version 2, then (tag, permissions, id) entries in tag order."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in entries)


def test_a_render_as_root_keeps_the_users_owner_group_mode_and_acls(rendered: Path) -> None:
    """After `chown -R 1234 out`, a render as root once left out and the user's carried directories root:root."""
    needs_root()
    docs = rendered / "docs"
    (docs / "deep").mkdir(parents=True)
    (docs / "deep" / "a.md").write_text("mine\n")
    (rendered / "link").symlink_to("docs")
    for path in [rendered, *rendered.rglob("*")]:
        os.chown(path, 1234, 4321, follow_symlinks=False)
    os.chmod(rendered, 0o2770)
    os.chmod(docs, 0o750)
    none = 0xFFFFFFFF
    acl = posix_acl((0x01, 7, none), (0x02, 5, 5678), (0x04, 5, none), (0x10, 5, none), (0x20, 0, none))
    os.setxattr(docs, "system.posix_acl_access", acl)
    os.setxattr(docs, "system.posix_acl_default", acl)
    os.setxattr(rendered, "system.posix_acl_access", acl)

    def described(path: Path) -> tuple:
        info = os.lstat(path)
        acls = [os.getxattr(path, name) for name in ("system.posix_acl_access", "system.posix_acl_default")
                if path.is_dir() and not path.is_symlink() and name in os.listxattr(path)]
        return info.st_uid, info.st_gid, oct(info.st_mode), acls

    before = {p: described(rendered / p) for p in ["", "docs", "docs/deep", "docs/deep/a.md", "link"]}
    assert before[""][3] and before["docs"][3]  # the ACLs took
    run = slurmk8s("render", str(GPU_IB), "-o", str(rendered))
    assert run.returncode == 0, run.stderr
    assert {p: described(rendered / p) for p in before} == before
    generated = [rendered / "slurm" / "slurm.conf", rendered / "slurm", rendered / MARKER]
    assert {(p.name, p.stat().st_uid, p.stat().st_gid) for p in generated} == {(p.name, 1234, 4321) for p in generated}


def test_nested_renders_take_turns(rendered: Path, tmp_path: Path) -> None:
    """`render a -o nest & render b -o nest/sub` once both exited 0 and left a partial nest/sub: the inner render
    swapped its tree into the old nest, which the outer one then dropped."""
    hold = ("real = tree._fill\ndef held(*a):\n    print('LOCKED', flush=True); sys.stdin.readline(); real(*a)\n"
            "tree._fill = held\n")
    for outer_first in (True, False):
        held_args, waiting_args = ([str(GPU_IB), "-o", str(rendered)], [str(KIND_DEV), "-o", str(rendered / "sub")])
        if not outer_first:
            held_args, waiting_args = waiting_args, held_args
        first = run_hooked(hold, "render", *held_args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        try:
            assert read_line(first.stdout) == "LOCKED\n"  # holds its locks, its tree half built
            second = subprocess.Popen([sys.executable, "-m", "slurmk8s.cli", "render", *waiting_args], text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env={**os.environ, "PYTHONPATH": CODE})
            assert read_line(second.stderr) == f"waiting for another slurmk8s render into {tmp_path} to finish\n"
            first.stdin.write("\n")
            first.stdin.flush()
            assert first.wait(timeout=120) == 0 and second.wait(timeout=120) == 0, second.stderr.read()
        finally:
            first.kill()
        fresh = tmp_path / "fresh"
        assert slurmk8s("render", str(KIND_DEV), "-o", str(fresh)).returncode == 0
        assert files(rendered / "sub") == files(fresh)  # the inner render whole
        assert (rendered / "manifests" / "statefulset-research-h100.yaml").is_file()  # and the outer one
        assert leftovers(tmp_path) == [] and leftovers(rendered) == [MARKER]


def test_a_format_name_given_to_o_is_refused(tmp_path: Path) -> None:
    """`render -o yaml` once wrote a directory named yaml."""
    for name in ("yaml", "json"):
        assert one_line(slurmk8s("render", str(KIND_DEV), "-o", name, cwd=tmp_path), 2) == (
            f"-o {name}: a format's name, not a directory; did you mean -o - (one YAML stream) or --format "
            f"(plain|kustomize|helm|argocd)? For a directory of that name write -o ./{name}")
    assert list(tmp_path.iterdir()) == []
    assert slurmk8s("render", str(KIND_DEV), "-o", "./yaml", cwd=tmp_path).returncode == 0


DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("case", ["root", "loop", "loop-below", "too-long", "unsearchable", "tilde"])
def test_bad_output_paths_are_one_line(tmp_path: Path, case: str) -> None:
    """Each of these was a traceback (StopIteration, RuntimeError, OSError, PermissionError) or a silent ~ expansion."""
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "noperm" / "inner").mkdir(parents=True)
    os.chmod(tmp_path / "noperm", 0)
    long = "a" * 300
    out, code, message = {
        "root": ("/", 2, "/: cannot replace the root directory; choose a directory below it"),
        "loop": ("loop1", 2, "loop1: a loop of symbolic links; -o needs a directory"),
        "loop-below": ("loop1/sub", 2, "loop1/sub: a loop of symbolic links; -o needs a directory"),
        "too-long": (long, 2, f"{long}: File name too long"),
        "unsearchable": ("noperm/inner/out", 1, "noperm/inner/out: cannot write the rendered tree: Permission denied"),
        "tilde": ("~/out", 2, "~/out: a leading ~ is not expanded here (the shell does that when it is not quoted); "
                  "write the whole path"),
    }[case]
    drop = DROP_DAC if os.geteuid() == 0 else []
    run = subprocess.run([*drop, sys.executable, "-m", "slurmk8s.cli", "render", str(KIND_DEV), "-o", out],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": CODE})
    assert one_line(run, code) == message
    os.chmod(tmp_path / "noperm", 0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2", "noperm"]
