"""Every object name, label, hostname and DNS name of a rendered cluster.

Nothing else in slurmk8s builds a name by string formatting: change a name here and
the Slurm config, the Kubernetes objects and the lab all follow.
"""

from __future__ import annotations

# The StatefulSet controller labels each pod `controller-revision-hash: <sts>-<10 chars>`,
# and a label value is at most 63 characters: longer StatefulSet names fail at runtime.
MAX_STATEFULSET_NAME = 52

CLUSTER_DOMAIN = "cluster.local"  # the default of the profile's spec.clusterDomain
MANAGER = "slurmk8s"

# The slurm user and group of the Slurm images (Slinky's convention, and our own images').
SLURM_UID = 401
# Where `slurmk8s images build` tags the project's own images unless told otherwise.
PROJECT_REGISTRY = "localhost/slurmk8s"

# Component keys: used in labels, ServiceAccount names and object names.
CONTROLLER = "controller"
ACCOUNTING = "accounting"
DATABASE = "mariadb"
LOGIN = "login"
RESTAPI = "restapi"
WORKER = "worker"
# In the order they start: the database before slurmdbd, slurmdbd before slurmctld registers the
# cluster, slurmctld before slurmd and the clients (the install order, render/order.py, follows it).
COMPONENTS = (DATABASE, ACCOUNTING, CONTROLLER, WORKER, LOGIN, RESTAPI)
SLURM_COMPONENTS = tuple(c for c in COMPONENTS if c != DATABASE)  # those that run a Slurm daemon
# The GitOps Job that applies the account tree: its own label value, so no Service, PodDisruptionBudget
# or NetworkPolicy of a daemon ever selects its pod.
ACCOUNTS = "accounts"
# The GitOps hook Job that replaces slurmd pods drain-first (podside/rollout_core.py); its own label value too.
ROLLOUT = "rollout"
# The GitOps hook Job that refuses an unsupported Slurm release step before a sync (render/k8s/upgradecheck.py).
UPGRADE_CHECK = "upgrade-check"
# The CronJob (and first-fill Job) that keeps each listed user's slurmrestd token Secret fresh (render/k8s/tokens.py).
TOKENS = "tokens"
# The CronJobs that dump the embedded database and restore a dump (render/k8s/dbbackup.py).
DB_BACKUP = "db-backup"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_POOL = "slurmk8s.io/pool"
LABEL_DOMAIN = "slurmk8s.io/topology-domain"  # the leaf domain of a pinned pool segment
LABEL_METRICS = "slurmk8s.io/metrics"  # on the Service a ServiceMonitor selects
LABEL_SHAPE = "slurmk8s.io/shape"  # the side-by-side node shape of a shared slurmd pod
ANNOTATION_CONFIG_HASH = "slurmk8s.io/config-hash"
ANNOTATION_NODE_NAMES = "slurmk8s.io/slurm-nodes"
ANNOTATION_MAX_REPLICAS = "slurmk8s.io/max-replicas"
ANNOTATION_MIN_REPLICAS = "slurmk8s.io/min-replicas"
ANNOTATION_FIRST_NODE = "slurmk8s.io/first-node"  # Slurm node number of pod 0 of a per-leaf StatefulSet
ANNOTATION_MULTUS = "k8s.v1.cni.cncf.io/networks"
ANNOTATION_SLURM_VERSION = "slurmk8s.io/slurm-version"  # the Slurm release a workload runs (ordered upgrades)
# On a GitOps hook object that must run before the sync (Argo CD PreSync, Helm pre-upgrade); others run after.
ANNOTATION_HOOK = "slurmk8s.io/hook"
HOOK_BEFORE_SYNC = "before-sync"
ANNOTATION_GRES = "slurmk8s.io/gres"  # on a GPU pool's pod template: its slurmd Gres= value
LABEL_BUSY = "slurmk8s.io/busy"  # "true" on a slurmd pod while Slurm runs a job on it

# Kinds that run the daemons' pods; with a Job, every kind the bundle gives a pod template.
WORKLOAD_KINDS = ("StatefulSet", "Deployment", "DaemonSet")
POD_TEMPLATE_KINDS = WORKLOAD_KINDS + ("Job",)

# Daemon per component, for app.kubernetes.io/name.
DAEMON = {
    CONTROLLER: "slurmctld",
    ACCOUNTING: "slurmdbd",
    DATABASE: "mariadb",
    WORKER: "slurmd",
    LOGIN: "login",
    RESTAPI: "slurmrestd",
    ACCOUNTS: "sacctmgr",
    ROLLOUT: "rollout",
    UPGRADE_CHECK: "upgrade-check",
    TOKENS: "scontrol-token",
    DB_BACKUP: "mariadb-dump",
}
# The project's images (slurmk8s images build): one per daemon; the accounts Job runs in slurmctld's.
IMAGES = tuple(sorted(set(DAEMON.values()) - {DAEMON[ACCOUNTS], DAEMON[ROLLOUT], DAEMON[UPGRADE_CHECK], DAEMON[TOKENS],
                                                  DAEMON[DB_BACKUP]}))


def image_tag(slurm_version: str, os_name: str) -> str:
    """The default tag of every Slurm image: ``<slurm version>-<os>`` (Slinky's rule, ours too)."""
    return f"{slurm_version}-{os_name}"


def image_ref(registry: str, image: str, tag: str) -> str:
    """``<registry>/<image>:<tag>``; a trailing slash on the registry is dropped."""
    return f"{registry.rstrip('/')}/{image}:{tag}"


def component_name(cluster: str, component: str) -> str:
    """StatefulSet/Deployment/Service/ServiceAccount name of a singleton component."""
    return f"{cluster}-{component}"


def pool_statefulset(cluster: str, pool: str) -> str:
    """StatefulSet (and PodDisruptionBudget) name of a slurmd pool."""
    return f"{cluster}-{pool}"


def segment_statefulset(cluster: str, pool: str, domain: str) -> str:
    """StatefulSet of the slots of a pool that sit in one topology leaf domain."""
    return f"{cluster}-{pool}-{domain}"


def nodes_service(cluster: str) -> str:
    """The one headless Service that governs every pool's StatefulSet.

    One Service (not one per pool) keeps every slurmd pod under a single DNS
    subdomain, so one search domain resolves all node hostnames: Kubernetes
    allows at most 32 search domains and Slurm host lists cannot carry a suffix.
    """
    return f"{cluster}-slurmd"


def pod_name(statefulset: str, ordinal: int) -> str:
    """Pod name (and hostname) of a StatefulSet member."""
    return f"{statefulset}-{ordinal}"


def pod_names(statefulset: str, count: int) -> list[str]:
    """pod_name of members 0..count-1, built at once (10,000 of them for a large profile)."""
    return [f"{statefulset}-{ordinal}" for ordinal in range(count)]


def slurm_node_name(pool: str, ordinal: int) -> str:
    """Slurm NodeName of a pool member: <pool>-<i>."""
    return f"{pool}-{ordinal}"


def slurm_node_range(pool: str, count: int) -> str:
    """Slurm hostlist for ordinals 0..count-1 of a pool."""
    return _range(pool, count)


def slurm_node_span(pool: str, first: int, count: int) -> str:
    """Slurm hostlist for ordinals first..first+count-1 of a pool."""
    return f"{pool}-{first}" if count == 1 else f"{pool}-[{first}-{first + count - 1}]"


def statefulset_hostname_range(statefulset: str, count: int) -> str:
    """Slurm hostlist of the pod hostnames of members 0..count-1 of a StatefulSet."""
    return _range(statefulset, count)


def _range(prefix: str, count: int) -> str:
    return f"{prefix}-0" if count == 1 else f"{prefix}-[0-{count - 1}]"


def service_fqdn(service: str, namespace: str, domain: str = CLUSTER_DOMAIN) -> str:
    """Cluster-wide DNS name of a Service (domain: the cluster's DNS domain, the profile's clusterDomain)."""
    return f"{service}.{namespace}.svc.{domain}"


def pod_dns(pod: str, service: str) -> str:
    """Namespace-relative DNS name of a StatefulSet pod under its governing Service."""
    return f"{pod}.{service}"


def searched_services(cluster: str) -> list[str]:
    """The headless Services whose pods every Slurm pod finds by bare hostname (through search domains)."""
    return [nodes_service(cluster), component_name(cluster, CONTROLLER), login_pods_service(cluster)]


def search_domains(cluster: str, namespace: str, domain: str = CLUSTER_DOMAIN) -> list[str]:
    """DNS search domains every Slurm pod gets, so bare pod hostnames resolve."""
    return [service_fqdn(service, namespace, domain) for service in searched_services(cluster)]


def login_pods_service(cluster: str) -> str:
    """Headless Service governing the login pods (the ssh Service is separate)."""
    return f"{cluster}-login-pods"


def controller_hosts(cluster: str, replicas: int) -> list[tuple[str, str]]:
    """(hostname, address) of each slurmctld: primary first, then the backup."""
    sts = component_name(cluster, CONTROLLER)
    return [(pod_name(sts, i), pod_dns(pod_name(sts, i), sts)) for i in range(replicas)]


def controller_pod(cluster: str) -> str:
    """The primary slurmctld pod, where `sinfo`/`scontrol` run."""
    return pod_name(component_name(cluster, CONTROLLER), 0)


def accounting_host(cluster: str) -> str:
    """Hostname of the slurmdbd pod (DbdHost must equal it)."""
    return pod_name(component_name(cluster, ACCOUNTING), 0)


def config_map(cluster: str) -> str:
    """ConfigMap holding slurm.conf and its companions, read by every Slurm pod."""
    return f"{cluster}-slurm-config"


def slurmdbd_config_map(cluster: str) -> str:
    """ConfigMap holding slurmdbd.conf without its password (read by slurmdbd only)."""
    return f"{cluster}-slurmdbd-config"


def login_config_map(cluster: str) -> str:
    """ConfigMap holding the login pod's sshd config and authorized keys."""
    return f"{cluster}-login-config"


def identity_config_map(cluster: str) -> str:
    """ConfigMap with the declared users and groups (passwd/group lines) and their ssh keys."""
    return f"{cluster}-identity"


def shared_volume_claim(cluster: str, volume: str) -> str:
    """The claim a profile volume with a `claim` source renders."""
    return f"{cluster}-{volume}"


def controller_statesave_claim(cluster: str) -> str:
    """The ReadWriteMany claim a primary and a backup slurmctld share for StateSaveLocation."""
    return f"{component_name(cluster, CONTROLLER)}-statesave"


def member_claim_prefix(template: str, statefulset: str) -> str:
    """What the StatefulSet controller's claims from one claim template start with: <template>-<sts>-."""
    return f"{template}-{statefulset}-"


def member_claim(template: str, statefulset: str, ordinal: int) -> str:
    """The claim the StatefulSet controller makes from a claim template for one member: <template>-<pod>."""
    return f"{member_claim_prefix(template, statefulset)}{ordinal}"


def power_config_map(cluster: str) -> str:
    """ConfigMap with the resume/suspend programs of elastic pools (controller only)."""
    return f"{cluster}-power"


def auth_secret(cluster: str) -> str:
    """Secret with the shared auth key (slurm.key or munge.key); created by `up`."""
    return f"{cluster}-auth-key"


def ssh_host_keys_secret(cluster: str) -> str:
    """Secret with the login pods' ssh host key, shared by every replica; created once by `up`."""
    return f"{cluster}-ssh-host-keys"


def jwt_secret(cluster: str) -> str:
    """Secret with the JWT signing key for slurmrestd; created by `up`."""
    return f"{cluster}-jwt-key"


def token_secret(cluster: str, user: str) -> str:
    """Secret holding a slurmrestd token of one user (spec.restapi.tokens), refreshed by the tokens CronJob.
    `_` is not allowed in object names: it becomes `-` (profile/restapi.py refuses two users who then collide)."""
    return f"{cluster}-token-{user.replace('_', '-')}"


def tokens_job(cluster: str, digest: str) -> str:
    """The Job that fills the token Secrets at once on apply; named by its content, as accounts_job."""
    return f"{cluster}-tokens-{digest[:8]}"


def db_password_secret(cluster: str) -> str:
    """Secret with the embedded MariaDB's slurm password; created by `up`."""
    return f"{cluster}-db-password"


def accounts_job(cluster: str, digest: str) -> str:
    """The Job applying the account tree; named by its content, so a changed tree is a new Job (a Job's
    pod template cannot be changed in place)."""
    return f"{cluster}-accounts-{digest[:8]}"


def metrics_service(cluster: str) -> str:
    """The ClusterIP Service in front of slurmctld's OpenMetrics endpoints (spec.metrics)."""
    return f"{cluster}-metrics"


def health_config_map(cluster: str) -> str:
    """ConfigMap holding each pool's HealthCheckProgram (spec.healthChecks)."""
    return f"{cluster}-health"


def dashboard_config_map(cluster: str) -> str:
    """ConfigMap holding the Grafana dashboard (spec.metrics.dashboard)."""
    return f"{cluster}-dashboard"


def applyset_parent(cluster: str) -> str:
    """The ConfigMap that is the ApplySet parent of everything `up` applies for a cluster (kube/applyset.py)."""
    return f"{cluster}-applyset"


def network_policy(cluster: str, purpose: str) -> str:
    """NetworkPolicy name for one purpose (slurm, database, login, ...)."""
    return f"{cluster}-{purpose}"


def role(cluster: str, purpose: str) -> str:
    """Role/RoleBinding name for one purpose."""
    return f"{cluster}-{purpose}"


def cluster_scope(namespace: str) -> str:
    """The prefix of a cluster-scoped object's name: the namespace keeps two clusters of one name apart."""
    return f"slurmk8s-{namespace}"


def cluster_scoped(namespace: str, cluster: str, purpose: str) -> str:
    """The name of a cluster's cluster-scoped object: a ClusterRole and its binding, an admission policy and its binding."""
    return f"{cluster_scope(namespace)}-{cluster}-{purpose}"


def selector_labels(cluster: str, component: str, pool: str | None = None) -> dict[str, str]:
    """Labels that select a component's pods (stable: used in selectors)."""
    labels = {LABEL_INSTANCE: cluster, LABEL_COMPONENT: component}
    if pool is not None:
        labels[LABEL_POOL] = pool
    return labels


def object_labels(cluster: str, component: str | None = None, pool: str | None = None) -> dict[str, str]:
    """Labels on every object we render; `up` prunes only objects carrying them."""
    labels = {LABEL_INSTANCE: cluster, LABEL_PART_OF: "slurm", LABEL_MANAGED_BY: MANAGER}
    if component is not None:
        labels[LABEL_COMPONENT] = component
        labels[LABEL_NAME] = DAEMON[component]
    if pool is not None:
        labels[LABEL_POOL] = pool
    return labels


def upgrade_check_job(cluster: str, digest: str) -> str:
    """The GitOps hook Job checking the Slurm release step; named by what it checks."""
    return f"{cluster}-upgrade-check-{digest[:8]}"


def rollout_job(cluster: str, digest: str) -> str:
    """The GitOps hook Job running a rollout; named by the pod templates it rolls to, so each change is a new Job."""
    return f"{cluster}-rollout-{digest[:8]}"


def elastic_range(obj: dict) -> tuple[int, int] | None:
    """(minReplicas, maxReplicas) of an elastic pool's StatefulSet (min < max), from its annotations; else None.

    Slurm owns such a StatefulSet's replicas (power saving): `up` keeps them, within this range.
    """
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    if obj.get("kind") != "StatefulSet" or ANNOTATION_MAX_REPLICAS not in notes:
        return None
    low, high = int(notes.get(ANNOTATION_MIN_REPLICAS, "0")), int(notes[ANNOTATION_MAX_REPLICAS])
    return (low, high) if low < high else None
