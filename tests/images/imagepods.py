"""Run the project's images with podman the way the rendered pods run them.

A pod becomes one container: the pod's ConfigMaps and Secrets are bind-mounted read-only at
their mount paths with their defaultMode, every emptyDir is a fresh directory with the kubelet's
mode 0777, and the rendered init containers and sidecars run before the checks, as in the pod.
The network is slirp4netns: like a pod, the container has an interface with an address
(getaddrinfo needs one to resolve 0.0.0.0), and it lives only inside the container, in the
test range 198.18.0.0/15, with no bridge on the host.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from slurmk8s import material
from slurmk8s.debian import SLURM_RELEASES
from slurmk8s.images import build, recipes
from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
NETWORK = "slirp4netns:cidr=198.18.254.0/24"
MARK = "@@step"
# cred/slurm has no file of its own: Slurm loads it from the auth/slurm plugin.
PLUGIN_FILES = {"cred/slurm": "auth_slurm.so"}


@dataclass(frozen=True)
class Step:
    """Exit code and combined output of one step of a container run."""

    rc: int
    out: str


def image_ref(series: str, name: str) -> str:
    """The series tag of an image under the default registry."""
    recipe = next(r for r in recipes.recipes_for(series) if r.name == name)
    return recipes.image_refs(recipe, SLURM_RELEASES[series], recipes.DEFAULT_REGISTRY)[0]


def ensure_images(series: str) -> None:
    """Build the series' images when any is missing (a cached build costs seconds, a cold one minutes)."""
    missing = [r.name for r in recipes.recipes_for(series) if subprocess.run(
        ["podman", "image", "exists", image_ref(series, r.name)]).returncode != 0]
    if missing:
        build.build_series(series, build.BuildOptions(), log=lambda line: None)


def image_label(ref: str, label: str) -> str | None:
    """One label of a local image."""
    out = subprocess.run(["podman", "image", "inspect", "--format", "{{json .Config.Labels}}", ref],
                         capture_output=True, text=True, check=True).stdout
    return (json.loads(out) or {}).get(label)


def render_profile(series: str, auth: str | None = None):
    """kind-dev on ``series``, pointed at this series' images, with slurmrestd on (and ``auth`` if given)."""
    doc = yaml.safe_load((ROOT / "profiles/kind-dev.yaml").read_text())
    release = SLURM_RELEASES[series]
    slurm = doc["spec"]["slurm"]
    slurm["version"] = series
    slurm["images"] = {"registry": recipes.DEFAULT_REGISTRY, "os": release.os_name,
                       "database": image_ref(series, "mariadb")}
    if auth:
        slurm["auth"] = auth
    doc["spec"]["restapi"] = {"enabled": True}
    return render(load_profile(yaml.safe_dump(doc).encode(), f"kind-dev@{series}"))


def workload(bundle, kind: str, name: str) -> dict:
    """A rendered StatefulSet, Deployment or DaemonSet."""
    return bundle.find(kind, name)


def containers_of(obj: dict) -> list[dict]:
    """Init containers (sidecars among them) then containers, in the pod's start order."""
    spec = obj["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def secret_material(bundle) -> dict[str, dict[str, bytes]]:
    """Random content for every Secret the bundle references, as `up` would create it."""
    out: dict[str, dict[str, bytes]] = {}
    for s in bundle.secrets:
        # the product's own generator: a host key must be a real OpenSSH key for sshd to start
        out.setdefault(s.name, {})[s.key] = material.generate(s.kind)
    return out


def volume_args(bundle, obj: dict, host_dir: Path, material: dict[str, dict[str, bytes]],
                owners: dict[str, tuple[int, int, int]] | None = None) -> list[str]:
    """podman arguments mounting every volume the pod's containers mount.

    ``owners`` gives a persistent volume's (uid, gid, mode); by default a fresh root dir 0755.
    """
    spec = obj["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claims = {t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])}
    fs_group = spec.get("securityContext", {}).get("fsGroup")
    args, seen = [], set()
    for c in containers_of(obj):
        for mount in c.get("volumeMounts", []):
            path, name = mount["mountPath"], mount["name"]
            if path in seen:
                continue
            seen.add(path)
            volume = volumes.get(name, {})
            where = host_dir / name
            if "emptyDir" in volume:
                # the kubelet's emptyDir: 0777, group fsGroup with setgid when the pod has one
                # (a host dir: podman's tmpfs here keeps an existing mount point's 0755)
                where.mkdir(parents=True, exist_ok=True)
                if fs_group is not None:
                    os.chown(where, 0, fs_group)
                where.chmod(0o2777 if fs_group is not None else 0o777)
                args += ["-v", f"{where}:{path}"]
            elif "configMap" in volume or "secret" in volume:
                source = volume.get("configMap") or volume["secret"]
                data = ({k: v.encode() for k, v in bundle.find("ConfigMap", source["name"])["data"].items()}
                        if "configMap" in volume else material[source["secretName"]])
                _write_files(where, data, source.get("items"), source.get("defaultMode", 0o644))
                args += ["-v", f"{where}:{path}:ro"]
            elif "projected" in volume:
                # a ServiceAccount token and the cluster CA: no API here, so stand-ins with the volume's mode
                files = {}
                for source in volume["projected"]["sources"]:
                    if "serviceAccountToken" in source:
                        files[source["serviceAccountToken"]["path"]] = b"stand-in token"
                    for item in (source.get("configMap") or {}).get("items", []):
                        files[item["path"]] = b"stand-in certificate"
                _write_files(where, files, None, volume["projected"].get("defaultMode", 0o644))
                args += ["-v", f"{where}:{path}:ro"]
            elif "persistentVolumeClaim" in volume or name in claims:
                uid, gid, mode = (owners or {}).get(name, (0, 0, 0o755))
                where.mkdir(parents=True, exist_ok=True)
                os.chown(where, uid, gid)
                where.chmod(mode)
                args += ["-v", f"{where}:{path}"]
            else:
                raise AssertionError(f"volume {name} of {obj['metadata']['name']}: kind not handled: {volume}")
    return args


def _write_files(where: Path, data: dict[str, bytes], items: list[dict] | None, mode: int) -> None:
    where.mkdir(parents=True, exist_ok=True)
    chosen = {i["key"]: i["path"] for i in items} if items else {k: k for k in data}
    for key, rel in chosen.items():
        target = where / rel
        target.write_bytes(data[key])
        target.chmod(mode)


def _user(obj: dict, c: dict) -> tuple[int, int]:
    pod = obj["spec"]["template"]["spec"].get("securityContext", {})
    own = c.get("securityContext", {})
    uid = own.get("runAsUser", pod.get("runAsUser", 0))
    return uid, own.get("runAsGroup", pod.get("runAsGroup", uid))


def command_line(obj: dict, c: dict, material: dict[str, dict[str, bytes]], run_as: tuple[int, int]) -> str:
    """Shell text running a container's command with its env, as its user (setpriv when the
    container's user differs from the one the podman container runs as)."""
    env = []
    for e in c.get("env", []):
        if "value" in e:
            env.append(f"{e['name']}={e['value']}")
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            env.append(f"{e['name']}={material[ref['name']][ref['key']].decode()}")
    argv = [*c.get("command", []), *c.get("args", [])]
    uid, gid = _user(obj, c)
    if (uid, gid) != run_as:
        argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *argv]
    return shlex.join(["env", *env, *argv] if env else argv)


def pod_steps(obj: dict, material: dict[str, dict[str, bytes]], run_as: tuple[int, int] = (0, 0)) -> dict[str, str]:
    """Steps that start the pod as the kubelet would: each init container to completion, each
    sidecar in the background until its startup probe passes. The main containers are left
    to the caller's own steps."""
    steps = {}
    for c in obj["spec"]["template"]["spec"].get("initContainers", []):
        line = command_line(obj, c, material, run_as)
        if c.get("restartPolicy") != "Always":
            steps[f"init:{c['name']}"] = line
            continue
        probe = shlex.join(c["startupProbe"]["exec"]["command"])
        budget = c["startupProbe"].get("periodSeconds", 10) * c["startupProbe"].get("failureThreshold", 3)
        steps[f"sidecar:{c['name']}"] = (f"{line} >/tmp/{c['name']}.log 2>&1 &\n"
                                         f"{wait_for(probe, c['name'], budget)}\n"
                                         f"{probe} && echo ready || {{ tail -20 /tmp/{c['name']}.log; exit 1; }}")
    return steps


def run_steps(image: str, args: list[str], steps: dict[str, str], user: str | None = None,
              timeout: float = 180) -> dict[str, Step]:
    """Run each shell step in turn in one container (a failing step does not stop the next)."""
    script = "\n".join(f"echo '{MARK} {name}'\n( {body}\n) 2>&1 </dev/null\necho \"{MARK}-rc $?\""
                       for name, body in steps.items())
    argv = ["podman", "run", "--rm", f"--network={NETWORK}", *args, *(["--user", user] if user else []),
            "--entrypoint", "/bin/sh", image, "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    results, name, lines = {}, None, []
    for line in done.stdout.splitlines():
        if line.startswith(f"{MARK} "):
            name, lines = line.split(" ", 1)[1], []
        elif line.startswith(f"{MARK}-rc ") and name:
            results[name] = Step(int(line.split()[1]), "\n".join(lines))
            name = None
        elif name:
            lines.append(line)
    missing = [s for s in steps if s not in results]
    assert not missing, f"steps {missing} did not finish (podman exited {done.returncode}): {done.stderr[-2000:]}"
    return results


def wait_for(test: str, what: str, seconds: int = 30) -> str:
    """Shell that polls ``test`` against a wall-clock deadline, then says whether it came true."""
    return (f"end=$(($(date +%s) + {seconds})); until {test}; do "
            f"[ $(date +%s) -lt $end ] || {{ echo '{what}: not ready after {seconds} s'; break; }}; sleep 0.1; done")


def plugin_files(*conf_texts: str) -> set[str]:
    """The plugin files that Slurm config files name, e.g. AuthType=auth/slurm -> auth_slurm.so."""
    found = set()
    for text in conf_texts:
        for value in re.findall(r"^\w+(?:Type|Types|Plugin|Plugins)=(\S+)$", text, re.M):
            found.update(PLUGIN_FILES.get(item, item.replace("/", "_") + ".so") for item in value.split(",") if "/" in item)
    return found
