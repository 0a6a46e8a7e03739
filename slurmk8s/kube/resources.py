"""Where each kind lives in the API: a table for the kinds we render, discovery for the rest."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from slurmk8s.errors import ClusterError
from slurmk8s.kube.client import Kube, KubeApiError, Obj


@dataclass(frozen=True)
class Resource:
    """An API resource: group/version prefix, plural, and whether it lives in a namespace."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection(self, namespace: str | None) -> str:
        """URL path of the collection (in namespace, when the resource is namespaced)."""
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def item(self, namespace: str | None, name: str) -> str:
        """URL path of one object."""
        return f"{self.collection(namespace)}/{name}"


_BUILTIN = [
    Resource("v1", "Namespace", "namespaces", False),
    Resource("v1", "ServiceAccount", "serviceaccounts", True),
    Resource("v1", "Secret", "secrets", True),
    Resource("v1", "ConfigMap", "configmaps", True),
    Resource("v1", "Service", "services", True),
    Resource("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
    Resource("v1", "Pod", "pods", True),
    Resource("v1", "Event", "events", True),
    Resource("rbac.authorization.k8s.io/v1", "Role", "roles", True),
    Resource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
    Resource("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    Resource("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
    Resource("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True),
    Resource("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    Resource("apps/v1", "StatefulSet", "statefulsets", True),
    Resource("apps/v1", "Deployment", "deployments", True),
    Resource("apps/v1", "DaemonSet", "daemonsets", True),
    Resource("batch/v1", "Job", "jobs", True),
    Resource("batch/v1", "CronJob", "cronjobs", True),
]
BUILTIN = {(r.api_version, r.kind): r for r in _BUILTIN}

# Kinds `up` may prune and `down` deletes: what we render into the namespace, minus data.
# Never Namespace (it holds the data), Secrets or PVCs (keys and state).
PRUNABLE = tuple(BUILTIN[k] for k in [
    ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"), ("v1", "Service"), ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"), ("rbac.authorization.k8s.io/v1", "Role"),
    ("v1", "ServiceAccount"),
])


# Built-in kinds a bundle may hold that older clusters do not serve: the minor that first serves each, and the
# profile setting that leaves it out. Looked up by discovery, not the table above, so an older cluster is
# refused before any write.
_ADMISSION_POLICY = (30, "spec.admissionPolicy.enabled: false")
NEWER_BUILTIN = {("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): _ADMISSION_POLICY,
                 ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): _ADMISSION_POLICY}


def builtin(api_version: str, kind: str) -> Resource:
    """A kind from the built-in table (KeyError for anything else)."""
    return BUILTIN[(api_version, kind)]


class Resolver:
    """Maps objects to Resources; kinds outside the table are looked up once via discovery."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self._found: dict[tuple[str, str], Resource] = dict(BUILTIN)
        self._lock = threading.Lock()

    def of(self, obj: Obj) -> Resource:
        """The Resource of a rendered object."""
        key = (obj["apiVersion"], obj["kind"])
        with self._lock:
            if key in self._found:
                return self._found[key]
        found = self._discover(*key)
        with self._lock:
            self._found[key] = found
        return found

    def of_group_kind(self, group: str, kind: str) -> Resource | None:
        """The served resource of a group kind, at the group's preferred version (None when not served)."""
        with self._lock:
            for (api_version, known_kind), resource in self._found.items():
                if known_kind == kind and (api_version.rsplit("/", 1)[0] if "/" in api_version else "") == group:
                    return resource
        version: str | None
        if not group:
            version = "v1"
        else:
            found = self.kube.request("GET", f"/apis/{group}", what=f"discover {group}", tolerate=(404,))
            version = (found.body.get("preferredVersion") or {}).get("groupVersion") if found.status == 200 else None
            if not isinstance(version, str):
                return None
        try:
            resource = self._discover(version, kind)
        except ClusterError:
            return None
        with self._lock:
            self._found[(version, kind)] = resource
        return resource

    def _discover(self, api_version: str, kind: str) -> Resource:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        what = f"discover {api_version} {kind}"
        listing = self.kube.request("GET", path, what=what, tolerate=(404,))
        if listing.status == 200 and listing.body.get("kind") != "APIResourceList":  # a server answering `{}`
            raise KubeApiError(f"{what}: malformed reply from the Kubernetes API: expected an APIResourceList, got "
                               f"kind {listing.body.get('kind')!r}", listing.status, json.dumps(listing.body)[:2000])
        resources = listing.body.get("resources") if listing.status == 200 else []
        for r in resources if isinstance(resources, list) else []:
            if isinstance(r, dict) and r.get("kind") == kind and isinstance(r.get("name"), str) and "/" not in r["name"]:
                return Resource(api_version, kind, r["name"], bool(r.get("namespaced")))
        if (api_version, kind) in NEWER_BUILTIN:
            minor, setting = NEWER_BUILTIN[(api_version, kind)]
            raise ClusterError(f"the cluster does not serve {kind} ({api_version}): Kubernetes 1.{minor} or later "
                               f"serves it; on an older cluster set {setting}")
        raise ClusterError(f"the cluster does not serve {kind} ({api_version}); is its CustomResourceDefinition installed?")
