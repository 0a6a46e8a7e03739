"""From a rendered bundle to the pods the lab runs: pure, no I/O.

The lab must exercise what `render` produced, so every pod, container, command,
environment variable, volume and mount comes from the bundle's objects; the only
changes are the adaptations in adapt.py, which the lab prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slurmk8s import naming
from slurmk8s.lab.kubelet import DEFAULT_MODE, ContainerSecurity, PodSecurity
from slurmk8s.render import Bundle



@dataclass(frozen=True)
class Volume:
    """A pod volume: kind is configMap, secret, emptyDir or claim (a PVC, template or shared)."""

    name: str
    kind: str
    source: str = ""  # ConfigMap/Secret/claim name
    items: tuple[tuple[str, str, int | None], ...] = ()  # (key, path, mode); empty = every key
    mode: int = DEFAULT_MODE  # defaultMode
    medium: str = ""  # an emptyDir's medium ("Memory": a tmpfs)


@dataclass(frozen=True)
class Mount:
    """A container's volumeMount."""

    volume: str
    path: str
    read_only: bool = False
    sub_path: str = ""


@dataclass(frozen=True)
class Probe:
    """A rendered probe: tcpSocket (port), httpGet (port, path) or exec (command)."""

    port: int | None = None
    path: str = ""
    command: tuple[str, ...] = ()
    timeout_s: float = 1  # the kubelet's default timeoutSeconds

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> "Probe | None":
        if not spec:
            return None
        how = spec.get("tcpSocket") or spec.get("httpGet") or {}
        return cls(port=how.get("port"), path=spec.get("httpGet", {}).get("path", ""),
                   command=tuple(spec.get("exec", {}).get("command", [])), timeout_s=spec.get("timeoutSeconds", 1))


@dataclass(frozen=True)
class Container:
    """One container: its image, command and args (the image's Entrypoint/Cmd fill in), env and mounts."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    secret_env: tuple[tuple[str, str, str], ...]  # (variable, secret, key)
    mounts: tuple[Mount, ...]
    readiness: Probe | None
    gpus: int = 0
    sidecar: bool = False  # an init container with restartPolicy Always (native sidecar)
    startup_exec: tuple[str, ...] = ()  # startupProbe exec command
    liveness: Probe | None = None
    working_dir: str = ""
    security: ContainerSecurity = ContainerSecurity()

    @property
    def argv(self) -> tuple[str, ...]:
        """command + args as rendered (without what the image adds)."""
        return self.command + self.args


@dataclass(frozen=True)
class Pod:
    """One pod of a StatefulSet/Deployment member, as Kubernetes would create it."""

    name: str
    hostname: str
    namespace: str
    component: str
    pool: str | None
    ordinal: int
    owner: str  # StatefulSet/Deployment name
    service: str | None  # governing headless Service (pod DNS subdomain)
    volumes: tuple[Volume, ...]
    init: tuple[Container, ...]
    containers: tuple[Container, ...]
    labels: dict[str, str] = field(default_factory=dict)
    service_account_token: bool = False  # automountServiceAccountToken
    security: PodSecurity = PodSecurity()

    first_node: int = 0  # Slurm node number of ordinal 0 (a per-leaf StatefulSet of a topology)

    @property
    def slurm_node(self) -> str | None:
        """Slurm node name of a pool pod: <pool>-<first_node + ordinal>."""
        return naming.slurm_node_name(self.pool, self.first_node + self.ordinal) if self.pool else None

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Init containers (sidecars too) then containers, as the kubelet visits them."""
        return self.init + self.containers


def _volume(v: dict[str, Any], owner: str, ordinal: int) -> Volume:
    if "configMap" in v:
        cm = v["configMap"]
        return Volume(v["name"], "configMap", cm["name"], _items(cm), cm.get("defaultMode", DEFAULT_MODE))
    if "secret" in v:
        s = v["secret"]
        return Volume(v["name"], "secret", s["secretName"], _items(s), s.get("defaultMode", DEFAULT_MODE))
    if "emptyDir" in v:
        return Volume(v["name"], "emptyDir", medium=v["emptyDir"].get("medium", ""))
    if "projected" in v:
        # A ServiceAccount token: the lab serves no API for it, so the cordon check finds none and does nothing.
        return Volume(v["name"], "emptyDir")
    if "persistentVolumeClaim" in v:
        return Volume(v["name"], "claim", v["persistentVolumeClaim"]["claimName"])
    raise ValueError(f"{owner}: volume {v['name']} of an unsupported kind: {sorted(v)}")


def _items(source: dict[str, Any]) -> tuple[tuple[str, str, int | None], ...]:
    return tuple((i["key"], i["path"], i.get("mode")) for i in source.get("items", []))


def _container(c: dict[str, Any], gpu_resources: set[str], fields: dict[str, str] | None = None) -> Container:
    """A container of a pod; fields are the pod's downward-API values (metadata.namespace, ...)."""
    env, secret_env = [], []
    for e in c.get("env", []):
        if "value" in e:
            env.append((e["name"], e["value"]))
        elif "fieldRef" in e.get("valueFrom", {}):
            env.append((e["name"], (fields or {}).get(e["valueFrom"]["fieldRef"]["fieldPath"], "")))
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            secret_env.append((e["name"], ref["name"], ref["key"]))
    limits = c.get("resources", {}).get("limits", {})
    gpus = sum(int(v) for k, v in limits.items() if k in gpu_resources)
    return Container(
        name=c["name"],
        image=c["image"],
        command=tuple(c.get("command", [])),
        args=tuple(c.get("args", [])),
        env=tuple(env),
        secret_env=tuple(secret_env),
        mounts=tuple(Mount(m["name"], m["mountPath"], m.get("readOnly", False), m.get("subPath", ""))
                     for m in c.get("volumeMounts", [])),
        readiness=Probe.from_spec(c.get("readinessProbe")),
        gpus=gpus,
        sidecar=c.get("restartPolicy") == "Always",
        startup_exec=tuple(c.get("startupProbe", {}).get("exec", {}).get("command", [])),
        liveness=Probe.from_spec(c.get("livenessProbe")),
        working_dir=c.get("workingDir", ""),
        security=ContainerSecurity.from_spec(c.get("securityContext")),
    )


def gpu_resource_names(bundle: Bundle) -> set[str]:
    """Extended resources that are GPUs (the gres annotation marks the pools that have them)."""
    names = set()
    for sts in bundle.of_kind("StatefulSet"):
        if naming.ANNOTATION_GRES in sts["spec"]["template"]["metadata"].get("annotations", {}):
            limits = sts["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            names |= {k for k in limits if "gpu" in k}
    return names


def workloads(bundle: Bundle) -> list[dict[str, Any]]:
    """The bundle's StatefulSets and Deployments, in apply order."""
    return [o for o in bundle.objects if o["kind"] in ("StatefulSet", "Deployment")]


def max_replicas(workload: dict[str, Any]) -> int:
    """How many members a workload can have: a pool's elastic ceiling, else its replicas."""
    annotations = workload["metadata"].get("annotations", {})
    return int(annotations.get(naming.ANNOTATION_MAX_REPLICAS, workload["spec"].get("replicas", 1)))


def pod_for(bundle: Bundle, workload: dict[str, Any], ordinal: int) -> Pod:
    """Member `ordinal` of a StatefulSet/Deployment, as its controller would create it."""
    gpu_resources = gpu_resource_names(bundle)
    spec, owner = workload["spec"], workload["metadata"]["name"]
    template = spec["template"]
    labels = template["metadata"]["labels"]
    name = naming.pod_name(owner, ordinal)
    volumes = [_volume(v, owner, ordinal) for v in template["spec"].get("volumes", [])]
    # A claim template gives each member its own claim <template>-<pod>.
    volumes += [Volume(t["metadata"]["name"], "claim", naming.member_claim(t["metadata"]["name"], owner, ordinal))
                for t in spec.get("volumeClaimTemplates", [])]
    fields = {"metadata.namespace": workload["metadata"]["namespace"], "metadata.name": name}
    return Pod(
        name=name,
        hostname=name,
        namespace=workload["metadata"]["namespace"],
        component=labels[naming.LABEL_COMPONENT],
        pool=labels.get(naming.LABEL_POOL),
        ordinal=ordinal,
        owner=owner,
        service=spec.get("serviceName"),
        volumes=tuple(volumes),
        init=tuple(_container(c, gpu_resources, fields) for c in template["spec"].get("initContainers", [])),
        containers=tuple(_container(c, gpu_resources, fields) for c in template["spec"]["containers"]),
        labels=dict(labels),
        service_account_token=bool(template["spec"].get("automountServiceAccountToken", True)),
        security=PodSecurity.from_spec(template["spec"].get("securityContext")),
        first_node=int(template["metadata"].get("annotations", {}).get(naming.ANNOTATION_FIRST_NODE, "0")),
    )


def pods_of(bundle: Bundle) -> list[Pod]:
    """Every pod the bundle's StatefulSets/Deployments run now, in apply order."""
    return [pod_for(bundle, w, i) for w in workloads(bundle) for i in range(w["spec"].get("replicas", 1))]


def dns_names(bundle: Bundle, pods: list[Pod]) -> dict[str, list[str]]:
    """Pod name -> every DNS name that resolves to it, as cluster DNS plus the pods' search domains would.

    Pod records: <pod>.<svc>[.<ns>[.svc[.<domain>]]] and the bare hostname (found through the
    dnsConfig search domains). Service records: each Service name [.<ns>[.svc[.<domain>]]]
    resolves to the first Ready pod it selects (a ClusterIP has no kube-proxy here).
    """
    names: dict[str, list[str]] = {p.name: [p.hostname] for p in pods}
    for p in pods:
        if p.service:
            names[p.name] += [f"{p.hostname}.{p.service}"] + _qualified(f"{p.hostname}.{p.service}", p.namespace,
                                                                        bundle.cluster_domain)
    for svc in bundle.of_kind("Service"):
        selector = svc["spec"].get("selector", {})
        chosen = [p for p in pods if selector and all(p.labels.get(k) == v for k, v in selector.items())]
        if chosen:
            names[chosen[0].name] += [svc["metadata"]["name"]] + _qualified(svc["metadata"]["name"], svc["metadata"]["namespace"],
                                                                            bundle.cluster_domain)
    return names


def _qualified(name: str, namespace: str, domain: str) -> list[str]:
    return [f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.{domain}"]
