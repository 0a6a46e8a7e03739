"""The identity reloader (podside/identity_reload.sh) run as a real process against temp dirs:
the merge keeps the image's entries and lets the profile win, and a running `watch` picks up a
changed ConfigMap (files renamed into place, keys and homes kept in step)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slurmk8s.render.k8s.identity import render_reload_script
from tests.waiting import wait_for

IMAGE_PASSWD = ("root:x:0:0:root:/root:/bin/bash\nslurm:x:401:401::/var/lib/slurm:/bin/false\n"
                "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\nold:x:2001:2001::/home/old:/bin/sh\n")
IMAGE_GROUP = "root:x:0:\nslurm:x:401:\nubuntu:x:1000:\nada:x:1500:\n"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY ada@example.org"
# chown needs root; elsewhere the declared users are this process's own ids.
UID = 2001 if os.geteuid() == 0 else os.getuid()
GID = 2001 if os.geteuid() == 0 else os.getgid()


class Dirs:
    """A pod's view in temp dirs: the ConfigMap (src), the merged files (out), the image's /etc, keys, homes."""

    def __init__(self, root: Path) -> None:
        self.src, self.out, self.etc, self.keys, self.homes = (root / n for n in ("src", "out", "etc", "keys", "home"))
        for d in (self.src, self.out, self.etc, self.homes):
            d.mkdir()
        (self.etc / "passwd").write_text(IMAGE_PASSWD)
        (self.etc / "group").write_text(IMAGE_GROUP)
        self.script = root / "reload.sh"
        self.script.write_text(render_reload_script())

    def declare(self, passwd: str, group: str, keys: dict[str, str] | None = None) -> None:
        """Write the ConfigMap as the kubelet does: new files renamed into place, stale ones gone."""
        files = {"passwd": passwd, "group": group, **{f"ssh-{u}": k for u, k in (keys or {}).items()}}
        for name, text in files.items():
            tmp = self.src / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(self.src / name)
        for stale in self.src.iterdir():
            if stale.name not in files and not stale.name.startswith("."):
                stale.unlink()

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], "IDENTITY_SOURCE": str(self.src), "IDENTITY_OUT": str(self.out),
                "IDENTITY_BASE": str(self.etc), "IDENTITY_KEYS": str(self.keys), "IDENTITY_HOMES": str(self.homes),
                "IDENTITY_INTERVAL": "0.2"}

    def once(self) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", str(self.script), "once"], env=self.env(), capture_output=True, text=True,
                              timeout=60)


def passwd_line(name: str, uid: int, gid: int, home: Path) -> str:
    return f"{name}:x:{uid}:{gid}::{home}:/bin/bash\n"


@pytest.fixture
def pod(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path)


def test_one_pass_keeps_the_image_and_lets_the_profile_win(pod: Dirs) -> None:
    ada = passwd_line("ada", UID, GID, pod.homes / "ada")
    pod.declare(ada, f"ada:x:{GID}:\nhpc:x:3000:ada\n", {"ada": KEY + "\n"})
    run = pod.once()
    assert run.returncode == 0, run.stderr
    # 'old' had ada's uid, the image's group 'ada' her name: the profile is the authority for both.
    kept = "".join(f"{line}\n" for line in IMAGE_PASSWD.splitlines() if line.split(":")[2] != str(UID))
    assert (pod.out / "passwd").read_text() == kept + ada
    assert (pod.out / "group").read_text().endswith(f"ada:x:{GID}:\nhpc:x:3000:ada\n")
    assert "ada:x:1500:" not in (pod.out / "group").read_text()
    assert f"replaces the image entry ada of {pod.etc}/group" in run.stderr
    for f in ("passwd", "group"):
        assert oct((pod.out / f).stat().st_mode & 0o777) == "0o644"
    assert oct(pod.out.stat().st_mode & 0o777) == "0o755"
    key = pod.keys / "ada"
    assert key.read_text() == KEY + "\n"
    assert (key.stat().st_uid, key.stat().st_gid, oct(key.stat().st_mode & 0o777)) == (UID, GID, "0o600")
    home = pod.homes / "ada"
    assert (home.stat().st_uid, oct(home.stat().st_mode & 0o777)) == (UID, "0o700")


def test_declared_groups_without_users_keep_every_image_entry(pod: Dirs) -> None:
    pod.declare("", "hpc:x:3000:\n")
    run = pod.once()
    assert run.returncode == 0, run.stderr
    assert (pod.out / "passwd").read_text() == IMAGE_PASSWD
    assert (pod.out / "group").read_text() == IMAGE_GROUP + "hpc:x:3000:\n"


def test_a_missing_declared_file_fails_the_pass_and_writes_nothing(pod: Dirs) -> None:
    (pod.src / "group").write_text("hpc:x:3000:\n")
    run = pod.once()
    assert run.returncode == 1
    assert "cannot merge" in run.stderr
    assert not (pod.out / "passwd").exists()


def test_a_running_watch_follows_added_changed_and_removed_users_and_keys(pod: Dirs) -> None:
    ada = passwd_line("ada", UID, GID, pod.homes / "ada")
    pod.declare(ada, f"ada:x:{GID}:\n", {"ada": KEY + "\n"})
    watch = subprocess.Popen(["sh", str(pod.script), "watch"], env=pod.env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the first pass", lambda: (pod.out / "passwd").exists() and (pod.out / "passwd").read_text(),
                 until=lambda text: bool(text) and ada in text, deadline_s=30)
        first = (pod.out / "passwd").stat().st_ino

        # bob and his key added, ada's key changed: a new file renamed over the old (a new inode).
        bob = passwd_line("bob", UID + 1 if UID == 2001 else UID, GID, pod.homes / "bob")
        pod.declare(ada + bob, f"ada:x:{GID}:\nhpc:x:3000:ada,bob\n", {"ada": KEY + " new\n", "bob": KEY + " bob\n"})
        wait_for("bob in the merged passwd, hpc in group, both keys",
                 lambda: ((pod.out / "passwd").read_text(), (pod.out / "group").read_text(),
                          (pod.keys / "ada").read_text(), (pod.keys / "bob").read_text()
                          if (pod.keys / "bob").exists() else ""),
                 until=lambda seen: bob in seen[0] and "hpc:x:3000:ada,bob\n" in seen[1]
                 and seen[2] == KEY + " new\n" and seen[3] == KEY + " bob\n", deadline_s=30)
        assert (pod.out / "passwd").stat().st_ino != first
        assert (pod.homes / "bob").is_dir()
        # No temp file left behind: a pass makes one for a moment, so look between passes, not at one instant.
        wait_for("no temp file between passes", lambda: [p.name for p in pod.out.iterdir() if p.name.startswith(".")],
                 until=lambda names: names == [], deadline_s=30, every_s=0.05)

        # bob removed: his entry and his keys go; root's keys file is not the profile's and stays.
        (pod.keys / "root").write_text("root's key\n")
        pod.declare(ada, f"ada:x:{GID}:\n", {"ada": KEY + "\n"})
        wait_for("bob gone from passwd and keys",
                 lambda: ("bob:" in (pod.out / "passwd").read_text(), (pod.keys / "bob").exists()),
                 until=lambda seen: seen == (False, False), deadline_s=30)
        assert (pod.keys / "root").read_text() == "root's key\n"
        assert watch.poll() is None  # still watching
    finally:
        watch.terminate()  # TERM ends it at once (its trap), as the kubelet stops the sidecar
        out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "ssh keys of bob removed" in err


def test_an_unchanged_configmap_rewrites_nothing(pod: Dirs) -> None:
    pod.declare(passwd_line("ada", UID, GID, pod.homes / "ada"), f"ada:x:{GID}:\n")
    assert pod.once().returncode == 0
    inode = (pod.out / "passwd").stat().st_ino
    again = pod.once()
    assert again.returncode == 0, again.stderr
    assert (pod.out / "passwd").stat().st_ino == inode
    assert "written" not in again.stderr
