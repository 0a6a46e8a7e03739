"""The sandbox's mounts as a kubelet fills them: Secrets, configMap/secret/emptyDir/claim volumes, the token, /etc/hosts.

Modes, owners and the fsGroup pass follow the kubelet's volume code (see kubelet.py); the
namespaces these are mounted into are sandbox.py's.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from slurmk8s import material, naming
from slurmk8s.lab import kubelet
from slurmk8s.lab.errors import LabError
from slurmk8s.lab.files import write_file
from slurmk8s.lab.plan import Pod, Volume, dns_names, workloads

if TYPE_CHECKING:
    from slurmk8s.lab.lifecycle import Lab


def materialise_secrets(lab: Lab) -> None:
    """The bundle's Secrets with fresh material, as `up` would create them."""
    for s in lab.bundle.secrets:
        write_file(lab.lab_dir / "secrets" / s.name / s.key, material.generate(s.kind), 0o600)


def materialise_pod(lab: Lab, pod: Pod) -> None:
    """A pod's volumes as a kubelet sets them up: modes, owners and fsGroup; claims as local-path makes them.

    Every volume but a claim starts empty with the pod, and so does the token volume.
    """
    config_maps = {o["metadata"]["name"]: dict(o["data"]) for o in lab.bundle.of_kind("ConfigMap")}
    config_maps[naming.config_map(lab.bundle.cluster)] = lab.slurm_files
    fs_group = pod.security.fs_group
    for v in pod.volumes:
        target = lab.volume_dir(pod, v.name)
        if v.kind == "claim":
            # kind's local-path provisioner: `mkdir -m 0777` on the node, a hostPath volume: no fsGroup change
            if not target.exists():
                target.mkdir(parents=True)
                os.chmod(target, kubelet.EMPTY_DIR_MODE)
            continue
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        if v.kind == "emptyDir":
            os.chmod(target, kubelet.MEMORY_DIR_MODE if v.medium == "Memory" else kubelet.EMPTY_DIR_MODE)
            apply_fs_group(target, fs_group, read_only=False)
            continue
        payload = _volume_payload(lab, pod, v, config_maps)
        # a configMap sits on a disk emptyDir, a secret on a Memory one
        write_projection(target, payload, kubelet.EMPTY_DIR_MODE if v.kind == "configMap" else kubelet.MEMORY_DIR_MODE)
        apply_fs_group(target, fs_group, read_only=True)
    shutil.rmtree(lab.pod_dir(pod) / "layers", ignore_errors=True)
    shm = lab.pod_dir(pod) / "shm"  # the sandbox's /dev/shm: a tmpfs of 64 MiB, 1777, on containerd
    shutil.rmtree(shm, ignore_errors=True)
    shm.mkdir(parents=True)
    os.chmod(shm, kubelet.MEMORY_DIR_MODE)
    if pod.service_account_token and lab.api:
        sa = lab.pod_dir(pod) / "serviceaccount"
        if sa.exists():
            shutil.rmtree(sa)
        sa.mkdir(parents=True)
        account = next(c["spec"]["template"]["spec"].get("serviceAccountName", "default")
                       for c in workloads(lab.bundle) if c["metadata"]["name"] == pod.owner)
        owner = kubelet.fs_user(pod.security, [c.security for c in pod.all_containers])
        mode, uid = kubelet.token_file(kubelet.PROJECTED_DEFAULT_MODE, owner, fs_group)
        write_projection(sa, {
            "token": (lab.api.token_for(pod.namespace, account).encode(), mode, uid),
            "ca.crt": (lab.api.ca_file.read_bytes(), kubelet.PROJECTED_DEFAULT_MODE, None),
            "namespace": (pod.namespace.encode(), kubelet.PROJECTED_DEFAULT_MODE, None),
        }, kubelet.MEMORY_DIR_MODE)
        apply_fs_group(sa, fs_group, read_only=True)


def _volume_payload(lab: Lab, pod: Pod, v: Volume, config_maps: dict[str, dict[str, str]]) -> dict:
    """path -> (data, mode, owner) of a configMap or secret volume (MakePayload: items, or every key)."""
    if v.kind == "configMap":
        data = {k: text.encode() for k, text in config_maps[v.source].items()}
    else:
        folder = lab.lab_dir / "secrets" / v.source
        if not folder.is_dir():
            raise LabError(f"{pod.name}: volume {v.name} needs Secret {v.source}, which nothing creates")
        data = {f.name: f.read_bytes() for f in folder.iterdir()}
    items = v.items or tuple((k, k, None) for k in data)
    return {path: (data[key], v.mode if mode is None else mode, None) for key, path, mode in items}


def write_projection(target: Path, payload: dict[str, tuple[bytes, int, int | None]], root_mode: int) -> None:
    """The atomic writer's layout: files in ..<timestamp> (0755), ..data -> it, one symlink per top-level name."""
    os.chmod(target, root_mode)
    stamp = Path(tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()), dir=target))
    os.chmod(stamp, kubelet.DATA_DIR_MODE)
    for path, (data, mode, owner) in sorted(payload.items()):
        file = stamp / path
        for parent in reversed(file.relative_to(stamp).parents[:-1]):
            if not (stamp / parent).exists():
                (stamp / parent).mkdir()
                os.chmod(stamp / parent, kubelet.NESTED_DIR_MODE)
        write_file(file, data, mode)
        if owner is not None:
            os.chown(file, owner, -1)
    (target / "..data").symlink_to(stamp.name)
    for top in sorted({p.split("/", 1)[0] for p in payload}):
        (target / top).symlink_to(f"..data/{top}")


def apply_fs_group(root: Path, fs_group: int | None, read_only: bool) -> None:
    """changeFilePermission over a whole volume: group fsGroup, group rw (ro) bits, setgid dirs; symlinks only chowned."""
    if fs_group is None:
        return
    _fs_group_one(root, fs_group, read_only)
    for dirpath, dirnames, filenames in os.walk(root):  # symlinked dirs are listed, not followed
        for name in dirnames + filenames:
            _fs_group_one(Path(dirpath, name), fs_group, read_only)


def _fs_group_one(path: Path, fs_group: int, read_only: bool) -> None:
    st = os.lstat(path)
    os.lchown(path, -1, fs_group)
    if stat.S_ISLNK(st.st_mode):
        return
    os.chmod(path, kubelet.fs_group_mode(stat.S_IMODE(st.st_mode), stat.S_ISDIR(st.st_mode), read_only))


def write_hosts(lab: Lab) -> None:
    """/etc/hosts of every pod: the DNS names of the pods that run now (rewritten in place: bind mounts pin the inode)."""
    with lab.network.lock:  # pods are set up from several threads: read the pods and write under one lock
        names = dns_names(lab.bundle, lab.pods)
        lines = ["127.0.0.1 localhost"]
        lines += [f"{lab.network.pods[p.name].ip} {' '.join(names[p.name])}" for p in lab.pods
                  if p.name in lab.network.pods]
        if lab.api:  # cluster DNS for the API Service
            lines.append(f"{lab.api.address} kubernetes kubernetes.default kubernetes.default.svc "
                         f"kubernetes.default.svc.{lab.bundle.cluster_domain}")
        path = lab.lab_dir / "hosts"
        if not path.exists():
            path.touch()
        with open(path, "r+") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.truncate()
