"""The API server's own rules over a whole bundle, checked before anything is written or applied.

`render` runs this on every bundle, and `validate` renders, so both refuse the same profiles with the
same located lines. Without it a profile that validates could get a 422 in the middle of `up`.
The rules, as Kubernetes applies them (pkg/apis/core/validation):
- one (kind, name) per object: a second one would silently replace the first on apply;
- in a pod: unique volume names; unique container names across init and regular containers; every
  volumeMount names a volume of the pod; per container unique mountPaths (compared cleaned), port
  names and env names (a duplicate env name is only a warning there, but it hides the first value);
- two containers of one pod never listen on one port (one network namespace);
- in a Service: unique port names, one (port, protocol) once.
A problem a profile field causes names that field (spec.volumes[i].mountPath, spec.pools[i].name, ...);
one only the generator could cause has no field and names the object instead.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from slurmk8s import naming
from slurmk8s.errors import FieldError, ProfileError
from slurmk8s.profile.located import field_error, named_path
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.volumes import claim_name, pod_volume_name

Obj = dict[str, Any]


def refuse_api_violations(profile: Profile, objects: list[Obj]) -> None:
    """Raise a ProfileError listing every rule of the module docstring that objects break."""
    errors = api_rule_errors(profile, objects)
    if errors:
        raise ProfileError(profile.source, errors)


def api_rule_errors(profile: Profile, objects: list[Obj]) -> list[FieldError]:
    """Every broken rule; a profile field once (a volume on login and every pool breaks a rule in each pod)."""
    found: dict[str, FieldError] = {}
    for error in _name_collisions(profile, objects) + _pod_errors(profile, objects) + _service_errors(objects) \
            + _claim_errors(profile, objects):
        found.setdefault(error.path or error.message, error)
    return list(found.values())


def _owner(profile: Profile, obj: Obj) -> tuple[str, tuple] | None:
    """(description, profile path) of the field whose name makes obj's name, when one does."""
    meta = obj["metadata"]
    labels = {**(((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels", {}),
              **(meta.get("labels") or {})}
    if naming.LABEL_SHAPE in labels:
        shape = labels[naming.LABEL_SHAPE]
        return f"shape {shape!r}", named_path(profile.locator, ("spec", "sideBySide", "shapes"), shape, "name")
    if naming.LABEL_POOL in labels:
        pool = labels[naming.LABEL_POOL]
        return f"pool {pool!r}", named_path(profile.locator, ("spec", "pools"), pool, "name")
    if obj["kind"] == "PersistentVolumeClaim" and naming.LABEL_COMPONENT not in labels:  # not a daemon's own claim
        for v in profile.volumes:
            if v.claim_size is not None and claim_name(profile, v) == meta["name"]:
                return f"volume {v.name!r}", named_path(profile.locator, ("spec", "volumes"), v.name, "name")
    return None


def _describe(profile: Profile, obj: Obj) -> str:
    owner = _owner(profile, obj)
    if owner:
        return owner[0]
    component = (obj["metadata"].get("labels") or {}).get(naming.LABEL_COMPONENT)
    return f"the {component}" if component else "the generator"


def _name_collisions(profile: Profile, objects: list[Obj]) -> list[FieldError]:
    first: dict[tuple[str, str], Obj] = {}
    out = []
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        if key not in first:
            first[key] = obj
            continue
        earlier = first[key]
        # Point at the field that made the name: the later object's, or else the earlier one's.
        blamed, other = (obj, earlier) if _owner(profile, obj) or not _owner(profile, earlier) else (earlier, obj)
        owner = _owner(profile, blamed)
        if owner is None:
            out.append(FieldError(0, 0, "", f"two objects would be named {key[0]}/{key[1]}; rename the pool, "
                                            "domain or shape whose name makes it"))
            continue
        what, path = owner
        theirs = _describe(profile, other)
        clash = f"{what} would make {key[0]}/{key[1]} twice" if theirs == what else \
            f"{what} would make {key[0]}/{key[1]}, which {theirs} makes too"
        out.append(field_error(profile.locator, path, f"{clash}; rename one of them"))
    return out


def _pod_errors(profile: Profile, objects: list[Obj]) -> list[FieldError]:
    user_volumes = {pod_volume_name(v): v for v in profile.volumes}
    out: list[FieldError] = []
    for obj in objects:
        pod = _pod_spec(obj)
        if pod is None:
            continue
        where = f"{obj['kind']}/{obj['metadata']['name']}"

        def problem(message: str, volume: str | None = None, field: str = "mountPath") -> None:
            if volume in user_volumes:
                path = named_path(profile.locator, ("spec", "volumes"), user_volumes[volume].name, field)
                out.append(field_error(profile.locator, path, message))
            else:
                out.append(FieldError(0, 0, "", f"{where}: {message}"))

        volumes: set[str] = set()
        # A StatefulSet's claim templates are volumes of its pods too, named by the template.
        templates = [t["metadata"]["name"] for t in (obj.get("spec") or {}).get("volumeClaimTemplates") or []]
        for name in [v["name"] for v in pod.get("volumes") or []] + templates:
            if name in volumes:
                problem(f"pod volume name {name!r} is used twice", name, "name")
            volumes.add(name)
        containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
        names: set[str] = set()
        listening: dict[tuple[int, str], str] = {}
        for c in containers:
            if c["name"] in names:
                problem(f"container name {c['name']!r} is used twice")
            names.add(c["name"])
            mounts: dict[str, str] = {}
            for m in c.get("volumeMounts") or []:
                if m["name"] not in volumes:
                    problem(f"container {c['name']} mounts {m['name']!r}, which is no volume of the pod", m["name"], "name")
                at = posixpath.normpath(m["mountPath"])
                if at in mounts:
                    mine, theirs = (m["name"], mounts[at]) if m["name"] in user_volumes else (mounts[at], m["name"])
                    problem(f"{at} is where {where} already mounts {theirs!r} (container {c['name']}); the API server "
                            "refuses two mounts at one path: mount this volume elsewhere", mine)
                mounts.setdefault(at, m["name"])
            envs: set[str] = set()
            for e in c.get("env") or []:
                if e["name"] in envs:
                    problem(f"container {c['name']} sets env {e['name']} twice")
                envs.add(e["name"])
            port_names: set[str] = set()
            for p in c.get("ports") or []:
                if p.get("name") in port_names:
                    problem(f"container {c['name']} names two ports {p['name']!r}")
                if p.get("name"):
                    port_names.add(p["name"])
                if c in (pod.get("containers") or []):  # init containers run before, never beside, the others
                    key = (p["containerPort"], p.get("protocol", "TCP"))
                    if key in listening:
                        problem(f"containers {listening[key]} and {c['name']} both listen on {key[1]} port {key[0]}")
                    listening.setdefault(key, c["name"])
    return out


def _pod_spec(obj: Obj) -> Obj | None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if obj["kind"] == "Pod":
        return spec
    if obj["kind"] == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    return template.get("spec") if isinstance(template, dict) else None


def _service_errors(objects: list[Obj]) -> list[FieldError]:
    out = []
    for obj in objects:
        if obj["kind"] != "Service":
            continue
        where = f"Service/{obj['metadata']['name']}"
        names: set[str] = set()
        ports: set[tuple[int, str]] = set()
        for p in obj["spec"].get("ports") or []:
            if p.get("name") in names:
                out.append(FieldError(0, 0, "", f"{where}: two ports named {p['name']!r}"))
            names.add(p.get("name"))
            key = (p["port"], p.get("protocol", "TCP"))
            if key in ports:
                out.append(FieldError(0, 0, "", f"{where}: {key[1]} port {key[0]} twice"))
            ports.add(key)
    return out


def _claim_errors(profile: Profile, objects: list[Obj]) -> list[FieldError]:
    """A volume's claimName that is a claim a StatefulSet of the cluster makes from its claim template
    (slurmctld's state, MariaDB's data): mounting it on login and the pools hands the daemon's files to them."""
    made: list[tuple[re.Pattern[str], str]] = []
    for obj in objects:
        if obj["kind"] != "StatefulSet":
            continue
        for template in obj["spec"].get("volumeClaimTemplates") or []:
            prefix = naming.member_claim_prefix(template["metadata"]["name"], obj["metadata"]["name"])
            made.append((re.compile(re.escape(prefix) + "[0-9]+"), f"StatefulSet/{obj['metadata']['name']}"))
    out = []
    for v in profile.volumes:
        if v.claim_name is None:
            continue
        owner = next((sts for pattern, sts in made if pattern.fullmatch(v.claim_name)), None)
        if owner:
            path = named_path(profile.locator, ("spec", "volumes"), v.name, "claimName")
            out.append(field_error(profile.locator, path, f"{v.claim_name!r} is a claim of the cluster's own "
                                                          f"{owner}; a volume may not mount the cluster's storage"))
    return out
