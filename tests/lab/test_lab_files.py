"""The lab writes key files with their final mode from the start (no 0644 moment before a chmod)."""

from __future__ import annotations

import os
import stat

import pytest

from slurmk8s.lab import files


@pytest.fixture
def modes_at_write(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The file's mode each time write_file starts writing its bytes."""
    seen: list[int] = []
    real_fdopen = os.fdopen

    def spy(fd: int, *args, **kwargs):
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(files.os, "fdopen", spy)
    return seen


@pytest.mark.parametrize("existing", [None, 0o644], ids=["new", "was-0644"])
def test_a_key_is_never_readable_by_others_while_it_is_written(tmp_path, modes_at_write, existing):
    key = tmp_path / "secrets" / "auth" / "slurm.key"
    if existing is not None:
        key.parent.mkdir(parents=True)
        key.write_bytes(b"old")
        key.chmod(existing)
    files.write_file(key, b"secret", 0o600)
    assert modes_at_write == [0o600]
    assert key.read_bytes() == b"secret"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_public_file_gets_its_mode_after_its_bytes(tmp_path, modes_at_write):
    conf = tmp_path / "conf" / "slurm.conf"
    files.write_file(conf, "ClusterName=dev\n", 0o644)
    assert modes_at_write == [0o600]
    assert conf.read_text() == "ClusterName=dev\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o644


def test_a_symlink_in_place_of_the_file_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "slurm.key").symlink_to(victim)
    with pytest.raises(OSError):
        files.write_file(tmp_path / "slurm.key", b"secret", 0o600)
    assert victim.read_text() == "keep"
