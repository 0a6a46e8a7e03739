"""Which image each rendered container runs on in the lab, and the export cache."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from slurmk8s.lab import rootfs
from slurmk8s.lab.errors import LabError, LabUnavailable

ID_A, ID_B = "a" * 64, "b" * 64


@pytest.mark.parametrize("ref, want", [
    ("ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04", "slurmd"),
    ("mariadb:11.4", "mariadb"),
    ("localhost/slurmk8s/login:22.05-debian12", "login"),
    ("registry.example.org:5000/hpc/slurmctld@sha256:" + "0" * 64, "slurmctld"),
    ("slurmdbd", "slurmdbd"),
], ids=["slinky", "short", "project", "port-digest", "bare"])
def test_image_name(ref, want):
    assert rootfs.image_name(ref) == want


@pytest.mark.parametrize("ref, want", [
    ("mariadb:11.4", ["localhost/mariadb:11.4", "docker.io/library/mariadb:11.4"]),
    ("mariadb", ["localhost/mariadb:latest", "docker.io/library/mariadb:latest"]),
    ("bitnami/mariadb:11", ["localhost/bitnami/mariadb:11", "docker.io/bitnami/mariadb:11"]),
    ("localhost/slurmk8s/slurmd:26.05-debian14", ["localhost/slurmk8s/slurmd:26.05-debian14"]),
    ("ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04", ["ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04"]),
], ids=["short", "untagged", "two-parts", "localhost", "registry"])
def test_a_short_name_is_looked_up_where_podman_stores_it(ref, want):
    assert rootfs.candidates(ref) == want


def test_project_images_are_tagged_by_series_and_debian_release():
    assert rootfs.project_image("slurmctld", "26.05") == "localhost/slurmk8s/slurmctld:26.05-debian14"
    assert rootfs.project_image("mariadb", "22.05") == "localhost/slurmk8s/mariadb:22.05-debian12"
    assert rootfs.series_images("24.11") == [f"localhost/slurmk8s/{n}:24.11-debian13" for n in
                                             ("login", "mariadb", "slurmctld", "slurmd", "slurmdbd", "slurmrestd")]
    with pytest.raises(LabUnavailable, match="no images for Slurm 23.02"):
        rootfs.project_image("slurmd", "23.02")


def test_an_export_is_complete_only_with_its_record(tmp_path):
    path = rootfs.exported_path(ID_A, tmp_path)
    path.mkdir(parents=True)
    assert rootfs.export_info(ID_A, tmp_path) is None
    path.with_suffix(".json").write_text(json.dumps({"id": ID_A, "export_seconds": 1.0}))
    assert rootfs.export_info(ID_A, tmp_path)["id"] == ID_A
    with pytest.raises(LabError, match="expected 64 hex digits"):
        rootfs.exported_path("../etc", tmp_path)


def test_prune_keeps_live_images_and_removes_the_rest_and_old_debootstrap_trees(tmp_path):
    for image_id in (ID_A, ID_B):
        rootfs.exported_path(image_id, tmp_path).mkdir(parents=True)
        rootfs.exported_path(image_id, tmp_path).with_suffix(".json").write_text("{}")
    legacy = tmp_path / "slurm-24.11-trixie"
    legacy.mkdir()
    (legacy / rootfs.LEGACY_MARKER).write_text("{}")
    (tmp_path / "slurm-24.11-trixie.build.log").write_text("")
    gone = rootfs.prune(tmp_path, {ID_A})
    assert sorted(p.name for p in gone) == sorted([ID_B, f"{ID_B}.json", "slurm-24.11-trixie"])
    assert rootfs.exported_path(ID_A, tmp_path).is_dir() and not legacy.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images"]


def test_without_podman_the_lab_says_what_to_install(monkeypatch):
    monkeypatch.setattr(rootfs, "ENGINE", "no-such-engine-here")
    with pytest.raises(LabUnavailable, match="install podman"):
        rootfs.resolve(["ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04"], "26.05")


def test_an_exported_image_s_config_is_inspected_once_then_read_from_its_record(tmp_path, monkeypatch):
    ref = rootfs.project_image("slurmd", "26.05")
    rootfs.exported_path(ID_A, tmp_path).mkdir(parents=True)
    rootfs.exported_path(ID_A, tmp_path).with_suffix(".json").write_text(json.dumps({"id": ID_A}))
    inspected = []

    def engine(args, what, timeout=120, check=True):
        if args[0] == "images":
            return subprocess.CompletedProcess(args, 0, f"sha256:{ID_A} {ref}\n", "")
        assert args[:2] == ["image", "inspect"], args
        inspected.append(args[4:])
        config = {"User": "slurm", "Env": ["PATH=/usr/sbin:/usr/bin"], "Cmd": ["slurmd", "-D"]}
        return subprocess.CompletedProcess(args, 0, json.dumps([{"Id": f"sha256:{ID_A}", "Config": config}]), "")

    monkeypatch.setattr(rootfs, "_engine", engine)
    first = rootfs.resolve([ref], "26.05", tmp_path)[ref]
    again = rootfs.resolve([ref], "26.05", tmp_path)[ref]
    assert inspected == [[ID_A]]
    assert first.config == again.config and (again.config.user, again.config.cmd) == ("slurm", ("slurmd", "-D"))
    assert rootfs.export_info(ID_A, tmp_path)["id"] == ID_A  # the record keeps what it had


def _has_podman_image(ref: str) -> bool:
    try:
        return ref in rootfs.local_images()
    except LabError:
        return False


@pytest.mark.lab
def test_a_missing_image_falls_back_to_the_project_s_and_is_exported_once(tmp_path):
    ref = rootfs.project_image("slurmrestd", "26.05")
    if os.geteuid() != 0 or not _has_podman_image(ref):
        pytest.skip(f"needs root and {ref} (slurmk8s images build --slurm 26.05)")
    logs: list[str] = []
    rendered = "ghcr.io/slinkyproject/slurmrestd:26.05-ubuntu24.04"
    image = rootfs.resolve([rendered], "26.05", tmp_path, logs.append)[rendered]
    assert (image.ref, image.substituted) == (ref, True)
    assert image.image_id == rootfs.local_images()[ref] and image.path == rootfs.exported_path(image.image_id, tmp_path)
    # the files as the image has them: slurm is 401 and /run/slurm belongs to it
    assert "slurm:x:401:401:" in image.read("/etc/passwd")
    assert (image.path / "run/slurm").stat().st_uid == 401
    assert image.config.env and dict(image.config.env)["PATH"].startswith("/usr/local/sbin")
    again = rootfs.resolve([rendered], "26.05", tmp_path, logs.append)[rendered]
    assert again.path == image.path and len([line for line in logs if line.startswith("exported")]) == 1
    leftover = subprocess.run(["podman", "ps", "-a", "--filter", f"ancestor={image.image_id}", "--format", "{{.ID}}"],
                              capture_output=True, text=True)
    assert leftover.stdout.strip() == ""  # the export's container is removed
