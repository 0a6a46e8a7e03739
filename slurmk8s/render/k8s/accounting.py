"""slurmdbd (StatefulSet + Service) and the embedded MariaDB (StatefulSet + PVC + Service)."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import (
    Obj, avoid_shared_nodes, headless_service, init_config_container, jwt_key_volume, mounts_config, pod_spec, pvc_template,
    small_resources, statefulset, volume_config,
)
from slurmk8s.render.k8s.probes import mariadb_probes, slurmdbd_probes

RUN_DIR = "/run/slurmdbd"  # Slurm 25.11+ keeps runtime files here; the pid file lives here on every release
MARIADB_DATA = "/var/lib/mysql"
MARIADB_RUN = "/run/mysqld"  # socket and the init SQL (mariadbd's default socket directory)


def _password_ref(profile: Profile) -> tuple[str, str]:
    ext = profile.accounting.external
    return (ext.password.name, ext.password.key) if ext else (naming.db_password_secret(profile.name), "password")


def build_service_accounting(profile: Profile) -> Obj:
    """Headless Service for slurmdbd (AccountingStorageHost)."""
    name = naming.component_name(profile.name, naming.ACCOUNTING)
    return headless_service(profile, name, naming.ACCOUNTING, [("slurmdbd", 6819)],
                            naming.selector_labels(profile.name, naming.ACCOUNTING))


def build_configmap_slurmdbd(profile: Profile, slurmdbd_conf: str) -> Obj:
    """slurmdbd.conf without the password (only the slurmdbd pod mounts it)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": naming.slurmdbd_config_map(profile.name), "namespace": profile.namespace,
                         "labels": naming.object_labels(profile.name, naming.ACCOUNTING)},
            "data": {"slurmdbd.conf": slurmdbd_conf}}


def build_statefulset_accounting(profile: Profile, config_hash: str) -> Obj:
    """slurmdbd in the foreground; slurmdbd.conf completed with StoragePass, mode 0600, owned by slurm."""
    name = naming.component_name(profile.name, naming.ACCOUNTING)
    image = profile.images.accounting
    secret, key = _password_ref(profile)
    jwt_volumes, jwt_mounts, jwt_script = jwt_key_volume(profile)
    volumes = volume_config(profile) + jwt_volumes + [
        {"name": "slurmdbd-config", "configMap": {"name": naming.slurmdbd_config_map(profile.name), "defaultMode": 0o444}}]
    # slurmdbd validates the tokens slurmrestd passes on (AuthAltTypes=auth/jwt names this key;
    # without it slurmdbd exits at start, found on kind) and owns its run directory.
    script = jwt_script + [f"chown slurm:slurm {RUN_DIR}",
        # slurmdbd exits unless its config is 0600 and owned by SlurmUser.
        "umask 077",
        '{ cat /mnt/slurmdbd-config/slurmdbd.conf; printf "StoragePass=%s\\n" "$STORAGE_PASS"; } > /etc/slurm/slurmdbd.conf',
        "chown slurm:slurm /etc/slurm/slurmdbd.conf",
    ]
    env = [{"name": "STORAGE_PASS", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}]
    slurmdbd = {
        "name": "slurmdbd",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["slurmdbd", "-D"],
        "ports": [{"name": "slurmdbd", "containerPort": 6819, "protocol": "TCP"}],
        **slurmdbd_probes(profile, 6819),
        "resources": profile.daemon_resources.accounting.as_kubernetes(),
        # As SlurmUser from the start: slurmdbd.conf is 0600 slurm, which a root without
        # DAC_OVERRIDE cannot read (found on kind: "unable to read slurmdbd.conf").
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts_config(profile, init=False) + [{"name": "run", "mountPath": RUN_DIR}],
    }
    volumes.append({"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}})
    config_mounts: list[Obj] = [{"name": "slurmdbd-config", "mountPath": "/mnt/slurmdbd-config", "readOnly": True},
                                {"name": "run", "mountPath": RUN_DIR}]
    pod = pod_spec(profile, naming.ACCOUNTING, [slurmdbd],
                   [init_config_container(profile, image, script, config_mounts + jwt_mounts, env)],
                   volumes)
    return statefulset(profile, name, naming.ACCOUNTING, 1, name, pod, {naming.ANNOTATION_CONFIG_HASH: config_hash})


def build_service_database(profile: Profile) -> Obj:
    """Headless Service for MariaDB (StorageHost)."""
    name = naming.component_name(profile.name, naming.DATABASE)
    return headless_service(profile, name, naming.DATABASE, [("mysql", 3306)],
                            naming.selector_labels(profile.name, naming.DATABASE))


def mariadb_init_script() -> str:
    """Initialise the data directory once, and (re)state the slurm user and grant on every start."""
    return "\n".join([
        "set -eu",
        # Already uid 999: --user=mysql would chown the volume, which only root may (found on kind).
        f"[ -d {MARIADB_DATA}/mysql ] || mariadb-install-db --no-defaults --datadir={MARIADB_DATA} --skip-test-db >/dev/null",
        # The password comes from the Secret; up generates it from [A-Za-z0-9] only.
        "umask 077",
        f"cat > {MARIADB_RUN}/init.sql <<SQL",
        "CREATE DATABASE IF NOT EXISTS slurm_acct_db;",
        "CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY '$MARIADB_PASSWORD';",
        "ALTER USER 'slurm'@'%' IDENTIFIED BY '$MARIADB_PASSWORD';",
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';",
        "SQL",
        f"chown mysql:mysql {MARIADB_RUN}/init.sql",
    ]) + "\n"


def build_statefulset_database(profile: Profile) -> Obj:
    """The embedded MariaDB; InnoDB settings from https://slurm.schedmd.com/accounting.html."""
    name = naming.component_name(profile.name, naming.DATABASE)
    image = profile.images.database
    secret, key = _password_ref(profile)
    mounts = [{"name": "data", "mountPath": MARIADB_DATA}, {"name": "run", "mountPath": MARIADB_RUN}]
    init = {
        "name": "init-db",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["/bin/sh", "-c", mariadb_init_script()],
        "env": [{"name": "MARIADB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}],
        "volumeMounts": [dict(m) for m in mounts],  # no shared nodes: YAML would alias them
        "resources": small_resources(),
        "securityContext": {"runAsUser": 999, "runAsGroup": 999, "allowPrivilegeEscalation": False},
    }
    mariadb = {
        "name": "mariadb",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["mariadbd", "--no-defaults", f"--datadir={MARIADB_DATA}",
                    "--bind-address=0.0.0.0", "--port=3306", "--skip-name-resolve",
                    f"--init-file={MARIADB_RUN}/init.sql", "--innodb-buffer-pool-size=256M",
                    "--innodb-lock-wait-timeout=900", "--max-allowed-packet=16M"],
        "ports": [{"name": "mysql", "containerPort": 3306, "protocol": "TCP"}],
        **mariadb_probes(3306),
        "resources": profile.daemon_resources.database.as_kubernetes(),
        "securityContext": {"runAsUser": 999, "runAsGroup": 999, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    pod: Obj = {
        "serviceAccountName": name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"fsGroup": 999, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [init],
        "containers": [mariadb],
        "volumes": [{"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}],
    }
    avoid_shared_nodes(profile, pod)
    storage = profile.accounting.embedded
    assert storage is not None  # rendered only for the embedded database, which the loader gives a Storage
    return statefulset(profile, name, naming.DATABASE, 1, name, pod, {},
                       claims=[pvc_template("data", storage.size, storage.storage_class)])
