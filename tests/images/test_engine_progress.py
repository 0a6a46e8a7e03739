"""A long engine step (a build, an import) shows the build step it is at, and ends at its deadline."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from slurmk8s.images.engine import Engine, current_step
from slurmk8s.images.errors import ImageError

# A stand-in for podman: two build steps, each held until the test has seen it (a file appears), so the
# test waits on what the progress line shows, never on the clock. Bounded: 30 s at the most per step.
FAKE_PODMAN = """#!/bin/sh
hold() { i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; }
echo "STEP 1/2: FROM localhost/base"
hold "$GO/1"
echo "Get:1 http://deb.example trixie/main slurmd"
echo "STEP 2/2: RUN apt-get install -y slurmd"
hold "$GO/2"
echo "COMMIT localhost/slurmk8s/slurmd:26.05-debian14"
"""


class Recorder:
    """Progress's interface; releases the fake's step once the line has named it."""

    def __init__(self, go: Path):
        self.go, self.lines, self.done_calls = go, [], 0

    def update(self, text: str) -> None:
        self.lines.append(text)
        for n in (1, 2):
            if f"STEP {n}/2" in text:
                (self.go / str(n)).touch()

    def done(self, text: str | None = None) -> None:
        self.done_calls += 1


@pytest.fixture
def fake_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, go = tmp_path / "bin", tmp_path / "go"
    bin_dir.mkdir()
    go.mkdir()
    script = bin_dir / "podman"
    script.write_text(FAKE_PODMAN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GO", str(go))
    return go


def test_a_build_shows_each_step_it_reaches_then_clears_the_line(tmp_path: Path, fake_podman: Path) -> None:
    progress = Recorder(fake_podman)
    engine = Engine("podman", tmp_path / "build.log", progress, progress_every=0.05)  # type: ignore[arg-type]
    engine.build(tmp_path / "Containerfile", tmp_path, ("localhost/slurmk8s/slurmd:26.05-debian14",), {},
                 "build slurmd", timeout=60)
    steps = [line for line in progress.lines if "STEP" in line]
    assert steps[0] == "build slurmd: STEP 1/2: FROM localhost/base"
    assert steps[-1] == "build slurmd: STEP 2/2: RUN apt-get install -y slurmd"
    assert progress.done_calls == 1
    assert "COMMIT localhost/slurmk8s/slurmd" in (tmp_path / "build.log").read_text()


def test_a_step_past_its_deadline_is_killed_and_named(tmp_path: Path, fake_podman: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    progress = Recorder(tmp_path / "elsewhere")  # releases nothing the fake waits for: step 1 never ends
    engine = Engine("podman", tmp_path / "build.log", progress, progress_every=0.05)  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(ImageError, match=r"(?s)^build slurmd timed out; last output .*STEP 1/2: FROM localhost/base"):
        engine.build(tmp_path / "Containerfile", tmp_path, ("x",), {}, "build slurmd", timeout=1)
    assert time.monotonic() - started < 20
    assert progress.done_calls == 1 and progress.lines[-1] == "build slurmd: STEP 1/2: FROM localhost/base"


def test_a_progress_line_that_cannot_be_written_stops_the_step(tmp_path: Path, fake_podman: Path) -> None:
    class Full(Recorder):
        def update(self, text: str) -> None:
            raise OSError(28, "No space left on device")
    engine = Engine("podman", tmp_path / "build.log", Full(fake_podman), progress_every=0.05)  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(OSError, match="No space left"):
        engine.build(tmp_path / "Containerfile", tmp_path, ("x",), {}, "build slurmd", timeout=60)
    assert time.monotonic() - started < 20  # the fake was killed, not waited for (it holds step 1 for 30 s)


@pytest.mark.parametrize("log, step", [
    ("$ podman build\nSTEP 1/3: FROM a\nnoise\nSTEP 2/3: RUN b\nmore noise\n", "STEP 2/3: RUN b"),
    ("#5 [2/4] RUN apt-get update\n#5 0.2 Get:1\n#6 [3/4] COPY x /y\n", "#6 [3/4] COPY x /y"),
    ("nothing a build names\n", None),
], ids=["podman", "buildkit", "none"])
def test_current_step_is_the_last_step_named(log: str, step: str | None) -> None:
    assert current_step(log) == step
