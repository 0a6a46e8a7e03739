"""`slurmk8s init PATH` (issue 24): --force writes over a regular file only, and bad paths are one line."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import slurmk8s
from inprocess import run_cli
from slurmk8s.actions.init import STARTER

CODE = str(Path(slurmk8s.__file__).resolve().parents[1])  # subprocesses run the code under test
DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]


def init(*args: str, cwd: Path, drop_dac: bool = False) -> tuple[int, str, str]:
    """slurmk8s init ARGS; drop_dac takes root's permission override away (as a user runs it)."""
    prefix = DROP_DAC if drop_dac and os.geteuid() == 0 else []
    if not prefix:  # cli.main in this process; without root's override it must be a process of its own
        run = run_cli(["init", *args], cwd=cwd, timeout=60)
        return run.returncode, run.stdout, run.stderr
    run = subprocess.run([*prefix, sys.executable, "-m", "slurmk8s.cli", "init", *args], capture_output=True,
                         text=True, timeout=60, cwd=cwd, env={**os.environ, "PYTHONPATH": CODE})
    return run.returncode, run.stdout, run.stderr


def needs_root() -> None:
    """A device node needs root (mknod): a failure, not a skip (the suite runs as root here and in CI)."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root (mknod); run the suite as root, as CI does")


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-fifo", "dangling-link"])
def test_force_refuses_anything_but_a_regular_file(tmp_path: Path, kind: str) -> None:
    """`init /dev/null --force` as root once turned the device into a regular file (and wrote /dev/...schema.json).
    Tested on nodes made here, never on /dev."""
    special = tmp_path / "special"
    if kind == "device":
        needs_root()
        os.mknod(special, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # the null device's numbers, in tmp_path
    else:
        os.mkfifo(special)
    name = "special"
    if kind.endswith("link"):
        name = "link"
        (tmp_path / "link").symlink_to("special" if kind == "link-to-fifo" else "nowhere")
    if kind == "dangling-link":
        special.unlink()
    what = {"fifo": "a FIFO", "device": "a character device", "link-to-fifo": "a FIFO"}.get(kind)
    expected = (f"{name}: {what}; --force replaces only a regular file (or a link to one)\n" if what else
                "link: a symbolic link to nothing; --force replaces only a regular file\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert init(name, "--force", cwd=tmp_path) == (2, "", expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no schema written beside it either
    if kind != "dangling-link":
        assert stat.S_IFMT(os.stat(special).st_mode) == (stat.S_IFCHR if kind == "device" else stat.S_IFIFO)


def test_force_still_replaces_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("# old\n")
    assert init("p.yaml", "--force", cwd=tmp_path)[0] == 0
    assert (tmp_path / "p.yaml").read_text() == STARTER


def test_a_fifo_where_the_schema_goes_is_left_alone(tmp_path: Path) -> None:
    """Reading slurmk8s.schema.json to see whether it is ours once hung on a FIFO of that name."""
    os.mkfifo(tmp_path / "slurmk8s.schema.json")
    assert init("p.yaml", cwd=tmp_path) == (0, "wrote p.yaml\n", "")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "slurmk8s.schema.json").st_mode)


@pytest.mark.parametrize("case", ["too-long", "unsearchable", "new-dir-slash", "existing-dir", "loop"])
def test_bad_paths_are_one_line(tmp_path: Path, case: str) -> None:
    """Each was a traceback (OSError, PermissionError), a file named newdir, or a misleading 'use --force'."""
    (tmp_path / "noperm" / "inner").mkdir(parents=True)
    os.chmod(tmp_path / "noperm", 0)
    (tmp_path / "adir").mkdir()
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    long = "a" * 300 + ".yaml"
    args, code, message = {
        "too-long": ([long], 2, f"{long}: File name too long"),
        "unsearchable": (["noperm/inner/p.yaml"], 1, "noperm/inner/p.yaml: cannot write the starter profile: "
                         "Permission denied"),
        "new-dir-slash": (["newdir/"], 2, "newdir/: names a directory; give the profile's file name, e.g. "
                          "newdir/profile.yaml"),
        "existing-dir": (["adir"], 2, "adir: is a directory; give the profile's file name, e.g. adir/profile.yaml"),
        "loop": (["loop1", "--force"], 2, "loop1: a loop of symbolic links"),
    }[case]
    assert init(*args, cwd=tmp_path, drop_dac=True) == (code, "", message + "\n")
    os.chmod(tmp_path / "noperm", 0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "loop1", "loop2", "noperm"]
