"""Startup, readiness and liveness probes that ask each daemon itself.

A stopped or wedged daemon still accepts TCP connections (the kernel completes the handshake
from the listen backlog), so a tcpSocket probe passed for it (seen in the lab with SIGSTOP).
Each probe here needs an answer from the daemon: Slurm's own HTTP endpoints where the release
serves them (/livez, /readyz on the daemon's port: slurmctld, slurmd and slurmrestd of 26.05,
read in their binaries and answered in the lab), else a Slurm client's RPC to it.
"""

from __future__ import annotations

from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj
from slurmk8s.versions import dialect

# A wedged daemon fails within this (Slurm's default MessageTimeout is 10 s: a client gives up on
# an RPC after it, and the kubelet kills an exec probe that outlives timeoutSeconds).
TIMEOUT_S = 10
# First boot: MariaDB's install and crash recovery, slurmctld's state recovery with many jobs.
STARTUP_WINDOW_S = 600
# slurmdbd converts its database on a major upgrade before it answers; killing it midway restarts
# the conversion, so it gets an hour.
SLURMDBD_STARTUP_WINDOW_S = 3600
PERIOD_S = 5
# Liveness restarts the daemon only after 3 minutes without an answer: a busy slurmctld (a long
# backfill cycle, a reconfigure, a burst of RPCs) answers late but must not be killed, which would
# drop every RPC in flight and make it recover its state again.
LIVENESS_PERIOD_S = 30
LIVENESS_FAILURES = 6


def http_get(port: int, path: str) -> Obj:
    return {"httpGet": {"path": path, "port": port}}


def exec_command(*argv: str) -> Obj:
    return {"exec": {"command": list(argv)}}


def probes(startup: Obj, ready: Obj, live: Obj, startup_window_s: int = STARTUP_WINDOW_S) -> Obj:
    """startupProbe, readinessProbe and livenessProbe from three checks."""
    return {
        "startupProbe": {**startup, "periodSeconds": PERIOD_S, "timeoutSeconds": TIMEOUT_S,
                         "failureThreshold": startup_window_s // PERIOD_S},
        "readinessProbe": {**ready, "periodSeconds": PERIOD_S, "timeoutSeconds": TIMEOUT_S, "failureThreshold": 3},
        "livenessProbe": {**live, "periodSeconds": LIVENESS_PERIOD_S, "timeoutSeconds": TIMEOUT_S,
                          "failureThreshold": LIVENESS_FAILURES},
    }


def has_http_health(profile: Profile) -> bool:
    """/livez and /readyz on the daemons' own ports: found in 26.05's slurmctld and slurmd, absent
    from 24.11's; 25.11 is not checked here, so it keeps the client checks."""
    return dialect(profile.version).at_least("26.05")


def slurmctld_probes(profile: Profile, port: int) -> Obj:
    """slurmctld: /livez, and /readyz ("servicing RPCs") where there is no backup.

    A standby backup answers /readyz with 500 (lab, 26.05) though it is healthy and takes over
    when the primary stops: with a backup, both are ready while alive. Before 26.05, `scontrol
    ping` pings every controller and exits 0 when any answers, so the check reads this pod's own
    line (SlurmctldHost is the pod's hostname).
    """
    if has_http_health(profile):
        live = http_get(port, "/livez")
        return probes(live, live if profile.controller_replicas > 1 else http_get(port, "/readyz"), live)
    own = exec_command("/bin/sh", "-c", 'scontrol ping | grep -qx "Slurmctld(.*) at $(uname -n) is UP"')
    return probes(own, own, own)


def slurmd_probes(profile: Profile, port: int) -> Obj:
    """slurmd: /livez and /readyz, else `scontrol show slurmd` (an RPC to this node's slurmd only:
    it answers while slurmctld is down, lab)."""
    if has_http_health(profile):
        return probes(http_get(port, "/livez"), http_get(port, "/readyz"), http_get(port, "/livez"))
    own = exec_command("scontrol", "show", "slurmd")
    return probes(own, own, own)


def slurmdbd_probes(profile: Profile, port: int) -> Obj:
    """slurmdbd has no HTTP endpoint: `sacctmgr ping` (documented in sacctmgr(1); in the images'
    sacctmgr from 24.11, not 22.05's, which keeps the TCP check)."""
    if dialect(profile.version).at_least("24.11"):
        check = exec_command("sacctmgr", "ping")
    else:
        check = {"tcpSocket": {"port": port}}
    return probes(check, check, check, SLURMDBD_STARTUP_WINDOW_S)


def slurmrestd_probes(port: int) -> Obj:
    """slurmrestd: the TCP port. Its /livez and /readyz (26.05) answer only authenticated requests
    under rest_auth/jwt (lab: "authentication failed" for the kubelet's GET), and it keeps no state
    of its own that a wedge would hide: slurmctld behind it has its own probes."""
    check = {"tcpSocket": {"port": port}}
    return probes(check, check, check)


def mariadb_probes(port: int) -> Obj:
    """MariaDB: `mariadb-admin ping` exits 0 while the server answers, even when it refuses the
    login (https://mariadb.com/kb/en/mariadb-admin/), so it needs no password."""
    ping = exec_command("mariadb-admin", "--no-defaults", "--protocol=tcp", "--host=127.0.0.1", f"--port={port}",
                        f"--connect-timeout={TIMEOUT_S - 2}", "ping")
    return probes(ping, ping, ping)
