"""The command line as a user runs it: init, validate, render to a directory or a stream."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.render import render_file
from slurmk8s.output.plain import object_filename

ROOT = Path(__file__).resolve().parents[1]
GPU_IB, KIND_DEV = str(ROOT / "profiles/gpu-ib.yaml"), str(ROOT / "profiles/kind-dev.yaml")


def files(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under root."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_example_profiles_exist() -> None:
    """profiles/ must hold the three examples the golden and schema tests parametrize over."""
    assert {p.stem for p in (ROOT / "profiles").glob("*.yaml")} >= {"kind-dev", "gpu-ib", "legacy-munge"}


def test_init_writes_a_valid_starter_and_refuses_to_overwrite(slurmk8s, tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    assert slurmk8s("init", str(target)) == (0, f"wrote {target}\nwrote {tmp_path / 'slurmk8s.schema.json'}\n", "")
    assert slurmk8s("validate", str(target)) == (0, f"{target}: ok (cluster mycluster, Slurm 26.05, 1 pool(s), 4 node(s))\n", "")
    target.write_text("# mine\n")
    assert slurmk8s("init", str(target)) == (2, "", f"{target}: already exists (use --force to overwrite)\n")
    assert target.read_text() == "# mine\n"
    assert slurmk8s("init", str(target), "--force")[0] == 0
    assert slurmk8s("render", str(target), "-o", str(tmp_path / "out"))[0] == 0


def test_render_dir_writes_one_file_per_object_plus_slurm_files(slurmk8s, tmp_path: Path) -> None:
    out = tmp_path / "out"
    bundle = render_file(GPU_IB)
    code, stdout, stderr = slurmk8s("render", GPU_IB, "-o", str(out))
    assert (code, stderr) == (0, "")
    written = files(out)
    manifests = {k for k in written if k.startswith("manifests/") and k.endswith(".yaml")}
    assert manifests == {object_filename(o) for o in bundle.objects} and len(manifests) == len(bundle.objects)
    assert {k for k in written if k.startswith("slurm/")} == {f"slurm/{n}" for n in bundle.files}
    for obj in bundle.objects:
        assert yaml.safe_load(written[object_filename(obj)]) == obj
    assert written["manifests/ORDER"].decode().split() == [object_filename(o) for o in bundle.objects]
    assert stdout == f"wrote {len(written) - 1} files to {out}\n"  # the marker file is not counted


def test_render_stream_documents_equal_the_bundle(slurmk8s) -> None:
    code, stdout, stderr = slurmk8s("render", GPU_IB, "-o", "-")
    assert (code, stderr) == (0, "")
    assert list(yaml.safe_load_all(stdout)) == list(render_file(GPU_IB).objects)
    assert stdout.startswith("---\n") and "&id" not in stdout


def test_rerender_is_identical_and_removes_stale_files(slurmk8s, tmp_path: Path) -> None:
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    assert slurmk8s("render", GPU_IB, "-o", str(out))[0] == 0
    first = files(out)
    assert slurmk8s("render", GPU_IB, "-o", str(out))[0] == 0
    assert files(out) == first
    assert slurmk8s("render", KIND_DEV, "-o", str(out))[0] == 0
    assert slurmk8s("render", KIND_DEV, "-o", str(fresh))[0] == 0
    assert files(out) == files(fresh)
    assert "slurm/gres.conf" in first and not (out / "slurm/gres.conf").exists()


def test_render_refuses_a_foreign_directory(slurmk8s, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me\n")
    code, stdout, stderr = slurmk8s("render", GPU_IB, "-o", str(tmp_path))
    assert (code, stdout) == (2, "")
    assert stderr == (f"{tmp_path}: directory is not empty and was not written by slurmk8s render; "
                      "choose an empty or new directory\n")
    assert files(tmp_path) == {"notes.txt": b"keep me\n"}


@pytest.mark.parametrize("args, code, stderr_start", [
    (["validate", "missing.yaml"], 2, "missing.yaml: no such file\n"),
    (["render", "missing.yaml", "-o", "-"], 2, "missing.yaml: no such file\n"),
    (["render", GPU_IB, "-o", "-", "--format", "nope"], 2, "Usage:"),
    (["frobnicate"], 2, "Usage:"),
    (["validate"], 2, "Usage:"),
], ids=["validate-missing", "render-missing", "unknown-format", "unknown-command", "missing-argument"])
def test_bad_invocations_exit_2_without_traceback(slurmk8s, args: list[str], code: int, stderr_start: str) -> None:
    got_code, stdout, stderr = slurmk8s(*args)
    assert (got_code, stdout) == (code, "")
    assert stderr.startswith(stderr_start) and "Traceback" not in stderr


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    """The real CLI, interrupted at `down --delete-data`'s question (a terminal, so it asks; no cluster needed yet)."""
    import os
    import signal
    import subprocess

    from waiting import wait_for

    master, terminal = os.openpty()
    env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "none"))
    proc = subprocess.Popen([sys.executable, "-m", "slurmk8s.cli", "down", KIND_DEV, "--delete-data"],
                            stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, env=env, text=True)
    os.close(terminal)
    shown = bytearray()

    def read_terminal() -> str:
        import select
        while select.select([master], [], [], 0)[0]:
            shown.extend(os.read(master, 4096))
        return shown.decode(errors="replace")

    try:
        wait_for("the confirmation question", read_terminal, until=lambda text: "[y/N]" in text, deadline_s=60)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        os.close(master)
    assert proc.returncode == 130, stderr
    # the prompt itself echoes a space to stderr (Python's readline prompt); the message is a line of its own
    assert stderr.endswith("\ninterrupted\n") and stderr.strip() == "interrupted", repr(stderr)
