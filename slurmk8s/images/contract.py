"""What the rendered bundle assumes of each image, as data, and the shell that checks it.

Derived from the renderer (slurmk8s/render/k8s/*.py: each container's command, probes and hooks,
its user, its mounts; the programs slurm.conf names) and from Slinky's conventions
(docs/research/slinky-facts.md). tests/images/test_contract_data.py renders every profile and
fails when a container runs a program its image's contract does not list.

What the bundle does NOT assume: an ENTRYPOINT or CMD (every rendered container names its
command), files under /etc/slurm, /etc/munge, /run/* or the spool directories (each is a volume
the pod mounts), host keys (a Secret). Pure: no engine here (slurmk8s.images.check runs it).
"""

from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass
from pathlib import Path

from slurmk8s import naming, versions

ROLES = ("slurmctld", "slurmd", "slurmdbd", "login", "slurmrestd", "mariadb")
SLURM_ROLES = ROLES[:-1]
AUTHS = ("slurm", "munge")
SLURM_USER = ("slurm", naming.SLURM_UID, naming.SLURM_UID)
MYSQL_USER = ("mysql", 999, 999)  # slurmk8s/render/k8s/accounting.py: runAsUser 999, chown mysql:mysql
SLURMRESTD_UID = 65534  # slurmk8s/render/k8s/restapi.py: slurmrestd runs as nobody
# The program whose -V prints the image's Slurm version (slurmdbd -V reads slurmdbd.conf first on
# 22.05; sacctmgr is in that image for the probes). The clients want a slurm.conf even for -V.
VERSION_PROGRAM = {"slurmctld": "slurmctld", "slurmd": "slurmd", "slurmdbd": "sacctmgr", "login": "sinfo",
                   "slurmrestd": "slurmrestd"}
# Environment variable the check passes in: the image's configured USER (podman image inspect).
IMAGE_USER_ENV = "SLURMK8S_IMAGE_USER"

# The Python sources the bundle ships (ConfigMaps, python3 -c) and runs with the controller image's
# python3: power, busy, rollout, upgrade-check, the account applier, and the modules they share.
_PACKAGE = Path(__file__).resolve().parents[1]
_SHIPPED_PYTHON = (*sorted(p for p in (_PACKAGE / "podside").glob("*.py") if p.name != "__init__.py"),
                   _PACKAGE / "versions.py")
# the names they import each other by in the pods
_SHIPPED_MODULES = {"slurm_versions", *(path.stem for path in _SHIPPED_PYTHON)}


@dataclass(frozen=True)
class Assertion:
    """One thing an image must hold: what, which part of the bundle relies on it, the sh test."""

    what: str
    why: str
    test: str  # POSIX sh, run as root in a container of the image; exit 0 when the image keeps it


def python_modules() -> tuple[str, ...]:
    """Top-level modules the shipped Python programs import (read from their source, not listed by hand)."""
    found: set[str] = set()
    for path in _SHIPPED_PYTHON:
        found.update(imported_modules(path.read_text()))
    return tuple(sorted(found))


def imported_modules(source: str) -> set[str]:
    """Modules a Python source imports, less __future__ and the shipped modules themselves."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] not in _SHIPPED_MODULES | {"__future__"}}


def version_command(role: str) -> str:
    """sh that prints ``slurm[-wlm] X.Y.Z`` from the role's version program (builtins and mkdir only,
    so a missing tool fails its own check, not this one)."""
    return ("d=/tmp/slurmk8s-check.$$ && mkdir -p \"$d\" && printf 'ClusterName=check\\nSlurmctldHost=localhost\\n' "
            f">\"$d/slurm.conf\" && SLURM_CONF=\"$d/slurm.conf\" {VERSION_PROGRAM[role]} -V 2>&1")


def _program(name: str, why: str) -> Assertion:
    return Assertion(f"{name} on PATH", why, f"command -v {shlex.quote(name)} >/dev/null")


def _executable(path: str, why: str) -> Assertion:
    return Assertion(f"{path} executable", why, f"[ -f {path} ] && [ -x {path} ]")


def _user(user: tuple[str, int, int], why: str) -> Assertion:
    name, uid, gid = user
    return Assertion(f"user {name} is uid {uid}, gid {gid}", why,
                     f'[ "$(id -u {name} 2>/dev/null):$(id -g {name} 2>/dev/null)" = "{uid}:{gid}" ]')


# Tools of the rendered init containers and hooks (init-config: chmod, ln or cp, install -o slurm,
# awk over resolv.conf; slurmd's postStart: sed, head, date, sleep).
_INIT_TOOLS = ("chmod", "install", "cat", "awk", "mkdir")
# The identity merge (podside/identity_reload.sh: init-config's pass, the identity-reload sidecar)
# and the live pods' links to its files.
_IDENTITY_TOOLS = ("sh", "cmp", "mv", "rm", "stat", "wc", "ln", "sleep")
_PROGRAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "slurmctld": (("slurmctld", "the controller's command (slurmctld -D)"),
                  ("scontrol", "the power-saving and busy programs (scontrol show hostnames, update)"),
                  ("squeue", "the busy prolog (squeue --nodelist)"),
                  ("sacctmgr", "the account tree (up, accounts apply, the GitOps Job)"),
                  ("python3", "ResumeProgram/SuspendProgram, the busy prolog, rollout and upgrade-check Jobs"),
                  ("cp", "init-config copies the Slurm files"), ("ln", "init-config links the Slurm files"),
                  ("chown", "init-config"), ("grep", "init-config")),
    "slurmd": (("slurmd", "the worker's command (slurmd -D -b --conf-server ...)"),
               ("slurmstepd", "slurmd starts every job step with it"),
               ("srun", "job scripts"), ("scontrol", "slurmd's postStart hook"), ("sinfo", "slurmd's postStart hook"),
               ("squeue", "slurmd's postStart hook"), ("sed", "postStart and the side-by-side CPU check"),
               ("head", "postStart"), ("date", "postStart"), ("sleep", "postStart"),
               ("df", "HealthCheckProgram's disk check"), ("grep", "HealthCheckProgram"),
               ("ls", "HealthCheckProgram's GPU device check")),
    "slurmdbd": (("slurmdbd", "the accounting command (slurmdbd -D)"), ("sacctmgr", "the accounting probes (sacctmgr ping)"),
                 ("cp", "init-config copies the Slurm files"), ("chown", "init-config")),
    "login": (("sinfo", "users' Slurm clients"), ("sbatch", "users' Slurm clients"), ("srun", "users' Slurm clients"),
              ("ln", "init-config links the Slurm files"),
              ("test", "the sackd or munged sidecar's startupProbe (test -S, exec'd without a shell)")),
    "slurmrestd": (("slurmrestd", "the REST API's command (slurmrestd -a rest_auth/jwt 0.0.0.0:6820)"),
                   ("cp", "init-config copies the Slurm files")),
    "mariadb": (("mariadbd", "the database's command"), ("mariadb-install-db", "init-db makes the data directory once"),
                ("mariadb-admin", "the database probes (mariadb-admin ping)"), ("cat", "init-db writes init.sql"),
                ("chown", "init-db (chown mysql:mysql)"),
                ("mariadb-dump", "the db-backup CronJob dumps the accounting database"),
                ("gzip", "the db-backup CronJob compresses each dump"),
                ("mariadb", "the db-restore Job loads a dump"), ("gunzip", "the db-restore Job reads a dump"),
                *((p, "the db-backup and db-restore Jobs name, list, rotate and pick dumps")
                  for p in ("date", "grep", "head", "ls", "mv", "rm", "sort", "tail"))),
}


def assertions(role: str, series: str, auth: str) -> tuple[Assertion, ...]:
    """Everything a ``role`` image must hold for a bundle of Slurm ``series`` with ``auth``."""
    if role not in ROLES:
        raise ValueError(role)
    found = [_executable("/bin/sh", "every init container and hook runs /bin/sh -c")]
    if role == "mariadb":
        found.append(_user(MYSQL_USER, "the MariaDB pod runs as 999 and chowns init.sql to mysql:mysql"))
        found += [_program(p, why) for p, why in _PROGRAMS[role]]
        return tuple(found)
    dialect = versions.dialect(series)
    program = VERSION_PROGRAM[role]
    found.append(Assertion(f"{program} -V prints Slurm {series}.x", "the bundle's config is written for that series",
                           f'case "$({version_command(role)})" in "slurm {series}."*|"slurm-wlm {series}."*) ;; *) exit 1 ;; esac'))
    found.append(_user(SLURM_USER, "SlurmUser=slurm; runAsUser 401; init-config's install -o slurm -g slurm"))
    found += [_program(p, "init-config (chmod, install, awk over resolv.conf)") for p in _INIT_TOOLS]
    found += [_program(p, "the declared users' merge (identity_reload.sh) and its links") for p in _IDENTITY_TOOLS]
    found += [_program(p, why) for p, why in _PROGRAMS[role]]
    if role == "slurmctld":
        modules = ", ".join(python_modules())
        found.append(Assertion(f"python3 imports {modules}", "the shipped Python programs (power, busy, rollout, "
                               "upgrade-check, accounts); standard library only", f"python3 -c 'import {modules}'"))
    if role == "slurmd":
        found.append(Assertion("the image runs as root", "the worker pod sets no runAsUser: slurmd runs as the "
                               "image's USER and must be root (SlurmdUser=root, job cgroups, setuid steps)",
                               f'case "${{{IMAGE_USER_ENV}:-}}" in ""|0|root|0:*|root:*) ;; *) exit 1 ;; esac'))
        found.append(Assertion("/run writable by root", "SlurmdPidFile=/run/slurmd.pid is on the image's file system",
                               "[ -d /run ] && [ -w /run ]"))
    if role == "login":
        found.append(_executable("/usr/sbin/sshd", "the login's sshd container (exec /usr/sbin/sshd -D -e)"))
        found.append(Assertion("user sshd exists", "sshd's privilege separation", "id sshd >/dev/null 2>&1"))
        found.append(Assertion("/run writable by root", "the sshd container makes /run/sshd", "[ -d /run ] && [ -w /run ]"))
        if dialect.has_auth_slurm:
            found.append(_program("sackd", "the login's sackd sidecar (sackd -D) serves auth/slurm to the clients"))
    if role == "slurmrestd":
        found.append(Assertion(f"uid {SLURMRESTD_UID} can run slurmrestd", f"slurmrestd runs as nobody ({SLURMRESTD_UID})",
                               f"setpriv --reuid {SLURMRESTD_UID} --regid {SLURMRESTD_UID} --clear-groups slurmrestd -V"))
    plugins = {f"auth_{auth}.so": f"AuthType=auth/{auth}",
               **({"cred_munge.so": "CredType=cred/munge"} if auth == "munge" else {}),
               "auth_jwt.so": "with the REST API on, every slurm.conf reader loads AuthAltTypes=auth/jwt",
               **_PLUGINS.get(role, {})}
    found += [_plugin(name, why) for name, why in plugins.items()]
    if auth == "munge":
        found.append(_program("munged", "munge profiles run munged as a sidecar from this image"))
        if role != "login":  # login lists test for both sidecars
            found.append(_program("test", "the munged sidecar's startupProbe (test -S, exec'd without a shell)"))
    return tuple(found)


# Plugins the rendered configs name, per reader (slurm.conf, cgroup.conf, slurmdbd.conf templates).
_SLURM_CONF = "the rendered slurm.conf"
_SLURM_CONF_PLUGINS = {p: _SLURM_CONF for p in (
    "select_cons_tres.so", "sched_backfill.so", "priority_multifactor.so", "accounting_storage_slurmdbd.so",
    "proctrack_cgroup.so", "jobacct_gather_cgroup.so", "task_cgroup.so", "task_affinity.so")}
_PLUGINS: dict[str, dict[str, str]] = {
    "slurmctld": _SLURM_CONF_PLUGINS,
    # cgroup.conf's CgroupPlugin=autodetect loads v1 or v2, as the node's cgroup file system is
    "slurmd": {**_SLURM_CONF_PLUGINS, **{p: "CgroupPlugin=autodetect (v1 or v2, as the node is)"
                                          for p in ("cgroup_v1.so", "cgroup_v2.so")}},
    "slurmdbd": {"accounting_storage_mysql.so": "the rendered slurmdbd.conf (StorageType=accounting_storage/mysql)"},
    "slurmrestd": {"rest_auth_jwt.so": "slurmrestd -a rest_auth/jwt"},
}



def _plugin(name: str, why: str) -> Assertion:
    # Debian: /usr/lib/<triplet>/slurm-wlm; Slinky's Ubuntu builds: /usr/lib/<triplet>/slurm; RPMs: /usr/lib64/slurm
    return Assertion(f"Slurm plugin {name}", why,
                     f"for d in /usr/lib/slurm /usr/lib64/slurm /usr/lib/*/slurm-wlm /usr/lib/*/slurm; do "
                     f'[ -f "$d/{name}" ] && exit 0; done; exit 1')


_MARK = "@@slurmk8s-check"


def check_script(checks: tuple[Assertion, ...]) -> str:
    """One sh script that runs every test in a subshell and prints one verdict line per check."""
    lines = []
    for i, check in enumerate(checks):
        lines.append(f"if ( {check.test} ) </dev/null >/dev/null 2>&1; then echo '{_MARK} {i} ok'; "
                     f"else echo '{_MARK} {i} failed'; fi")
    return "\n".join(lines) + "\n"


def failed_checks(output: str, checks: tuple[Assertion, ...]) -> list[Assertion]:
    """The checks the script's output did not report as kept (a check with no verdict failed)."""
    kept = {int(parts[1]) for parts in (line.split() for line in output.splitlines())
            if len(parts) == 3 and parts[0] == _MARK and parts[2] == "ok"}
    return [check for i, check in enumerate(checks) if i not in kept]
