"""`down`: delete our workloads and their plumbing; PVCs and Secrets only when asked.

What to delete is the ApplySet inventory `up` keeps (kube/applyset.py): every kind ever applied,
the KEDA ScaledObject included. The parent stays while data it lists stays (the Namespace,
PVCs, Secrets), and goes with --delete-data.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from slurmk8s import naming
from slurmk8s.errors import ClusterError
from slurmk8s.kube.apply import Change, Plan, foreign_objects
from slurmk8s.kube.applyset import DATA_KINDS, LABEL_PART_OF, ApplySet, bundle_kinds, kinds_of
from slurmk8s.kube.client import Kube, Obj
from slurmk8s.kube.ownership import key_of, managed_by_us, owned_selector, owner_of
from slurmk8s.kube.resources import Resolver, Resource, builtin
from slurmk8s.kube.stages import STAGE_NAMES, object_ref, stage_of
from slurmk8s.kube.wait import list_pods
from slurmk8s.render import Bundle

DELETED, WOULD_DELETE, ABSENT = "deleted", "would delete", "absent"
FINISHED_PHASES = ("Succeeded", "Failed")  # a pod in these holds nothing and never terminates by itself


def claim_name_patterns(bundle: Bundle) -> list[re.Pattern]:
    """Names the StatefulSet controller gives claims from our templates: <template>-<sts>-<ordinal>."""
    patterns = []
    for sts in bundle.of_kind("StatefulSet"):
        for template in sts["spec"].get("volumeClaimTemplates") or []:
            prefix = naming.member_claim_prefix(template["metadata"]["name"], sts["metadata"]["name"])
            patterns.append(re.compile(re.escape(prefix) + r"[0-9]+$"))
    return patterns


class Teardown:
    """Finds and deletes a cluster's objects in reverse apply order."""

    def __init__(self, kube: Kube, bundle: Bundle, *, workers: int = 8,
                 progress: Callable[[str], None] = lambda line: None):
        self.kube = kube
        self.bundle = bundle
        self.workers = max(1, workers)
        self.progress = progress
        self.resolver = Resolver(kube)
        self.applyset = ApplySet(kube, bundle, self.resolver)

    def _list(self, resource: Resource, selector: str) -> list[Obj]:
        listing = self.kube.request("GET", resource.collection(self.bundle.namespace),
                                    what=f"list {resource.plural} in {self.bundle.namespace}",
                                    query=[("labelSelector", selector)])
        items = listing.items()
        for item in items:
            item.setdefault("kind", resource.kind)
        return items

    def workloads_and_plumbing(self) -> list[Obj]:
        """Every member of the inventory (any kind), except Namespace, Secrets and PVCs."""
        self.applyset.read_parent()
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            members = self.applyset.members(pool, self.applyset.recorded_kinds() | bundle_kinds(self.bundle))
        found = [o for key, o in members.items() if key[0] not in DATA_KINDS]
        return sorted(found, key=lambda o: (-stage_of(o), key_of(o)))

    def namespace_exists(self) -> bool:
        """Whether the cluster's Namespace is there at all (what `down` says it kept)."""
        found = self.kube.request("GET", builtin("v1", "Namespace").item(None, self.bundle.namespace),
                                  what=f"read Namespace/{self.bundle.namespace}", tolerate=(404,))
        return found.status == 200

    def data(self) -> tuple[list[Obj], list[Obj]]:
        """(ours, not ours): Secrets we created and PVCs of our StatefulSets, vs same-cluster data we leave."""
        cluster = self.bundle.cluster
        secrets = self._list(builtin("v1", "Secret"), owned_selector(cluster))
        claims = self._list(builtin("v1", "PersistentVolumeClaim"), f"{naming.LABEL_INSTANCE}={cluster}")
        patterns = claim_name_patterns(self.bundle)
        ours: list[Obj] = []
        theirs: list[Obj] = []
        for s in secrets:
            (ours if managed_by_us(s, cluster) else theirs).append(s)
        for c in claims:
            name = c["metadata"]["name"]
            (ours if managed_by_us(c, cluster) or any(p.match(name) for p in patterns) else theirs).append(c)
        return ours, theirs

    def delete(self, objects: list[Obj], dry_run: bool = False) -> list[Change]:
        """Delete objects stage by stage, workloads first; objects already gone count as absent."""
        by_stage: dict[int, list[Obj]] = {}
        for obj in objects:
            by_stage.setdefault(stage_of(obj), []).append(obj)
        changes: list[Change] = []
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="delete") as pool:
            for stage in sorted(by_stage, reverse=True):
                results = list(pool.map(lambda o: self._delete_one(o, dry_run, STAGE_NAMES[stage]), by_stage[stage]))
                for change in results:
                    self.progress(f"  {change.action:<12} {change.ref}")
                changes += results
        return changes

    def _delete_one(self, obj: Obj, dry_run: bool, stage: str) -> Change:
        resource = self.resolver.of({"apiVersion": obj.get("apiVersion", "v1"), "kind": obj["kind"]})
        query = [("propagationPolicy", "Background")] + ([("dryRun", "All")] if dry_run else [])
        uid = obj["metadata"].get("uid")
        # The object we listed (and checked is ours), not whatever carries its name by the time we delete.
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        result = self.kube.request("DELETE", resource.item(self.bundle.namespace, obj["metadata"]["name"]),
                                   what=f"delete {object_ref(obj)}", query=query, body=body, tolerate=(404,))
        done = WOULD_DELETE if dry_run else DELETED
        return Change(object_ref(obj), ABSENT if result.status == 404 else done, stage)

    def wait_for_pods_gone(self, timeout: float, interval: float = 2.0,
                           clock: Callable[[], float] = time.monotonic,
                           sleep: Callable[[float], None] = time.sleep) -> None:
        """Block until no pod of the cluster is left running (they terminate gracefully after the delete).

        A finished pod (a hook Job's, Succeeded or Failed) holds nothing and never terminates by itself:
        it is not waited for. Its Job is a GitOps tool's, not in the inventory `down` deletes.
        """
        deadline = clock() + timeout
        last = -1
        while True:
            pods = [p for p in list_pods(self.kube, self.bundle)
                    if (p.get("status") or {}).get("phase") not in FINISHED_PHASES]
            if not pods:
                return
            if len(pods) != last:
                self.progress(f"waiting for {len(pods)} pod(s) to terminate")
                last = len(pods)
            if clock() >= deadline:
                names = ", ".join(p["metadata"]["name"] for p in pods[:5])
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for pods to terminate: {names}")
            sleep(interval)


def tear_down(kube: Kube, bundle: Bundle, *, delete_data: bool, wait_timeout: float | None = 300,
              dry_run: bool = False, workers: int = 8,
              progress: Callable[[str], None] = lambda line: None) -> tuple[Plan, list[str]]:
    """Delete the cluster's objects (and its data when asked); returns what was done and what was kept."""
    td = Teardown(kube, bundle, workers=workers, progress=progress)
    doomed = td.workloads_and_plumbing()
    ours, theirs = td.data()
    with ThreadPoolExecutor(max_workers=td.workers) as pool:
        # Only objects labelled for this cluster are ever deleted; same-named ones of another are said to stay.
        foreign = foreign_objects(kube, bundle, Resolver(kube), pool, skip_unserved=True)
    kept = [f"Namespace/{bundle.namespace}"] if td.namespace_exists() else []  # not said of one that is not there
    kept += [f"{object_ref(o)} (belongs to cluster {owner_of(o) or '?'})" for o in foreign]
    if delete_data:
        doomed += sorted(ours, key=key_of)
        kept += [f"{object_ref(o)} (not created by slurmk8s)" for o in theirs]
    else:
        kept += [object_ref(o) for o in sorted(ours, key=key_of)]
    changes = td.delete(doomed, dry_run=dry_run)
    if td.applyset.parent is not None:
        if delete_data:
            td.applyset.delete_parent(dry_run=dry_run)  # nothing of the set is left
        elif not dry_run:  # the inventory now lists what stays: the Namespace, claims and Secrets
            members = [o for o in ours if (o["metadata"].get("labels") or {}).get(LABEL_PART_OF) == td.applyset.id]
            td.applyset.write_parent(kinds_of(members) | {"Namespace"})
    if wait_timeout and not dry_run:
        td.wait_for_pods_gone(wait_timeout)
    return Plan(tuple(changes)), kept
