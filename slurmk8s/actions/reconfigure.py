"""Day 2: say which pods a change restarts and why, and apply the rest in place with `scontrol reconfigure`.

A pod restarts when its template changes; its ``slurmk8s.io/config-hash`` covers only the
settings that need a restart of its daemon (render/restarts.py). Every other Slurm change
reaches the daemons in place: slurmctld and the login pods read the live ConfigMap through
links, and configless slurmd gets the files pushed by slurmctld on `scontrol reconfigure`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from slurmk8s import naming
from slurmk8s.errors import ClusterError, ExecRefused
from slurmk8s.render import restarts
from slurmk8s.render.k8s.identity import RELOAD_BOUND_SECONDS, RELOAD_SCRIPT
from slurmk8s.podside.rollout_core import SEEN_DIGEST, ReconfigureStopped, files_digest, reconfigure_when_seen

ANNOTATION_CONFIG_SEEN = "slurmk8s.io/config-applied"
DAEMON_OF = {naming.CONTROLLER: restarts.CONTROLLER, naming.WORKER: restarts.SLURMD}
TEMPLATE_KINDS = ("StatefulSet", "DaemonSet", "Deployment")


@dataclass(frozen=True)
class Restart:
    """One workload whose pods a change replaces."""

    ref: str
    pods: tuple[str, ...]
    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return f"restarts: {', '.join(self.pods)} ({'; '.join(self.reasons)})"


@dataclass(frozen=True)
class DayTwo:
    """What a change does to running pods: restarts, and Slurm changes applied in place."""

    restarts: tuple[Restart, ...]
    in_place: tuple[str, ...]
    slurm_files_changed: bool
    identity: tuple[str, ...] = ()  # declared users, groups and keys: the pods reload them (render/k8s/identity.py)

    def lines(self) -> list[str]:
        out = [str(r) for r in self.restarts]
        if self.in_place:
            out.append(f"in place (scontrol reconfigure, no pod restarts): {', '.join(self.in_place)}")
        if self.identity:
            out.append(f"in place (login and slurmd pods reload them within {RELOAD_BOUND_SECONDS} s, no restart): "
                       f"{', '.join(self.identity)}")
        return out


def _differences(before: Any, after: Any, path: str = "", limit: int = 3) -> list[str]:
    """Dotted paths where after differs from before (at most limit); list items by their name when they have one."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for key in sorted(set(before) | set(after)):
            found += _differences(before.get(key), after.get(key), f"{path}.{key}" if path else key, limit)
            if len(found) >= limit:
                break
        return found[:limit]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found = []
        for i, (b, a) in enumerate(zip(before, after)):
            label = b.get("name", i) if isinstance(b, dict) else i
            found += _differences(b, a, f"{path}[{label}]", limit)
            if len(found) >= limit:
                break
        return found[:limit]
    return [path or "(whole)"]


def _pods_of(change) -> tuple[str, ...]:
    """The pods a workload change replaces: a StatefulSet's by ordinal, others as a set."""
    kind, name = change.ref.split("/", 1)
    if kind == "StatefulSet":
        replicas = (change.before.get("spec") or {}).get("replicas", 1)
        return tuple(naming.pod_name(name, i) for i in range(replicas)) or (f"{change.ref} (no pods now)",)
    return (f"every pod of {change.ref}",)


def _template_reasons(change, old_files: dict[str, str], new_files: dict[str, str], version: str) -> list[str]:
    """Why one workload's pod template changed, in words."""
    before, after = change.before["spec"]["template"], change.after["spec"]["template"]
    old_hash = ((before.get("metadata") or {}).get("annotations") or {}).get(naming.ANNOTATION_CONFIG_HASH)
    new_hash = ((after.get("metadata") or {}).get("annotations") or {}).get(naming.ANNOTATION_CONFIG_HASH)
    reasons = []
    if old_hash != new_hash:
        component = ((after.get("metadata") or {}).get("labels") or {}).get(naming.LABEL_COMPONENT, "")
        daemon = DAEMON_OF.get(component, restarts.CLIENT)
        reasons += restarts.restart_reasons(old_files.get("slurm.conf", ""), new_files.get("slurm.conf", ""),
                                            daemon, version)
        if daemon == restarts.SLURMD:
            reasons += [f"{name} changed" for name in ("cgroup.conf", "gres.conf")
                        if old_files.get(name) != new_files.get(name)]
        if not reasons:
            reasons.append("configuration this pod reads only at start changed" if daemon == restarts.SLURMD or
                           component == naming.LOGIN else
                           "configuration or declared users (names, ids, groups) this pod reads only at start changed")
    strip = lambda t: {**t, "metadata": {**(t.get("metadata") or {}), "annotations": {
        k: v for k, v in ((t.get("metadata") or {}).get("annotations") or {}).items() if k != naming.ANNOTATION_CONFIG_HASH}}}
    for path in _differences(strip(before), strip(after)):
        reasons.append(f"{path.removeprefix('spec.')} changed")
    return reasons


def identity_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two identity ConfigMaps' data, in words ("user bob added", "ssh keys of ada changed")."""
    def entries(data: dict[str, str], key: str) -> dict[str, str]:
        return {line.split(":", 1)[0]: line for line in data.get(key, "").splitlines() if line.strip()}

    def compare(what: str, old: dict[str, str], new: dict[str, str]) -> list[str]:
        return [f"{what} {name} {'added' if name not in old else 'removed' if name not in new else 'changed'}"
                for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    keys = lambda data: {k.removeprefix("ssh-"): v for k, v in data.items() if k.startswith("ssh-")}
    out = compare("user", entries(before, "passwd"), entries(after, "passwd"))
    out += compare("group", entries(before, "group"), entries(after, "group"))
    out += compare("ssh keys of", keys(before), keys(after))
    if before.get(RELOAD_SCRIPT) != after.get(RELOAD_SCRIPT):
        out.append("the merge program")
    return out


def explain(changes, config_map: str, version: str, rendered_files: dict[str, str],
            identity_map: str | None = None) -> DayTwo:
    """Restarts and in-place changes (Slurm's, and the declared users') of a dry-run plan's changes (live before,
    applied after)."""
    cm = next((c for c in changes if c.ref == f"ConfigMap/{config_map}"), None)
    old_files = dict(((cm.before or {}).get("data") or {})) if cm and cm.before else dict(rendered_files)
    new_files = dict(((cm.after or {}).get("data") or {})) if cm and cm.after else dict(rendered_files)
    found = []
    for c in changes:
        if c.ref.split("/", 1)[0] not in TEMPLATE_KINDS or c.before is None or c.after is None:
            continue
        if c.before["spec"].get("template") == c.after["spec"].get("template"):
            continue
        found.append(Restart(c.ref, _pods_of(c), tuple(_template_reasons(c, old_files, new_files, version))))
    in_place: list[str] = []
    if cm is not None and cm.before is not None and old_files != new_files:
        restart_keys = {k.lower() for k in restarts.RESTART_KEYS}
        in_place = [e for e in restarts.in_place_changes(old_files.get("slurm.conf", ""), new_files.get("slurm.conf", ""))
                    if e.lower() not in restart_keys]
        in_place += [name for name in sorted(set(old_files) | set(new_files))
                     if name not in ("slurm.conf", "cgroup.conf", "gres.conf") and old_files.get(name) != new_files.get(name)]
    users = next((c for c in changes if identity_map and c.ref == f"ConfigMap/{identity_map}"), None)
    identity: list[str] = []
    if users is not None and users.before is not None and users.after is not None:
        identity = identity_changes(users.before.get("data") or {}, users.after.get("data") or {})
    return DayTwo(tuple(found), tuple(in_place), cm is not None and cm.before is not None and old_files != new_files,
                  tuple(identity))


def reconfigure_in_place(files: dict[str, str], controller_pods: list[str], nudge: Callable[[str, str], None],
                         run_exec: Callable[[list[str]], str], timeout: float = 180,
                         say: Callable[[str], None] = print, poll: float = 2.0) -> float:
    """Nudge the controller pods until slurmctld sees files, then `scontrol reconfigure`; returns the seconds it took.

    The kubelet refreshes a ConfigMap volume on its periodic sync (a minute or more); an
    annotation on the pod makes it sync now. The GitOps hook Job runs the same loop
    (podside/rollout_core.py). Raises ClusterError when the files never show.
    """
    def seen() -> str:
        try:
            return run_exec(SEEN_DIGEST)
        except ExecRefused:
            raise  # RBAC or a missing pod: asking again will not help
        except ClusterError:
            return ""
    try:
        took = reconfigure_when_seen(files_digest(files), controller_pods, nudge, seen, run_exec, time.monotonic,
                                     time.sleep, timeout, poll)
    except ReconfigureStopped as e:
        raise ClusterError(f"{e}; run `up` again") from e
    say(f"reconfigured in place: slurmctld read the new config {took:.0f} s after apply; no pod restarted for it")
    return took
