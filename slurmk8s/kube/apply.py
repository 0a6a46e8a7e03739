"""Server-side apply of a bundle in stages, create-once Secrets, prune, and the dry-run plan.

Before any write, a preflight reads what the bundle needs: every kind it applies is served (a CRD
such as KEDA's installed) and every Secret it refers to but `up` does not create (an external
database's password) exists with its key, and no object it would write over belongs to someone
else (kube/ownership.py: `claimed`). Every object joins one inventory (kube/applyset.py), which
prune and `down` read.
"""

from __future__ import annotations

import copy
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from slurmk8s import naming
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.kube.client import APPLY_PATCH, Kube, Obj, dig
from slurmk8s.kube.applyset import DATA_KINDS, ApplySet, bundle_kinds, kinds_of, with_membership
from slurmk8s.kube.ownership import FIELD_MANAGER, claimed, foreign_selector, key_of, managed_by_us, owner_of
from slurmk8s.kube.resources import Resolver, Resource, builtin
from slurmk8s.kube.stages import SECRETS, STAGE_NAMES, group_by_stage, object_ref
from slurmk8s.render import Bundle, RequiredSecret

# Fields the server owns: ignored when comparing a live object with a dry-run result.
VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink")

CREATED, CONFIGURED, UNCHANGED, PRUNED, KEPT = "created", "configured", "unchanged", "pruned", "kept"
ACTIONS = (CREATED, CONFIGURED, UNCHANGED, PRUNED, KEPT)
# Said next to an object `up` found in place and did not make: what it did with it.
USED_AS_IS = "exists, not created by slurmk8s, used as is (never written, never deleted)"
ADOPTED = "adopted on purpose (--adopt): slurmk8s manages it from now on, and `down` deletes it"


@dataclass(frozen=True)
class Change:
    """What applying (or dry-running) one object did; before/after are filled in dry runs."""

    ref: str
    action: str
    stage: str
    before: Obj | None = None
    after: Obj | None = None
    note: str = ""  # why an existing object was kept or taken over (USED_AS_IS, ADOPTED)


@dataclass(frozen=True)
class Plan:
    """Every change of one `up` (or dry run), in apply order; prunes last."""

    changes: tuple[Change, ...]

    def count(self, action: str) -> int:
        """How many changes have that action."""
        return sum(1 for c in self.changes if c.action == action)

    @property
    def changed(self) -> bool:
        """True when anything was (or would be) created, configured or pruned."""
        return any(c.action in (CREATED, CONFIGURED, PRUNED) for c in self.changes)


def stripped(obj: Obj | None) -> Obj | None:
    """obj without server-owned metadata and status, for comparison and diffs."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata", {})
    for key in VOLATILE_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop("deprecated.daemonset.template.generation", None)
    if "annotations" in meta and not annotations:
        meta.pop("annotations")
    return out


@dataclass(frozen=True)
class Ownership:
    """The bundle's objects that exist already and are not this cluster's, once `up` may go on."""

    kept: frozenset[tuple[str, str]] = frozenset()  # used as they are, never applied: a Namespace someone made
    adopted: frozenset[tuple[str, str]] = frozenset()  # taken over, as --adopt asked


def adopt_keys(bundle: Bundle, adopt: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """--adopt KIND/NAME values as (kind, name) of the bundle's objects (the kind in any case); UsageError else."""
    kinds = {o["kind"].lower(): o["kind"] for o in bundle.objects}
    wanted = {key_of(o) for o in bundle.objects}
    secrets = {s.name for s in bundle.secrets}
    keys = set()
    for value in adopt:
        kind, _, name = value.partition("/")
        key = (kinds.get(kind.lower(), kind), name)
        if key[0].lower() == "secret" and name in secrets:
            raise UsageError(f"--adopt {value}: an existing Secret is always kept and used as is; there is nothing "
                             "to adopt")
        if key not in wanted:
            example = next((f"{k}/{n}" for k, n in sorted(wanted) if k == "ConfigMap"), "ConfigMap/NAME")
            raise UsageError(f"--adopt {value}: the profile applies no such object (expected KIND/NAME of one of its "
                             f"objects, e.g. {example})")
        keys.add(key)
    return frozenset(keys)


def check_ownership(kube: Kube, bundle: Bundle, resolver: Resolver, pool: ThreadPoolExecutor, set_id: str,
                    adopt: tuple[str, ...] = ()) -> Ownership:
    """Before any write: ClusterError naming every object of the bundle that exists already but carries
    neither this cluster's instance label nor membership of its ApplySet, unless adopted.

    Server-side apply merges into such an object without a conflict, and `down` would then delete it
    (helm calls this "invalid ownership metadata"). A Namespace someone else made is used as is.
    """
    adopted = adopt_keys(bundle, adopt)
    ns, cluster = bundle.namespace, bundle.cluster

    def unclaimed(obj: Obj) -> tuple[tuple[str, str], str] | None:
        """(key, where it is) of obj when it exists and is someone else's."""
        resource = resolver.of(obj)
        found = kube.request("GET", resource.item(obj["metadata"].get("namespace"), obj["metadata"]["name"]),
                             what=f"read {object_ref(obj)}", tolerate=(404,))
        if found.status == 404:
            return None
        live = found.object_of(obj["kind"], obj["metadata"]["name"])
        where = f"in namespace {ns}" if resource.namespaced else "(cluster-scoped)"
        return None if claimed(live, cluster, set_id) else (key_of(obj), where)

    where_of = dict(item for item in pool.map(unclaimed, bundle.objects) if item is not None)
    found = set(where_of)
    kept = {key for key in found if key[0] == "Namespace" and key not in adopted}
    refused = sorted(found - kept - adopted)
    if refused:
        lines = [f"{kind}/{name} exists {where_of[kind, name]} but was not created by slurmk8s for cluster "
                 f"{cluster}: refusing to take it over; to hand it to slurmk8s on purpose (`down` then deletes it), "
                 f"add --adopt {kind}/{name}" for kind, name in refused]
        lines.append(f"nothing was written: {len(refused)} object(s) of someone else have the names this profile uses")
        raise ClusterError("\n".join(lines))
    return Ownership(frozenset(kept), frozenset(found & adopted))


def refuse_unowned(kube: Kube, bundle: Bundle, adopt: tuple[str, ...] = (), workers: int = 8) -> None:
    """refuse_foreign and check_ownership on their own, for a command that writes before it applies the bundle."""
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="ownership") as pool:
        resolver = Resolver(kube)
        refuse_foreign(kube, bundle, resolver, pool)
        check_ownership(kube, bundle, resolver, pool, ApplySet(kube, bundle, resolver).id, adopt)


class Applier:
    """Applies one bundle; objects of a stage go out in parallel on `workers` threads."""

    def __init__(self, kube: Kube, bundle: Bundle, *, workers: int = 8, force_conflicts: bool = False,
                 dry_run: bool = False, progress: Callable[[str], None] = lambda line: None,
                 adopt: tuple[str, ...] = ()):
        self.kube = kube
        self.bundle = bundle
        self.resolver = Resolver(kube)
        self.workers = max(1, workers)
        self.force_conflicts = force_conflicts
        self.dry_run = dry_run
        self.progress = progress
        self._namespace_missing = False
        self.applyset = ApplySet(kube, bundle, self.resolver)
        self.adopt = adopt
        self.ownership = Ownership()

    def run(self, make_secret: Callable[[RequiredSecret], Obj], prune: bool = True,
            before_writes: Callable[[], None] | None = None) -> Plan:
        """Check, then apply every object and Secret stage by stage, then prune what the profile no longer has."""
        by_stage = dict(group_by_stage(self.bundle.objects))
        stages: list[tuple[str, list, Callable]] = []
        for name in STAGE_NAMES:
            if name == SECRETS:  # the Secrets `up` creates once, before any Secret object of the bundle
                stages.append((name, list(self.bundle.secrets), lambda s: self.ensure_secret(s, make_secret)))
            if name in by_stage:
                stages.append((name, by_stage[name], lambda o, st=name: self.apply_object(o, st, owned)))
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="apply") as pool:
            # Reads only, up to here: nothing is written unless everything the bundle needs is there.
            preflight(self.kube, self.bundle, self.resolver, pool)
            refuse_foreign(self.kube, self.bundle, self.resolver, pool)
            self.applyset.read_parent()
            self.ownership = check_ownership(self.kube, self.bundle, self.resolver, pool, self.applyset.id,
                                             self.adopt)
            if before_writes is not None:
                before_writes()
            wanted_kinds = bundle_kinds(self.bundle)
            owned = self.applyset.members(pool, self.applyset.recorded_kinds() | wanted_kinds)
            changes: list[Change] = []
            parent_written = self.dry_run
            for stage, items, action in stages:
                if not parent_written and stage != "namespace":
                    # The superset first (once the namespace exists): a killed `up` leaves nothing the
                    # inventory cannot find again.
                    self.applyset.write_parent(self.applyset.recorded_kinds() | wanted_kinds | kinds_of(owned.values()))
                    parent_written = True
                changes += self.run_stage(pool, stage, items, action)
            pruned: list[Obj] = []
            if prune:
                pruned = self.prune_candidates(owned)
                changes += self.run_stage(pool, "prune", pruned, self._prune)
            if not self.dry_run:  # then exactly what is left
                gone = {key_of(o) for o in pruned}
                self.applyset.write_parent(wanted_kinds | kinds_of(o for k, o in owned.items() if k not in gone))
        return Plan(tuple(changes))

    def run_stage(self, pool: ThreadPoolExecutor, stage: str, items: list, action: Callable) -> list[Change]:
        """Run action on every item in parallel; the stage fails as a whole with its first error."""
        if not items:
            return []
        futures = [pool.submit(action, item) for item in items]
        errors = [e for f in futures if (e := f.exception()) is not None]
        if errors:
            more = f" (and {len(errors) - 1} more failure(s) in stage {stage})" if len(errors) > 1 else ""
            first = errors[0]
            if isinstance(first, ClusterError) and more:
                first.args = (f"{first}{more}",)
            raise first
        results = [f.result() for f in futures]
        for change in results:
            self.progress(f"  {change.action:<12} {change.ref}")
        return results

    def _query(self) -> list[tuple[str, str]]:
        query = [("fieldManager", FIELD_MANAGER)]
        if self.force_conflicts:
            query.append(("force", "true"))
        if self.dry_run:
            query.append(("dryRun", "All"))
        return query

    def keep_elastic_replicas(self, obj: Obj, resource) -> Obj:
        """An elastic pool's replicas belong to Slurm (resume/suspend) once it exists: apply the live value,
        brought inside the profile's minReplicas..maxReplicas.

        Raising to min is safe; lowering to max kills pods, so `up` drains and shrinks them first
        (actions/converge.py) and the clamp here only holds the range.
        """
        bounds = naming.elastic_range(obj)
        if bounds is None:
            return obj
        meta = obj["metadata"]
        live = self.kube.request("GET", resource.item(meta.get("namespace"), meta["name"]),
                                 what=f"read {object_ref(obj)}", tolerate=(404,))
        if live.status != 200:
            return obj
        kept = copy.deepcopy(obj)
        replicas = dig(live.body, "spec", "replicas")
        if isinstance(replicas, int):
            kept["spec"]["replicas"] = max(bounds[0], min(bounds[1], replicas))
        return kept

    def apply_object(self, obj: Obj, stage: str, owned: dict[tuple[str, str], Obj]) -> Change:
        """Server-side apply one object; owned (the earlier state) tells unchanged from configured."""
        key = key_of(obj)
        if key in self.ownership.kept:
            return Change(object_ref(obj), KEPT, stage, note=USED_AS_IS)
        change = self._apply_object(obj, stage, owned)
        return dataclasses.replace(change, note=ADOPTED) if key in self.ownership.adopted else change

    def _apply_object(self, obj: Obj, stage: str, owned: dict[tuple[str, str], Obj]) -> Change:
        resource = self.resolver.of(obj)
        obj = with_membership(self.keep_elastic_replicas(obj, resource), self.applyset.id)
        ns = obj["metadata"].get("namespace")
        path = resource.item(ns, obj["metadata"]["name"])
        what = f"apply {object_ref(obj)}"
        if self.dry_run:
            return self._dry_apply(obj, stage, resource, path, what)
        result = self.kube.request("PATCH", path, what=what, query=self._query(), body=obj, content_type=APPLY_PATCH)
        result.object_of(obj["kind"], obj["metadata"]["name"])  # the object applied, not a reply that passes for it
        before = owned.get(key_of(obj))
        if result.status == 201:
            action = CREATED
        elif before is not None and stripped(before) == stripped(result.body):
            # Content, not resourceVersion: controllers bump that with every status update.
            action = UNCHANGED
        else:
            action = CONFIGURED
        return Change(object_ref(obj), action, stage)

    def _dry_apply(self, obj: Obj, stage: str, resource, path: str, what: str) -> Change:
        namespaced = resource.namespaced
        if namespaced and self._namespace_missing:
            # The API refuses even a dry run into a namespace that does not exist yet.
            return Change(object_ref(obj), CREATED, stage, None, stripped(obj))
        live = self.kube.request("GET", path, what=f"read {object_ref(obj)}", tolerate=(404,))
        kind, name = obj["kind"], obj["metadata"]["name"]
        before = stripped(live.object_of(kind, name)) if live.status == 200 else None
        result = self.kube.request("PATCH", path, what=what, query=self._query(), body=obj, content_type=APPLY_PATCH)
        after = stripped(result.object_of(kind, name))
        if obj["kind"] == "Namespace" and before is None:
            self._namespace_missing = True
        if before is None:
            action = CREATED
        else:
            action = UNCHANGED if before == after else CONFIGURED
        return Change(object_ref(obj), action, stage, before, after)

    def ensure_secret(self, required: RequiredSecret, make_secret: Callable[[RequiredSecret], Obj]) -> Change:
        """Create a Secret once; an existing one is never read further, written or replaced."""
        ref = f"Secret/{required.name}"
        if self._namespace_missing:
            return Change(ref, CREATED, "secrets")
        resource = builtin("v1", "Secret")
        ns = self.bundle.namespace
        found = self.kube.request("GET", resource.item(ns, required.name), what=f"read {ref}", tolerate=(404,))
        if found.status == 200:
            ours = claimed(found.object_of("Secret", required.name), self.bundle.cluster, self.applyset.id)
            return Change(ref, KEPT, "secrets", note="" if ours else USED_AS_IS)
        if self.dry_run:
            # Key material is never sent, not even to a dry run.
            return Change(ref, CREATED, "secrets")
        made = self.kube.request("POST", resource.collection(ns), what=f"create {ref}",
                                 query=[("fieldManager", FIELD_MANAGER)],
                                 body=with_membership(make_secret(required), self.applyset.id), tolerate=(409,))
        # 409: someone created it between our GET and POST; theirs stays.
        if made.status == 409:
            return Change(ref, KEPT, "secrets")
        made.object_of("Secret", required.name)
        return Change(ref, CREATED, "secrets")

    def prune_candidates(self, owned: dict[tuple[str, str], Obj]) -> list[Obj]:
        """Members of the inventory the bundle no longer has, of any kind (never Namespaces, Secrets, PVCs)."""
        wanted = {key_of(o) for o in self.bundle.objects}
        return [obj for key, obj in sorted(owned.items())
                if key[0] not in DATA_KINDS and key not in wanted and managed_by_us(obj, self.bundle.cluster)]

    def _prune(self, obj: Obj) -> Change:
        ref = object_ref(obj)
        if self.dry_run:
            return Change(ref, PRUNED, "prune", stripped(obj), None)
        resource = self.resolver.of(obj)
        self.kube.request("DELETE", resource.item(self.bundle.namespace, obj["metadata"]["name"]),
                          what=f"prune {ref}", query=[("propagationPolicy", "Background")], tolerate=(404,))
        return Change(ref, PRUNED, "prune")


def preflight(kube: Kube, bundle: Bundle, resolver: Resolver, pool: ThreadPoolExecutor) -> None:
    """ClusterError, before any write, when the cluster lacks what the bundle needs.

    Every kind must be served (a missing CRD used to stop `up` after five StatefulSets were
    created), and every Secret the pods refer to that `up` does not create must exist with the key
    they read (a pod would wait in CreateContainerConfigError for ever).
    """
    kinds = {(o["apiVersion"], o["kind"]): o for o in bundle.objects}
    list(pool.map(resolver.of, kinds.values()))  # raises for the first kind the cluster does not serve
    needed = bundle.referenced_secrets()
    ns = bundle.namespace
    resource = builtin("v1", "Secret")

    def check(item: tuple[str, tuple[str, ...]]) -> str | None:
        name, keys = item
        found = kube.request("GET", resource.item(ns, name), what=f"read Secret/{name}", tolerate=(404,))
        example = " ".join(f"--from-literal={k}=..." for k in keys)
        if found.status == 404:
            return (f"Secret/{name} in namespace {ns} does not exist, and the profile's pods need it (keys: "
                    f"{', '.join(keys)}): create it first, e.g. kubectl -n {ns} create secret generic {name} {example}")
        secret = found.object_of("Secret", name)
        data = {**(secret.get("data") or {}), **(secret.get("stringData") or {})}
        missing = [k for k in keys if k not in data]
        if missing:
            return (f"Secret/{name} in namespace {ns} has no key {', '.join(missing)}, which the profile's pods "
                    f"read (it has: {', '.join(sorted(data)) or 'no keys'})")
        return None

    problems = [p for p in pool.map(check, sorted(needed.items())) if p]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ClusterError(problems[0] + more)


def foreign_objects(kube: Kube, bundle: Bundle, resolver: Resolver, pool: ThreadPoolExecutor,
                    skip_unserved: bool = False) -> list[Obj]:
    """Objects named like one of the bundle's but labelled for another slurmk8s cluster in the namespace.

    Object names are <cluster>-<suffix>, so two clusters can alias (cluster team with pool gpu-cpu,
    cluster team-gpu with pool cpu): one field manager, no SSA conflict, and `up` of one would take
    the other's object over (and `down` would then delete it). The Namespace is shared by design.
    skip_unserved: a kind the cluster does not serve (a CRD gone) has no objects to worry about.
    """
    wanted: dict[Resource, set[str]] = {}
    for obj in bundle.objects:
        if obj["kind"] == "Namespace":
            continue
        try:
            resource = resolver.of(obj)
        except ClusterError:
            if skip_unserved:
                continue
            raise
        wanted.setdefault(resource, set()).add(obj["metadata"]["name"])
    if bundle.secrets:
        wanted.setdefault(builtin("v1", "Secret"), set()).update(s.name for s in bundle.secrets)
    ns, selector = bundle.namespace, foreign_selector(bundle.cluster)

    def list_kind(item: tuple[Resource, set[str]]) -> list[Obj]:
        resource, names = item
        listing = kube.request("GET", resource.collection(ns), what=f"list {resource.plural} in {ns}",
                               query=[("labelSelector", selector)])
        found = [o for o in listing.items() if o["metadata"]["name"] in names]
        for o in found:
            o.setdefault("kind", resource.kind)
        return found

    return sorted((o for found in pool.map(list_kind, sorted(wanted.items(), key=lambda i: i[0].kind)) for o in found),
                  key=key_of)


def refuse_foreign(kube: Kube, bundle: Bundle, resolver: Resolver, pool: ThreadPoolExecutor) -> None:
    """ClusterError before any write when an object of the bundle belongs to another cluster."""
    found = foreign_objects(kube, bundle, resolver, pool)
    if not found:
        return
    first = found[0]
    owner = owner_of(first)
    more = f" (and {len(found) - 1} more: {', '.join(object_ref(o) for o in found[1:4])}{', ...' if len(found) > 4 else ''})" \
        if len(found) > 1 else ""
    raise ClusterError(f"{object_ref(first)} in namespace {bundle.namespace} belongs to cluster "
                       f"{owner or '(no instance label)'}, not {bundle.cluster}{more}; applying would take it over: "
                       "rename the pool (or the cluster), or put the clusters in different namespaces")


def apply_bundle(kube: Kube, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj], *, workers: int = 8,
                 force_conflicts: bool = False, dry_run: bool = False, prune: bool = True,
                 progress: Callable[[str], None] = lambda line: None,
                 before_writes: Callable[[], None] | None = None, adopt: tuple[str, ...] = ()) -> Plan:
    """Server-side apply a bundle (or dry-run it), creating missing Secrets once and pruning leftovers.

    before_writes runs once the preflight passed and before the first write (in a dry run too).
    adopt: KIND/NAME of existing objects someone else made that the user hands to slurmk8s.
    """
    applier = Applier(kube, bundle, workers=workers, force_conflicts=force_conflicts, dry_run=dry_run,
                      progress=progress, adopt=adopt)
    return applier.run(make_secret, prune=prune, before_writes=before_writes)


def ensure_secrets(kube: Kube, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj],
                   progress: Callable[[str], None] = lambda line: None) -> Plan:
    """Create the bundle's missing Secrets (and its Namespace when missing); existing ones stay untouched."""
    applier = Applier(kube, bundle, progress=progress)
    namespace = bundle.find("Namespace", bundle.namespace)
    found = kube.request("GET", builtin("v1", "Namespace").item(None, bundle.namespace),
                         what=f"read Namespace/{bundle.namespace}", tolerate=(404,))
    if found.status == 200:
        found.object_of("Namespace", bundle.namespace)
    changes: list[Change] = []
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="secrets") as pool:
        if found.status == 404:
            changes += applier.run_stage(pool, "namespace", [namespace], lambda o: applier.apply_object(o, "namespace", {}))
        changes += applier.run_stage(pool, "secrets", list(bundle.secrets),
                                     lambda s: applier.ensure_secret(s, make_secret))
    return Plan(tuple(changes))
