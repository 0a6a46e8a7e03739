"""Pieces shared by the component builders: metadata, config/auth plumbing, munged."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.identity import (
    SNAPSHOT, identity_init_mounts, identity_mounts, identity_script, identity_volumes, live_command,
)
from slurmk8s.render.jobdefaults import TASK_PROLOG_FILE, task_prolog
from slurmk8s.render.slurmfiles import JWT_KEY_PATH
from slurmk8s.render.topology import topology_file_name

Obj = dict[str, Any]

ETC_SLURM = "/etc/slurm"
CONFIG_SOURCE = "/mnt/slurm-config"
AUTH_SOURCE = "/mnt/auth-key"
MUNGE_SOCKET_DIR = "/run/munge"
MUNGE_KEY_DIR = "/etc/munge"


def meta(profile: Profile, name: str, component: str | None = None, pool: str | None = None,
         annotations: dict[str, str] | None = None, namespaced: bool = True) -> Obj:
    """metadata with our labels (and the profile's namespace)."""
    m: Obj = {"name": name}
    if namespaced:
        m["namespace"] = profile.namespace
    m["labels"] = naming.object_labels(profile.name, component, pool)
    if annotations:
        m["annotations"] = dict(sorted(annotations.items()))
    return m


def config_hash(*parts: object) -> str:
    """Stable hash of what a pod reads at start, so a change rolls its pods."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


# The GitOps Jobs, by component: their names carry a digest of what they run (naming.*_job).
_JOB_NAMES = {naming.ACCOUNTS: naming.accounts_job, naming.ROLLOUT: naming.rollout_job,
              naming.UPGRADE_CHECK: naming.upgrade_check_job}


def named_by_content(obj: Obj) -> Obj:
    """A GitOps Job renamed by its finished spec too (pod settings and scan annotations come last).

    A Job's pod template cannot change in place: a changed Job under the same name fails `kubectl
    apply`, and one that never changes name never runs again. So the name changes with anything the
    Job runs (its builder's digest covers the ConfigMap it mounts and what it acts on) and stays the
    same otherwise, so a re-sync of the same input finds the finished Job and leaves it.
    """
    if obj["kind"] != "Job":
        return obj
    labels = obj["metadata"]["labels"]
    name = _JOB_NAMES[labels[naming.LABEL_COMPONENT]](labels[naming.LABEL_INSTANCE],
                                                     config_hash(obj["metadata"]["name"], obj["spec"]))
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


def auth_key_name(profile: Profile) -> str:
    return "slurm.key" if profile.auth == "slurm" else "munge.key"


# How a pod gets the Slurm files: a copy made at start, links into the ConfigMap volume that
# follow its updates (read again by `scontrol reconfigure`), or none (configless slurmd fetches
# them from slurmctld, which pushes them again on `scontrol reconfigure`).
CONFIG_COPY, CONFIG_LIVE, CONFIG_FETCHED = "copy", "live", "fetched"
# Every file the Slurm ConfigMap can hold; a link to one it does not hold dangles, which Slurm
# reads as an absent file (a GPU pool added later brings gres.conf without a new link).
SLURM_FILE_NAMES = ("cgroup.conf", "gres.conf", "slurm.conf", "topology.conf", "topology.yaml")


def volume_config(profile: Profile, config: str = CONFIG_COPY, key: bool = True) -> list[Obj]:
    """Volumes every Slurm pod has: the rendered config (unless fetched), the auth key (unless not key) and /etc/slurm."""
    vols = [
        {"name": "slurm-config", "configMap": {"name": naming.config_map(profile.name), "defaultMode": 0o444}},
        {"name": "auth-key", "secret": {"secretName": naming.auth_secret(profile.name), "defaultMode": 0o400,
                                        "items": [{"key": auth_key_name(profile), "path": auth_key_name(profile)}]}},
        {"name": "etc-slurm", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    if config == CONFIG_FETCHED and not needs_config_source(profile):
        vols = vols[1:]
    if not key:
        vols = [v for v in vols if v["name"] != "auth-key"]
    if profile.auth == "munge":
        vols += [{"name": "munge-socket", "emptyDir": {"sizeLimit": "1Mi"}},
                 {"name": "munge-key", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
    return vols + identity_volumes(profile)


def mounts_config(profile: Profile, init: bool, config: str = CONFIG_COPY, users: str = SNAPSHOT,
                  key: bool = True) -> list[Obj]:
    """Mounts for the config init container (init=True; the auth key's source unless not key) or a daemon/client
    container (users: identity.SNAPSHOT or identity.LIVE_USERS, whether its declared users follow changes)."""
    # Only init-config writes /etc/slurm: read-only after it, so no job can leave a file root reads there.
    mounts = [{"name": "etc-slurm", "mountPath": ETC_SLURM, **({} if init else {"readOnly": True})}]
    if (init and (config != CONFIG_FETCHED or needs_config_source(profile))) or config == CONFIG_LIVE:
        # Live: the daemon reads the kubelet's current copy through the links in /etc/slurm.
        mounts.append({"name": "slurm-config", "mountPath": CONFIG_SOURCE, "readOnly": True})
    if init:
        mounts += [{"name": "auth-key", "mountPath": AUTH_SOURCE, "readOnly": True}] if key else []
        if profile.auth == "munge":
            mounts += [{"name": "munge-key", "mountPath": MUNGE_KEY_DIR},
                       {"name": "munge-socket", "mountPath": MUNGE_SOCKET_DIR}]
    elif profile.auth == "munge":
        mounts += [{"name": "munge-socket", "mountPath": MUNGE_SOCKET_DIR}]
    return mounts + (identity_init_mounts(profile) if init else identity_mounts(profile, users))


def init_scripts(profile: Profile) -> list[str]:
    """Scripts of the Slurm ConfigMap that init-config installs (TaskProlog and spec.slurm.files *.sh)."""
    return ([TASK_PROLOG_FILE] if task_prolog(profile) else []) + \
        [name for name, _ in profile.slurm_extra_files if name.endswith(".sh")]


def extra_files(profile: Profile) -> list[str]:
    """The profile's own Slurm files other than scripts (plugstack.conf ...)."""
    return sorted(name for name, _ in profile.slurm_extra_files if not name.endswith(".sh"))


def needs_config_source(profile: Profile) -> bool:
    """Whether a configless slurmd pod's init-config still reads the ConfigMap (scripts, the profile's files)."""
    return bool(init_scripts(profile) or extra_files(profile))


def config_script(profile: Profile, extra: Sequence[str] = (), config: str = CONFIG_COPY, key: bool = True) -> str:
    """Shell run by the init container: copy or link config, install the key (unless not key) with the modes Slurm demands."""
    # chmod: the kubelet makes an emptyDir 0777 (a job user could add plugstack.conf there otherwise).
    lines = ["set -eu", f"chmod 0755 {ETC_SLURM}"]
    if config == CONFIG_COPY:
        lines.append(f"cp {CONFIG_SOURCE}/*.conf {ETC_SLURM}/")
        if topology_file_name(profile) == "topology.yaml":  # the only Slurm file not named *.conf
            lines.append(f"cp {CONFIG_SOURCE}/topology.yaml {ETC_SLURM}/")
    elif config == CONFIG_LIVE:
        # Links through the volume's own name: the kubelet swaps its ..data link on an update.
        names = sorted(set(SLURM_FILE_NAMES) | set(extra_files(profile)))
        lines.append(f"for f in {' '.join(names)}; do ln -sfn {CONFIG_SOURCE}/$f {ETC_SLURM}/$f; done")
    else:
        # Configless: Slurm's own files come from slurmctld; the profile's files are read from here.
        lines += [f"cp {CONFIG_SOURCE}/{name} {ETC_SLURM}/{name}" for name in extra_files(profile)]
    for script in init_scripts(profile):  # slurmd/slurmstepd run them as root: executable, root's, not writable by others
        lines.append(f"install -m 0755 {CONFIG_SOURCE}/{script} {ETC_SLURM}/{script}")
    if profile.auth == "slurm":
        # auth/slurm refuses a key readable by others; SlurmUser must read it.
        if key:
            lines.append(f"install -m 0600 -o slurm -g slurm {AUTH_SOURCE}/slurm.key {ETC_SLURM}/slurm.key")
    else:
        # munged (run as root here) wants its key and directories owned by itself, closed to others.
        lines += [f"install -m 0400 {AUTH_SOURCE}/munge.key {MUNGE_KEY_DIR}/munge.key",
                  f"chmod 0755 {MUNGE_SOCKET_DIR} {MUNGE_KEY_DIR}"]
    lines += follow_namespace_script(profile)
    lines += identity_script(profile)
    lines += list(extra)
    return "\n".join(lines) + "\n"


RESOLV_CONF = "/etc/resolv.conf"


def follow_namespace_script(profile: Profile, resolv_conf: str = RESOLV_CONF) -> list[str]:
    """Shell lines that point the pod's DNS search domains at the namespace it runs in.

    dnsConfig names the rendered namespace, and a kustomize `namespace:` overlay moves the pod
    without rewriting it. The runtime gives every container of a pod the same resolv.conf, so
    the init container rewrites this cluster's search entries to $POD_NAMESPACE (downward API);
    in the rendered namespace the file is already right and is not written.
    """
    services = "|".join(naming.searched_services(profile.name))
    domain = profile.cluster_domain.replace(".", "\\.")
    entry = f"/^({services})\\.[a-z0-9-]+\\.svc\\.{domain}$/"
    return [
        f'if [ -n "${{POD_NAMESPACE:-}}" ] && [ -f {resolv_conf} ]; then',
        f"  searches=$(awk -v ns=\"$POD_NAMESPACE\" '$1 == \"search\" {{ for (i = 2; i <= NF; i++) "
        f"if ($i ~ {entry}) sub(/\\.[a-z0-9-]+\\.svc\\./, \".\" ns \".svc.\", $i) }} {{ print }}' {resolv_conf})",
        f"  [ \"$searches\" = \"$(cat {resolv_conf})\" ] || printf '%s\\n' \"$searches\" > {resolv_conf}",
        "fi",
    ]


def init_config_container(profile: Profile, image: str, extra_script: Sequence[str] = (),
                          extra_mounts: Sequence[Obj] = (), env: Sequence[Obj] = (), config: str = CONFIG_COPY,
                          key: bool = True) -> Obj:
    """The `init-config` container every Slurm pod starts with (key=False: one that installs no slurm.key)."""
    c: Obj = {
        "name": "init-config",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["/bin/sh", "-c", config_script(profile, list(extra_script), config, key)],
    }
    c["env"] = [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}] + list(env)
    c["volumeMounts"] = mounts_config(profile, init=True, config=config, key=key) + list(extra_mounts)
    c["resources"] = small_resources()
    c["securityContext"] = {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_OVERRIDE"]}}
    return c


def munge_sidecar(profile: Profile, image: str) -> list[Obj]:
    """munged as a native sidecar (munge auth only): started, and its socket up, before the daemon."""
    if profile.auth != "munge":
        return []
    socket = f"{MUNGE_SOCKET_DIR}/munge.socket.2"
    return [{
        "name": "munged",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "restartPolicy": "Always",
        "command": ["munged", "--foreground", f"--key-file={MUNGE_KEY_DIR}/munge.key",
                    f"--socket={socket}", f"--seed-file={MUNGE_SOCKET_DIR}/munged.seed",
                    f"--pid-file={MUNGE_SOCKET_DIR}/munged.pid", "--num-threads=10"],
        "startupProbe": {"exec": {"command": ["test", "-S", socket]}, "periodSeconds": 1, "failureThreshold": 30},
        "volumeMounts": [{"name": "munge-key", "mountPath": MUNGE_KEY_DIR, "readOnly": True},
                         {"name": "munge-socket", "mountPath": MUNGE_SOCKET_DIR}],
        "resources": small_resources(),
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False},
    }]


def jwt_key_volume(profile: Profile) -> tuple[list[Obj], list[Obj], list[str]]:
    """(volumes, init mounts, init script lines) that install the JWT key for slurmctld and slurmdbd."""
    if not profile.restapi_enabled:
        return [], [], []
    return ([{"name": "jwt-key", "secret": {"secretName": naming.jwt_secret(profile.name), "defaultMode": 0o400,
                                            "items": [{"key": "jwt_hs256.key", "path": "jwt_hs256.key"}]}}],
            [{"name": "jwt-key", "mountPath": "/mnt/jwt-key", "readOnly": True}],
            [f"install -m 0600 -o slurm -g slurm /mnt/jwt-key/jwt_hs256.key {JWT_KEY_PATH}"])


def small_resources() -> Obj:
    """Requests/limits of the small helper containers."""
    return {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}


def shared_nodes(profile: Profile) -> list[str]:
    """The nodes side-by-side pod mode shares with Kubernetes (none in host mode or without it)."""
    sbs = profile.side_by_side
    if not sbs or sbs.mode != "pod":
        return []
    return sorted({node for shape in sbs.shapes for node in shape.nodes})


def avoid_shared_nodes(profile: Profile, spec: Obj) -> None:
    """Prefer nodes other than the shared ones: there, the fence gives the CPUs to slurmd and to
    Kubernetes' own work, and a Slurm daemon or pool pod scheduled first leaves the shared slurmd
    no room (found on kind: the DaemonSet pod stayed Pending)."""
    nodes = shared_nodes(profile)
    if not nodes:
        return
    term = {"weight": 100, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": nodes}]}}
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(term)


def pod_spec(profile: Profile, component: str, containers: list[Obj], init: list[Obj],
             volumes: list[Obj], extra: Obj | None = None, shared_node_pod: bool = False) -> Obj:
    """A Slurm pod's spec: DNS search domains so bare hostnames resolve, no service env."""
    spec: Obj = {
        "serviceAccountName": naming.component_name(profile.name, component),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "dnsConfig": {"searches": naming.search_domains(profile.name, profile.namespace, profile.cluster_domain)},
    }
    if extra:
        spec.update(extra)
    if not shared_node_pod:
        avoid_shared_nodes(profile, spec)
    # The runtime's default seccomp filter for every pod (privileged containers are exempt by the runtime).
    spec["securityContext"] = {**spec.get("securityContext", {}), "seccompProfile": {"type": "RuntimeDefault"}}
    init = list(init) + munge_sidecar(profile, containers[0]["image"])
    if init:
        spec["initContainers"] = init
    spec["containers"] = containers
    spec["volumes"] = volumes
    return spec


def headless_service(profile: Profile, name: str, component: str, ports: list[tuple[str, int]],
                     selector: dict[str, str]) -> Obj:
    """A headless Service that publishes pods before they are Ready (Slurm must resolve starting nodes)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(profile, name, component),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports],
        },
    }


def pvc_template(name: str, size: str, storage_class: str | None) -> Obj:
    """A volumeClaimTemplate, with the apiVersion and kind the API server fills in: without them a GitOps
    diff against the live object never ends (Argo CD shows the StatefulSet OutOfSync forever)."""
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def statefulset(profile: Profile, name: str, component: str, replicas: int, service: str,
                pod: Obj, pod_annotations: dict[str, str], pool: str | None = None,
                claims: Sequence[Obj] = (), parallel: bool = False) -> Obj:
    """A StatefulSet whose pods carry the selector labels and the given annotations."""
    selector = naming.selector_labels(profile.name, component, pool)
    spec: Obj = {
        "replicas": replicas,
        "serviceName": service,
        "selector": {"matchLabels": selector},
    }
    if parallel:
        spec["podManagementPolicy"] = "Parallel"
    template_meta: Obj = {"labels": naming.object_labels(profile.name, component, pool)}
    if pod_annotations:
        template_meta["annotations"] = dict(sorted(pod_annotations.items()))
    spec["template"] = {"metadata": template_meta, "spec": pod}
    if claims:
        spec["volumeClaimTemplates"] = list(claims)
        spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta(profile, name, component, pool), "spec": spec}


def service_account(profile: Profile, component: str) -> Obj:
    """One ServiceAccount per component, with no token mounted by default."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": meta(profile, naming.component_name(profile.name, component), component),
            "automountServiceAccountToken": False}



def role_binding(profile: Profile, role: str, component: str, service_account_name: str,
                 cluster_wide: bool = False) -> Obj:
    """A RoleBinding (ClusterRoleBinding when cluster_wide) named after its role, labelled for
    component, granting it to one ServiceAccount."""
    kind = "ClusterRole" if cluster_wide else "Role"
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding",
            "metadata": meta(profile, role, component, namespaced=not cluster_wide),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": service_account_name, "namespace": profile.namespace}]}


SACK_DIR = "/run/slurm"  # where Slurm's clients look for sackd's socket
SACK_VOLUME = "sack"


def sack_volumes(profile: Profile) -> list[Obj]:
    """The socket directory a pod's Slurm clients share with its sackd (auth/slurm only)."""
    return [{"name": SACK_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}] if profile.auth == "slurm" else []


def sack_client_mounts(profile: Profile) -> list[Obj]:
    return [{"name": SACK_VOLUME, "mountPath": SACK_DIR}] if profile.auth == "slurm" else []


def sackd_sidecar(profile: Profile, config: str = CONFIG_COPY) -> list[Obj]:
    """sackd as a native sidecar (auth/slurm), for a pod whose Slurm clients run beside no daemon.

    A client under auth/slurm never signs with the key itself: it asks a sack socket, which only
    slurmctld, slurmd, slurmdbd or sackd serve (found on kind: "failed to connect to any sack sockets").
    The sidecar's startup probe holds the main containers until the socket exists. It runs as
    SlurmUser, who owns the key, with no capabilities: sackd warns when it runs as anyone else, and it
    binds its socket with umask 0, so every user of the pod (login's ssh users too) reaches it.
    Its image is the login image, the one that carries sackd (the controller's has none: found on kind).
    """
    if profile.auth != "slurm":
        return []
    return [{
        "name": "sackd",
        "image": profile.images.login,
        "imagePullPolicy": profile.images.pull_policy,
        "restartPolicy": "Always",
        "command": ["sackd", "-D"],  # as SlurmUser: the users of its start (identity.SNAPSHOT)
        "startupProbe": {"exec": {"command": ["test", "-S", f"{SACK_DIR}/sack.socket"]}, "periodSeconds": 1,
                         "failureThreshold": 30},
        "volumeMounts": mounts_config(profile, init=False, config=config) + sack_client_mounts(profile),
        "resources": small_resources(),
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }]


def slurm_client_job_pod(profile: Profile, component: str, container: str, program_dir: str, program: str,
                         resources: Obj) -> Obj:
    """The pod of a hook or token Job: a shipped python3 program, mounted from the component's ConfigMap at
    program_dir, run as SlurmUser (who may drain, resume and mint tokens; nothing here needs root) in the
    controller image, a Slurm client with the cluster's slurm.conf and auth key, and the API token of the
    component's ServiceAccount (read as SlurmUser: the kubelet makes it group-readable for the fsGroup)."""
    image = profile.images.controller
    runner: Obj = {
        "name": container,
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": ["python3", f"{program_dir}/{program}"],
        "resources": resources,
        "securityContext": {"runAsUser": naming.SLURM_UID, "runAsGroup": naming.SLURM_UID, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts_config(profile, init=False) + [{"name": component, "mountPath": program_dir,
                                                              "readOnly": True}] + sack_client_mounts(profile),
    }
    volumes = volume_config(profile) + sack_volumes(profile) + [{"name": component, "configMap": {
        "name": naming.component_name(profile.name, component), "defaultMode": 0o444}}]
    return pod_spec(profile, component, [runner], [init_config_container(profile, image)] + sackd_sidecar(profile),
                    volumes, {"restartPolicy": "Never", "automountServiceAccountToken": True,
                              "securityContext": {"fsGroup": naming.SLURM_UID}})
