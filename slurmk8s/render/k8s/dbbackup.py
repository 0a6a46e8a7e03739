"""Dumps of the embedded accounting database, and their restore (spec.accounting.database.embedded.backup).

- The claim `<cluster>-db-backup` holds the dumps; `down` keeps it, like every claim, unless --delete-data.
- The CronJob `<cluster>-db-backup` runs `mariadb-dump --single-transaction` of slurm_acct_db over the
  network, as the database's slurm user (the password Secret, a file put in MYSQL_PWD: never on a command line),
  writes it gzipped beside the old ones under a temporary name, renames it into place (a dump is whole or
  absent) and deletes all but the newest `keep`.
- The CronJob `<cluster>-db-restore` is suspended: it never runs on a schedule. A restore is a Job made
  from it (`kubectl create job --from=cronjob/<cluster>-db-restore`) while slurmdbd is scaled to zero; it
  loads the newest dump, or the one named in DUMP (docs/day2.md, "Database backup and restore").
Both run in the database's image as its user (999), and reach MariaDB through its Service: the
database's NetworkPolicy admits them beside slurmdbd.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj, meta, service_account
from slurmk8s.render.k8s.podextras import with_pod_settings

BACKUP_DIR = "/backup"
PASSWORD_DIR = "/run/db-password"  # the password Secret, as a file: the clients read it from MYSQL_PWD, set by the script
DATABASE = "slurm_acct_db"
PREFIX = f"{DATABASE}-"  # dump names: slurm_acct_db-<UTC time>.sql.gz, so that they sort by time
LIST_DUMPS = f"ls -1 {BACKUP_DIR} | grep -E '^{PREFIX}[0-9TZ]+\\.sql\\.gz$' | sort"  # oldest first


def backup_claim(profile: Profile) -> str:
    return naming.component_name(profile.name, naming.DB_BACKUP)


def dump_script(keep: int) -> str:
    """Dump, compress, rename into place, keep the newest `keep`. The dump goes to a file before gzip, not
    through a pipe: sh has no pipefail, and a failed dump piped into gzip would end as a whole-looking file."""
    return "\n".join([
        "set -eu",
        f'MYSQL_PWD=$(cat {PASSWORD_DIR}/password); export MYSQL_PWD',
        "stamp=$(date -u +%Y%m%dT%H%M%SZ)",
        f'part="{BACKUP_DIR}/.{PREFIX}$stamp.sql"',
        f'trap \'rm -f "$part" "$part.gz"\' EXIT',
        f'mariadb-dump --no-defaults --host="$DB_HOST" --port=3306 --user=slurm --single-transaction '
        f'--databases {DATABASE} > "$part"',
        'gzip "$part"',
        f'mv "$part.gz" "{BACKUP_DIR}/{PREFIX}$stamp.sql.gz"',
        f'echo "db-backup: wrote {PREFIX}$stamp.sql.gz ($(wc -c < "{BACKUP_DIR}/{PREFIX}$stamp.sql.gz") bytes)"',
        # Newest last in name order; all but the newest `keep` go.
        f"{LIST_DUMPS} | head -n -{keep} | while read -r old; do",
        f'  rm -f "{BACKUP_DIR}/$old" && echo "db-backup: removed $old"',
        "done",
    ]) + "\n"


def restore_script() -> str:
    """Load the dump named in DUMP, else the newest (slurmdbd is to be scaled to zero first: docs/day2.md). The
    archive is tested whole before anything is loaded: sh has no pipefail, so a gunzip that fails half-way
    into the pipe would leave a partial restore that exits 0."""
    return "\n".join([
        "set -eu",
        f'MYSQL_PWD=$(cat {PASSWORD_DIR}/password); export MYSQL_PWD',
        f"dump=${{DUMP:-$({LIST_DUMPS} | tail -n 1)}}",
        f'[ -n "$dump" ] && [ -f "{BACKUP_DIR}/$dump" ] || {{ echo "db-restore: no dump {BACKUP_DIR}/${{dump:-{PREFIX}*}}" >&2; exit 1; }}',
        f'gunzip -t "{BACKUP_DIR}/$dump" || {{ echo "db-restore: $dump is not a whole gzip file" >&2; exit 1; }}',
        'echo "db-restore: loading $dump"',
        f'gunzip -c "{BACKUP_DIR}/$dump" | mariadb --no-defaults --host="$DB_HOST" --port=3306 --user=slurm',
        'echo "db-restore: loaded $dump; scale slurmdbd up again"',
    ]) + "\n"


def _job_template(profile: Profile, script: str, read_only: bool) -> Obj:
    password = naming.db_password_secret(profile.name)
    container = {
        "name": "mariadb-dump" if not read_only else "mariadb-restore",
        "image": profile.images.database,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["/bin/sh", "-c", script],
        "env": [{"name": "DB_HOST", "value": naming.component_name(profile.name, naming.DATABASE)}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "securityContext": {"runAsUser": 999, "runAsGroup": 999, "runAsNonRoot": True, "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "backup", "mountPath": BACKUP_DIR, **({"readOnly": True} if read_only else {})},
                         {"name": "db-password", "mountPath": PASSWORD_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }
    pod: Obj = {
        "serviceAccountName": naming.component_name(profile.name, naming.DB_BACKUP),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        "securityContext": {"fsGroup": 999, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "backup", "persistentVolumeClaim": {"claimName": backup_claim(profile)}},
                    {"name": "db-password", "secret": {"secretName": password, "defaultMode": 0o440,
                                                       "items": [{"key": "password", "path": "password"}]}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
    }
    job = with_pod_settings(profile, {"kind": "Job", "spec": {"template": {
        "metadata": {"labels": naming.object_labels(profile.name, naming.DB_BACKUP)}, "spec": pod}}})
    return {"metadata": {"labels": naming.object_labels(profile.name, naming.DB_BACKUP)},
            "spec": {"backoffLimit": 1, "activeDeadlineSeconds": 6 * 3600, "ttlSecondsAfterFinished": 7 * 24 * 3600,
                     "template": job["spec"]["template"]}}


def build_db_backup_objects(profile: Profile) -> list[Obj]:
    """ServiceAccount, the claim, the backup CronJob and the suspended restore CronJob (none without backup)."""
    backup = profile.accounting.backup
    if backup is None or profile.accounting.external is not None:
        return []
    claim_spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": backup.storage.size}}}
    if backup.storage.storage_class:
        claim_spec["storageClassName"] = backup.storage.storage_class
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": meta(profile, backup_claim(profile), naming.DB_BACKUP), "spec": claim_spec}
    name = naming.component_name(profile.name, naming.DB_BACKUP)
    dump = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(profile, name, naming.DB_BACKUP),
            "spec": {"schedule": backup.schedule, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
                     "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
                     "jobTemplate": _job_template(profile, dump_script(backup.keep), read_only=False)}}
    restore = {"apiVersion": "batch/v1", "kind": "CronJob",
               "metadata": meta(profile, naming.component_name(profile.name, "db-restore"), naming.DB_BACKUP),
               # Never on a schedule: `kubectl create job --from=cronjob/...` is the restore.
               "spec": {"schedule": "0 0 31 2 *", "suspend": True, "concurrencyPolicy": "Forbid",
                        "jobTemplate": _job_template(profile, restore_script(), read_only=True)}}
    return [service_account(profile, naming.DB_BACKUP), claim, dump, restore]

