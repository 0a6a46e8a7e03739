"""The Argo CD output: the kustomize tree with sync waves, an Application, an ApplicationSet and a CMP plugin.

Waves make Argo CD bring the cluster up in the order Slurm needs: MariaDB, then slurmdbd, then
slurmctld, then the pools and login (each wave waits for the previous one to be healthy), and a
KEDA ScaledObject in the wave after the StatefulSet it scales (KEDA reports it Degraded, and Argo CD
would stall the sync, while its target does not exist).
"""

from __future__ import annotations

import json

from slurmk8s import naming
from slurmk8s.output.kustomize import kustomize_tree
from slurmk8s.output.yamlout import dump
from slurmk8s.render import Bundle
from slurmk8s.render.order import INSTALL_ORDER, stage_of

ANNOTATION_SYNC_WAVE = "argocd.argoproj.io/sync-wave"
ARGOCD_NAMESPACE = "argocd"
IN_CLUSTER = "https://kubernetes.default.svc"
PLUGIN_NAME = "slurmk8s"
PLUGIN_VERSION = "v1"
APP_PARAMS_FILE = "slurmk8s-app.json"  # what the ApplicationSet's git files generator reads per cluster

SYNC_OPTIONS = ["ServerSideApply=true", "CreateNamespace=true", "RespectIgnoreDifferences=true"]
# A failed sync (a webhook not ready, a CRD still installing) is retried instead of left failed.
SYNC_RETRY = {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}}
# Diff as the API server would apply (defaults, webhooks, quantities normalized): no false OutOfSync.
ANNOTATION_COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
COMPARE_OPTIONS = "ServerSideDiff=true"
# Data stays when it leaves the tree or the Application is deleted: the Namespace (it holds the
# Secrets and claims) and the PVCs, as `slurmk8s down` keeps them.
ANNOTATION_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
# The account tree's Job runs after every sync that reached a healthy cluster, replacing the last run.
HOOK_ANNOTATIONS = {"argocd.argoproj.io/hook": "PostSync", "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation"}
KEEP_DATA = "Prune=false,Delete=false"
KEPT_KINDS = ("Namespace", "PersistentVolumeClaim")
# jq selecting .spec.replicas of StatefulSets whose annotations say min < max (elastic pools), for the ApplicationSet
# whose clusters' pool names are not known in advance. Argo CD evaluates it as del(<expression>).
ELASTIC_REPLICAS_JQ = (
    f'select(.metadata.annotations["{naming.ANNOTATION_MAX_REPLICAS}"] != null and '
    f'((.metadata.annotations["{naming.ANNOTATION_MIN_REPLICAS}"] // "0" | tonumber) < '
    f'(.metadata.annotations["{naming.ANNOTATION_MAX_REPLICAS}"] | tonumber))) | .spec.replicas'
)


def sync_wave(obj: dict, objects: list[dict] | tuple[dict, ...] = ()) -> int:
    """The Argo CD sync wave of an object (its stage's in render/order.py); a ScaledObject's is its target's plus one."""
    if obj["kind"] == "ScaledObject":
        target = obj["spec"]["scaleTargetRef"]
        found = [o for o in objects if o["kind"] == target.get("kind") and o["metadata"]["name"] == target["name"]]
        return (sync_wave(found[0]) if found else max(s.wave for s in INSTALL_ORDER)) + 1
    return INSTALL_ORDER[stage_of(obj)].wave


def with_sync_wave(obj: dict, objects: list[dict] | tuple[dict, ...] = ()) -> dict:
    """A copy of obj with its sync-wave annotation, and the keep-data sync options where they apply (obj is not changed)."""
    annotations = {**obj["metadata"].get("annotations", {}), ANNOTATION_SYNC_WAVE: str(sync_wave(obj, objects))}
    if obj["kind"] in KEPT_KINDS:
        annotations[ANNOTATION_SYNC_OPTIONS] = KEEP_DATA
    return {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}


def waved_objects(bundle: Bundle) -> list[dict]:
    """The bundle's objects in apply order, each with its sync wave, then its hooks as PostSync hooks."""
    return [with_sync_wave(o, bundle.objects) for o in bundle.objects] + post_sync_hooks(bundle)


def post_sync_hooks(bundle: Bundle) -> list[dict]:
    """The bundle's hooks (the account tree's Job) as Argo CD PostSync hooks."""
    return [{**h, "metadata": {**h["metadata"], "annotations": dict(sorted(
        {**h["metadata"].get("annotations", {}), **HOOK_ANNOTATIONS}.items()))}} for h in bundle.hooks]


def elastic_statefulsets(objects: list[dict] | tuple[dict, ...]) -> list[str]:
    """Names of the pool StatefulSets whose replicas Slurm changes (annotated min < max)."""
    names = []
    for o in objects:
        ann = o["metadata"].get("annotations", {})
        if o["kind"] == "StatefulSet" and naming.ANNOTATION_MAX_REPLICAS in ann \
                and int(ann.get(naming.ANNOTATION_MIN_REPLICAS, "0")) < int(ann[naming.ANNOTATION_MAX_REPLICAS]):
            names.append(o["metadata"]["name"])
    return names


def _sync_policy() -> dict:
    # No automated prune: removing a pool or the database from a profile must not delete data unasked.
    return {"automated": {"prune": False, "selfHeal": True}, "syncOptions": list(SYNC_OPTIONS),
            "retry": json.loads(json.dumps(SYNC_RETRY))}


def build_application(bundle: Bundle, repo_url: str, revision: str, path: str) -> dict:
    """The Argo CD Application syncing one rendered tree, ignoring live replicas of elastic pools."""
    spec: dict = {
        "project": "default",
        "source": {"repoURL": repo_url, "targetRevision": revision, "path": path},
        "destination": {"server": IN_CLUSTER, "namespace": bundle.namespace},
        "syncPolicy": _sync_policy(),
    }
    elastic = elastic_statefulsets(bundle.objects)
    if elastic:
        spec["ignoreDifferences"] = [{"group": "apps", "kind": "StatefulSet", "name": n, "namespace": bundle.namespace,
                                      "jsonPointers": ["/spec/replicas"]} for n in elastic]
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": bundle.cluster, "namespace": ARGOCD_NAMESPACE,
                         "annotations": {ANNOTATION_COMPARE_OPTIONS: COMPARE_OPTIONS}}, "spec": spec}


def build_applicationset(repo_url: str, revision: str, clusters_root: str) -> dict:
    """One Application per rendered tree under clusters_root (each found by its slurmk8s-app.json)."""
    pattern = f"{clusters_root}/*/{APP_PARAMS_FILE}" if clusters_root not in ("", ".") else f"*/{APP_PARAMS_FILE}"
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
        "metadata": {"name": "slurmk8s-clusters", "namespace": ARGOCD_NAMESPACE},
        "spec": {
            "goTemplate": True,
            "goTemplateOptions": ["missingkey=error"],
            "generators": [{"git": {"repoURL": repo_url, "revision": revision, "files": [{"path": pattern}]}}],
            "template": {
                "metadata": {"name": "{{.cluster}}", "annotations": {ANNOTATION_COMPARE_OPTIONS: COMPARE_OPTIONS}},
                "spec": {
                    "project": "default",
                    "source": {"repoURL": repo_url, "targetRevision": revision, "path": "{{.path.path}}"},
                    "destination": {"server": IN_CLUSTER, "namespace": "{{.namespace}}"},
                    "syncPolicy": _sync_policy(),
                    "ignoreDifferences": [{"group": "apps", "kind": "StatefulSet",
                                           "jqPathExpressions": [ELASTIC_REPLICAS_JQ]}],
                },
            },
        },
    }


def build_plugin() -> dict:
    """The Config Management Plugin (sidecar config) that lets Argo CD render profiles itself."""
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
        "metadata": {"name": PLUGIN_NAME},
        "spec": {
            "version": PLUGIN_VERSION,
            # Argo CD passes Application env entries prefixed ARGOCD_ENV_.
            "generate": {"command": ["sh", "-c"],
                         "args": ['exec slurmk8s render "${ARGOCD_ENV_SLURMK8S_PROFILE:-profile.yaml}" -o - --format argocd']},
            "discover": {"find": {"command": ["sh", "-c",
                                              "grep -l -E '^kind: *ClusterProfile' ./*.yaml ./*.yml 2>/dev/null || true"]}},
        },
    }


def argocd_tree(bundle: Bundle, repo_url: str, revision: str, path: str) -> dict[str, str]:
    """Relative path -> content: kustomize tree with waves, argocd/{application,applicationset,plugin}.yaml."""
    tree = kustomize_tree(bundle, [with_sync_wave(o, bundle.objects) for o in bundle.objects], post_sync_hooks(bundle))
    root = path.rsplit("/", 1)[0] if "/" in path else "."
    tree[APP_PARAMS_FILE] = json.dumps({"cluster": bundle.cluster, "namespace": bundle.namespace}, indent=2) + "\n"
    tree["argocd/application.yaml"] = dump(build_application(bundle, repo_url, revision, path))
    tree["argocd/applicationset.yaml"] = dump(build_applicationset(repo_url, revision, root))
    tree["argocd/plugin.yaml"] = dump(build_plugin())
    return dict(sorted(tree.items()))
