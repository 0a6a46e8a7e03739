"""spec.accounting.database.embedded.backup (issue 28, item 6): the dump and restore CronJobs, and their
scripts run for real with sh against fake clients (the kind e2e runs them against MariaDB)."""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.errors import ProfileError
from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render
from slurmk8s.render.k8s.dbbackup import dump_script, restore_script

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"


def with_backup(backup: dict | None, external: bool = False) -> dict:
    doc = yaml.safe_load(GPU_IB.read_text())
    if external:
        doc["spec"]["accounting"]["database"] = {"external": {"host": "db.site", "passwordSecret": {"name": "dbpw", "key": "p"}}}
    elif backup is None:
        doc["spec"]["accounting"]["database"]["embedded"].pop("backup")
    else:
        doc["spec"]["accounting"]["database"]["embedded"]["backup"] = backup
    return doc


def objects(doc: dict) -> dict[tuple[str, str], dict]:
    bundle = render(load_profile(yaml.safe_dump(doc).encode(), "p.yaml"))
    return {(o["kind"], o["metadata"]["name"]): o for o in bundle.objects}


def test_backup_renders_a_claim_a_dump_cronjob_and_a_suspended_restore() -> None:
    found = objects(with_backup({"schedule": "30 2 * * 0", "keep": 3, "storage": "5Gi"}))
    assert found[("PersistentVolumeClaim", "research-db-backup")]["spec"]["resources"]["requests"]["storage"] == "5Gi"
    dump, restore = found[("CronJob", "research-db-backup")], found[("CronJob", "research-db-restore")]
    assert dump["spec"]["schedule"] == "30 2 * * 0" and "suspend" not in dump["spec"]
    assert restore["spec"]["suspend"] is True
    for cronjob, read_only in ((dump, False), (restore, True)):
        pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["image"] == found[("StatefulSet", "research-mariadb")]["spec"]["template"]["spec"]["containers"][0]["image"]
        assert not [e for e in c.get("env", []) if "valueFrom" in e]  # the password is a file, not an env value
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["backup"].get("readOnly", False) is read_only
        assert pod["automountServiceAccountToken"] is False
    # MariaDB admits the dump and restore pods beside slurmdbd, and nothing else.
    policy = found[("NetworkPolicy", naming.network_policy("research", "mariadb"))]
    sources = [s["podSelector"]["matchLabels"][naming.LABEL_COMPONENT] for s in policy["spec"]["ingress"][0]["from"]]
    assert sources == [naming.ACCOUNTING, naming.DB_BACKUP]


def test_without_backup_or_with_an_external_database_nothing_is_rendered() -> None:
    for doc in (with_backup(None), with_backup(None, external=True)):
        found = objects(doc)
        assert not [k for k in found if "db-backup" in k[1] or "db-restore" in k[1]]
    policy = objects(with_backup(None))[("NetworkPolicy", naming.network_policy("research", "mariadb"))]
    assert len(policy["spec"]["ingress"][0]["from"]) == 1


@pytest.mark.parametrize("schedule", ["every night", "0 3 * *", "0 3 * * * *", "@often"])
def test_a_schedule_that_is_no_cron_line_is_refused_with_its_line(schedule: str) -> None:
    with pytest.raises(ProfileError, match=r"p\.yaml:\d+:\d+: spec\.accounting\.database\.embedded\.backup\.schedule"):
        load_profile(yaml.safe_dump(with_backup({"schedule": schedule})).encode(), "p.yaml")


# ------------------------------------------------------------------ the scripts, with fake clients

def fake_bin(tmp: Path, dump_exit: int = 0) -> Path:
    """mariadb-dump prints a dump (or fails half-way); mariadb records what it was fed."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "mariadb-dump").write_text(
        f'#!/bin/sh\necho "-- dump by $MYSQL_PWD of $*"\n[ {dump_exit} = 0 ] || exit {dump_exit}\necho "-- Dump completed"\n')
    (bin_dir / "mariadb").write_text(f'#!/bin/sh\ncat > "{tmp}/loaded"\necho "$*" > "{tmp}/loaded.args"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return bin_dir


def run_script(script: str, tmp: Path, bin_dir: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    text = script.replace("/backup", str(tmp / "backup")).replace("/run/db-password", str(tmp / "pw"))
    (tmp / "pw").mkdir(exist_ok=True)
    (tmp / "pw" / "password").write_text("s3cret")
    return subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "DB_HOST": "db", **(env or {})})


def test_the_dump_keeps_the_newest_and_a_failed_dump_leaves_no_file(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    backup.mkdir()
    for stamp in ("20260101T000000Z", "20260102T000000Z", "20260103T000000Z"):
        (backup / f"slurm_acct_db-{stamp}.sql.gz").write_bytes(gzip.compress(b"old"))
    (backup / "notes.txt").write_text("mine")
    done = run_script(dump_script(keep=2), tmp_path, fake_bin(tmp_path))
    assert done.returncode == 0, done.stderr
    kept = sorted(p.name for p in backup.iterdir())
    assert kept[0] == "notes.txt" and kept[1] == "slurm_acct_db-20260103T000000Z.sql.gz" and len(kept) == 3
    newest = gzip.decompress((backup / kept[2]).read_bytes()).decode()
    assert newest.startswith("-- dump by s3cret of --no-defaults --host=db") and "--databases slurm_acct_db" in newest
    assert "Dump completed" in newest
    failed_dir = tmp_path / "failed"
    failed_dir.mkdir()
    (failed_dir / "backup").mkdir()
    failed = run_script(dump_script(keep=2), failed_dir, fake_bin(failed_dir, dump_exit=3))
    assert failed.returncode != 0 and list((failed_dir / "backup").iterdir()) == []


def test_the_restore_loads_the_newest_dump_or_the_one_named(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    backup.mkdir()
    for stamp in ("20260101T000000Z", "20260102T000000Z"):
        (backup / f"slurm_acct_db-{stamp}.sql.gz").write_bytes(gzip.compress(stamp.encode()))
    bin_dir = fake_bin(tmp_path)
    assert run_script(restore_script(), tmp_path, bin_dir).returncode == 0
    assert (tmp_path / "loaded").read_text() == "20260102T000000Z"
    assert "--host=db" in (tmp_path / "loaded.args").read_text()
    named = run_script(restore_script(), tmp_path, bin_dir, {"DUMP": "slurm_acct_db-20260101T000000Z.sql.gz"})
    assert named.returncode == 0 and (tmp_path / "loaded").read_text() == "20260101T000000Z"
    missing = run_script(restore_script(), tmp_path, bin_dir, {"DUMP": "nope.sql.gz"})
    assert missing.returncode == 1 and "no dump" in missing.stderr
    # A cut archive is refused before mariadb reads a byte of it.
    cut = gzip.compress(b"x" * 100000)[:-40]
    (backup / "slurm_acct_db-20260103T000000Z.sql.gz").write_bytes(cut)
    (tmp_path / "loaded").unlink()
    broken = run_script(restore_script(), tmp_path, bin_dir)
    assert broken.returncode == 1 and "is not a whole gzip file" in broken.stderr
    assert not (tmp_path / "loaded").exists()
