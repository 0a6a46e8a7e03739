"""One inventory of everything `up` applies: the ApplySet convention of `kubectl apply --prune` (KEP-3659).

The parent is a ConfigMap `<cluster>-applyset` in the cluster's namespace. It carries the label
applyset.kubernetes.io/id (applyset-<base64url(sha256(<name>.<namespace>.ConfigMap.))>-v1), the
annotation applyset.kubernetes.io/tooling (slurmk8s/<version>) and the annotation
applyset.kubernetes.io/contains-group-kinds listing every kind of its members (Kind.group, sorted).
Every object `up` applies, and every Secret it creates, carries applyset.kubernetes.io/part-of: <id>.
So prune and `down` find every kind that was ever applied, the KEDA ScaledObject included, and
`up` compares each object with its earlier self whatever its kind.

As kubectl does: before the first write the parent lists the union of the old and new kinds (a
killed `up` leaves nothing it cannot find again); after the prune it lists exactly what is left.
Objects slurmk8s applied before it used ApplySets (our labels and field manager, no part-of label)
count as members, so the first `up` after an upgrade prunes them too.
Reference: https://github.com/kubernetes/enhancements/tree/master/keps/sig-cli/3659-kubectl-apply-prune
"""

from __future__ import annotations

import base64
import copy
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

import slurmk8s
from slurmk8s import naming
from slurmk8s.errors import ClusterError
from slurmk8s.kube.client import Kube, Obj
from slurmk8s.kube.ownership import FIELD_MANAGER, LABEL_PART_OF, key_of, managed_by_us, owned_selector
from slurmk8s.kube.resources import BUILTIN, PRUNABLE, Resolver, Resource, builtin
from slurmk8s.render import Bundle

LABEL_ID = "applyset.kubernetes.io/id"
ANNOTATION_TOOLING = "applyset.kubernetes.io/tooling"
ANNOTATION_GROUP_KINDS = "applyset.kubernetes.io/contains-group-kinds"
TOOLING = "slurmk8s"
PARENT_API_VERSION, PARENT_KIND = "v1", "ConfigMap"
# Never pruned, and deleted by `down` only with --delete-data: the Namespace holds everything,
# Secrets hold the keys, claims the Slurm state and the accounting database.
DATA_KINDS = frozenset({"Namespace", "Secret", "PersistentVolumeClaim"})
# What slurmk8s applied before it kept an ApplySet: still listed, so nothing applied then is left behind.
LEGACY_KINDS = tuple(PRUNABLE) + (builtin("v1", "Namespace"),)


def applyset_id(name: str, namespace: str, kind: str = PARENT_KIND, group: str = "") -> str:
    """The KEP's ID: applyset-<base64url(sha256(<name>.<namespace>.<kind>.<group>)), unpadded>-v1."""
    digest = hashlib.sha256(".".join((name, namespace, kind, group)).encode()).digest()
    return f"applyset-{base64.urlsafe_b64encode(digest).decode().rstrip('=')}-v1"


def group_kind(api_version: str, kind: str) -> str:
    """`Kind.group`, or `Kind` for the core group, as contains-group-kinds spells it."""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    return f"{kind}.{group}" if group else kind


def tooling_version() -> str:
    """slurmk8s/<version>, the value of the tooling annotation."""
    try:
        version = metadata.version("slurmk8s")
    except metadata.PackageNotFoundError:
        version = slurmk8s.__version__
    return f"{TOOLING}/v{version}"


def with_membership(obj: Obj, set_id: str) -> Obj:
    """A copy of obj labelled as a member of the ApplySet (obj is not changed)."""
    out = copy.deepcopy(obj)
    out["metadata"]["labels"] = {**out["metadata"].get("labels", {}), LABEL_PART_OF: set_id}
    return out


class ApplySet:
    """The ApplySet of one bundle: its parent ConfigMap and the members found in the cluster."""

    def __init__(self, kube: Kube, bundle: Bundle, resolver: Resolver):
        self.kube = kube
        self.bundle = bundle
        self.resolver = resolver
        self.name = naming.applyset_parent(bundle.cluster)
        self.id = applyset_id(self.name, bundle.namespace)
        self.parent: Obj | None = None
        self._lock = threading.Lock()

    @property
    def _parent_resource(self) -> Resource:
        return builtin(PARENT_API_VERSION, PARENT_KIND)

    def read_parent(self) -> Obj | None:
        """The parent as it is now (None when absent); ClusterError when another tool or set owns that name."""
        found = self.kube.request("GET", self._parent_resource.item(self.bundle.namespace, self.name),
                                  what=f"read {PARENT_KIND}/{self.name}", tolerate=(404,))
        if found.status == 404:
            self.parent = None
            return None
        meta = found.object_of(PARENT_KIND, self.name)["metadata"]
        labels, annotations = meta.get("labels"), meta.get("annotations")
        labels = labels if isinstance(labels, dict) else {}
        annotations = annotations if isinstance(annotations, dict) else {}
        tooling = str(annotations.get(ANNOTATION_TOOLING, ""))
        if labels.get(LABEL_ID) != self.id or not tooling.startswith(f"{TOOLING}/"):
            raise ClusterError(f"{PARENT_KIND}/{self.name} in namespace {self.bundle.namespace} is not the ApplySet "
                               f"parent slurmk8s keeps for cluster {self.bundle.cluster} (id {labels.get(LABEL_ID) or '-'}, "
                               f"tooling {tooling or '-'}); move it away, or put the cluster in another namespace")
        self.parent = found.body
        return found.body

    def recorded_kinds(self) -> set[str]:
        """The group kinds the parent lists (none before the first `up`)."""
        annotations = ((self.parent or {}).get("metadata") or {}).get("annotations") or {}
        return {gk for gk in str(annotations.get(ANNOTATION_GROUP_KINDS, "")).split(",") if gk}

    def resources(self, group_kinds: set[str]) -> list[Resource]:
        """The served resources of group kinds (a kind whose CRD is gone has no members left: skipped)."""
        found: dict[str, Resource] = {}
        for obj in self.bundle.objects:
            gk = group_kind(obj["apiVersion"], obj["kind"])
            if gk in group_kinds and gk not in found:
                found[gk] = self.resolver.of(obj)
        for resource in BUILTIN.values():
            gk = group_kind(resource.api_version, resource.kind)
            if gk in group_kinds:
                found.setdefault(gk, resource)
        for gk in sorted(group_kinds - set(found)):
            kind, _, group = gk.partition(".")
            served = self.resolver.of_group_kind(group, kind)
            if served is not None:
                found[gk] = served
        return sorted(found.values(), key=lambda r: (r.api_version, r.kind))

    def members(self, pool: ThreadPoolExecutor, group_kinds: set[str]) -> dict[tuple[str, str], Obj]:
        """Every member in the cluster by (kind, name): our labels and field manager, and this set's
        part-of label (or none: applied before slurmk8s kept an ApplySet)."""
        ns, cluster = self.bundle.namespace, self.bundle.cluster
        resources = {(r.api_version, r.kind): r for r in self.resources(group_kinds)}
        for r in LEGACY_KINDS:
            resources.setdefault((r.api_version, r.kind), r)

        def list_kind(resource: Resource) -> list[Obj]:
            listing = self.kube.request("GET", resource.collection(ns), what=f"list {resource.plural} in {ns}",
                                        query=[("labelSelector", owned_selector(cluster))])
            items = listing.items()
            for item in items:  # list items come without kind and apiVersion
                item.setdefault("kind", resource.kind)
                item.setdefault("apiVersion", resource.api_version)
            return items

        found: dict[tuple[str, str], Obj] = {}
        for items in pool.map(list_kind, sorted(resources.values(), key=lambda r: (r.api_version, r.kind))):
            for item in items:
                part_of = ((item.get("metadata") or {}).get("labels") or {}).get(LABEL_PART_OF)
                if part_of in (None, self.id) and managed_by_us(item, cluster):
                    found[key_of(item)] = item
        found.pop((PARENT_KIND, self.name), None)  # the parent is no member of itself
        return found

    def write_parent(self, group_kinds: set[str]) -> None:
        """Create or update the parent, listing group_kinds (server-side apply, our field manager)."""
        parent = {
            "apiVersion": PARENT_API_VERSION, "kind": PARENT_KIND,
            "metadata": {
                "name": self.name, "namespace": self.bundle.namespace,
                "labels": {**naming.object_labels(self.bundle.cluster), LABEL_ID: self.id},
                "annotations": {ANNOTATION_TOOLING: tooling_version(),
                                ANNOTATION_GROUP_KINDS: ",".join(sorted(group_kinds))},
            },
        }
        result = self.kube.request("PATCH", self._parent_resource.item(self.bundle.namespace, self.name),
                                   what=f"apply {PARENT_KIND}/{self.name}", query=[("fieldManager", FIELD_MANAGER)],
                                   body=parent, content_type="application/apply-patch+yaml")
        self.parent = result.object_of(PARENT_KIND, self.name)

    def delete_parent(self, dry_run: bool = False) -> None:
        """Remove the parent (`down --delete-data`: nothing of the set is left)."""
        query = [("dryRun", "All")] if dry_run else []
        self.kube.request("DELETE", self._parent_resource.item(self.bundle.namespace, self.name),
                          what=f"delete {PARENT_KIND}/{self.name}", query=query, tolerate=(404,))


def kinds_of(objects) -> set[str]:
    """The group kinds of objects."""
    return {group_kind(o.get("apiVersion", "v1"), o["kind"]) for o in objects}


def bundle_kinds(bundle: Bundle) -> set[str]:
    """The group kinds `up` applies for a bundle: its objects, and Secrets when it creates any."""
    return kinds_of(bundle.objects) | ({"Secret"} if bundle.secrets else set())


__all__ = ["ApplySet", "DATA_KINDS", "LABEL_PART_OF", "applyset_id", "bundle_kinds", "group_kind", "kinds_of",
           "with_membership"]
