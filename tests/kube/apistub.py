"""A recording Kubernetes API stub on 127.0.0.1 for HTTP-level tests (a test fixture, not product code).

It implements what slurmk8s and the real `kubernetes` client need: GET/LIST (labelSelector,
a fieldSelector on involvedObject.name), POST, server-side apply PATCH (with dryRun, field
managers and conflicts), DELETE, discovery for registered custom kinds (a group's versions and
each version's resources), injected failures, latency, and barriers (requests that are answered
only once several are in flight together). Workloads can turn "Ready" on their own: the stub then makes their pods.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import yaml

Obj = dict[str, Any]

KIND_OF_PLURAL = {
    "namespaces": "Namespace", "serviceaccounts": "ServiceAccount", "secrets": "Secret", "configmaps": "ConfigMap",
    "services": "Service", "persistentvolumeclaims": "PersistentVolumeClaim", "pods": "Pod", "events": "Event",
    "roles": "Role", "rolebindings": "RoleBinding", "networkpolicies": "NetworkPolicy",
    "poddisruptionbudgets": "PodDisruptionBudget", "statefulsets": "StatefulSet", "deployments": "Deployment",
}


@dataclass
class Recorded:
    """One request as the stub saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str
    authorization: str
    body: Any
    status: int = 0
    started: float = 0.0
    ended: float = 0.0

    def q(self, key: str) -> str | None:
        """First value of a query parameter."""
        return (self.query.get(key) or [None])[0]

    @property
    def name(self) -> str:
        """Last path segment (the object name for item requests)."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class Gate:
    """Requests matching `when` call `wait` before they are answered (see ApiStub.barrier)."""

    when: Callable[[Recorded], bool]
    wait: Callable[[], object]


@dataclass
class Failure:
    """Answer requests matching `when` with status (and message) instead of serving them."""

    status: int
    when: Callable[[Recorded], bool]
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    times: int | None = None  # answer this many matching requests, then serve normally


class ApiStub:
    """In-memory API server; `requests` records every call in arrival order."""

    def __init__(self, latency: float = 0.0, auto_ready: bool = True):
        self.latency = latency
        self.auto_ready = auto_ready
        self.store: dict[tuple[str, str, str], dict[str, Obj]] = {}
        self.requests: list[Recorded] = []
        self.failures: list[Failure] = []
        self.gates: list[Gate] = []
        self.conflicts: dict[tuple[str, str], str] = {}  # (plural, name) -> other manager
        self.discovery: dict[str, list[Obj]] = {  # "/apis/g/v" -> resources; built-in kinds of 1.30+ as they serve them
            "/apis/admissionregistration.k8s.io/v1": [
                {"name": "validatingadmissionpolicies", "kind": "ValidatingAdmissionPolicy", "namespaced": False},
                {"name": "validatingadmissionpolicybindings", "kind": "ValidatingAdmissionPolicyBinding", "namespaced": False}]}
        self._rv = itertools.count(100)
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None

    # ---- lifecycle -------------------------------------------------------
    def start(self) -> "ApiStub":
        """Serve on an ephemeral port in a daemon thread."""
        stub = self

        class Handler(BaseHTTPRequestHandler):
            """Hands every request to the stub."""

            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: avoid 40 ms delayed-ACK stalls

            def log_message(self, *args):
                """Silent: keeps pytest output clean."""

            def _serve(self):
                stub._handle(self)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        class Server(ThreadingHTTPServer):
            """One thread per connection, so parallel requests overlap as on a real API server."""

            request_queue_size = 128  # the default backlog of 5 drops parallel connects (1 s SYN retry)
            daemon_threads = True

            def handle_error(self, request, client_address):
                """A client that hung up (a command past its --timeout) is not the stub's error; others print
                as socketserver prints them (on the stderr of a command run in this process)."""
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        """Base URL of the stub."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, token: str = "stub-token") -> Path:
        """A kubeconfig whose current context is this stub (and a second context 'other' to the same stub)."""
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "stub",
            "clusters": [{"name": "stub", "cluster": {"server": self.url}}],
            "users": [{"name": "stub", "user": {"token": token}}, {"name": "other", "user": {"token": "other-token"}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}},
                         {"name": "other", "context": {"cluster": "stub", "user": "other"}}],
        }
        path.write_text(yaml.safe_dump(cfg))
        return path

    # ---- test helpers ----------------------------------------------------
    def fail(self, status: int, when: Callable[[Recorded], bool] = lambda r: True, message: str = "",
             reason: str = "", headers: dict[str, str] | None = None, times: int | None = None) -> None:
        """Answer matching requests with an error Status (the first `times` of them, when given)."""
        self.failures.append(Failure(status, when, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                    "message": message, "reason": reason, "code": status},
                                     dict(headers or {}), times))

    def reply(self, status: int, body: Any, when: Callable[[Recorded], bool], times: int | None = None) -> None:
        """Answer matching requests with any body at all (a malformed one, say)."""
        self.failures.append(Failure(status, when, body, {}, times))

    def barrier(self, parties: int, when: Callable[[Recorded], bool], timeout: float = 30) -> threading.Barrier:
        """Hold matching requests until `parties` of them are in flight at once, then answer them all.

        This proves concurrency without timing: requests sent one after another never meet, so
        after `timeout` the barrier breaks and each held request is answered 500.
        """
        barrier = threading.Barrier(parties, timeout=timeout)
        self.gates.append(Gate(when, barrier.wait))
        return barrier

    def seed(self, collection: str, obj: Obj, managers: tuple[str, ...] = ("slurmk8s",)) -> Obj:
        """Put an object in place as if someone had created it (managers become managedFields)."""
        obj = copy.deepcopy(obj)
        # As the API server stores it: kind and apiVersion always set (replies are checked for them).
        obj.setdefault("apiVersion", _api_version_of(collection))
        obj.setdefault("kind", KIND_OF_PLURAL.get(_plural(collection), "Object"))
        meta = obj.setdefault("metadata", {})
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._rv)), generation=1,
                    creationTimestamp="2026-01-01T00:00:00Z",
                    managedFields=[{"manager": m, "operation": "Apply" if m == "slurmk8s" else "Update"}
                                   for m in managers])
        with self._lock:
            self._bucket(collection)[meta["name"]] = obj
        return obj

    def get(self, collection: str, name: str) -> Obj | None:
        """A stored object (None when absent)."""
        with self._lock:
            return copy.deepcopy(self._bucket(collection).get(name))

    def names(self, collection: str) -> list[str]:
        """Names stored in a collection."""
        with self._lock:
            return sorted(self._bucket(collection))

    def calls(self, method: str | None = None, contains: str = "") -> list[Recorded]:
        """Recorded requests, filtered by method and a path substring."""
        return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    def reset_log(self) -> None:
        """Forget recorded requests (the stored objects stay)."""
        with self._lock:
            self.requests.clear()

    # ---- request handling --------------------------------------------------
    def _bucket(self, collection: str) -> dict[str, Obj]:
        return self.store.setdefault(("", "", collection), {})

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        rec = Recorded(h.command, parts.path, parse_qs(parts.query), h.headers.get("Content-Type", ""),
                       h.headers.get("Authorization", ""), yaml.safe_load(raw) if raw else None,
                       started=time.monotonic())
        with self._lock:
            self.requests.append(rec)
        if self.latency:
            time.sleep(self.latency)  # a slower API server, for bench/up.py
        try:
            for gate in self.gates:
                if gate.when(rec):
                    gate.wait()
            status, body, headers = self._answer(rec)
        except threading.BrokenBarrierError:
            status, body = _status(500, "InternalError", f"stub: barrier broken: {rec.method} {rec.path} was never "
                                                         "in flight together with the other requests of its barrier")
            headers = {}
        except Exception as e:  # a stub bug must show up as a 500, not a dropped connection
            (status, body), headers = _status(500, "InternalError", f"stub: {type(e).__name__}: {e}"), {}
        rec.status, rec.ended = status, time.monotonic()
        data = json.dumps(body).encode()
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _answer(self, rec: Recorded) -> tuple[int, Obj, dict[str, str]]:
        with self._lock:
            failure = next((f for f in self.failures if f.times != 0 and f.when(rec)), None)
            if failure is not None and failure.times is not None:
                failure.times -= 1
        if failure is not None:
            return failure.status, failure.body, failure.headers
        return (*self._serve(rec), {})

    def _serve(self, rec: Recorded) -> tuple[int, Obj]:
        segs = [s for s in rec.path.split("/") if s]
        if rec.method == "GET" and len(segs) == 2 and segs[0] == "apis":  # group discovery: /apis/<group>
            with self._lock:
                versions = sorted(path.rsplit("/", 1)[1] for path in self.discovery if path.startswith(rec.path + "/"))
            if versions:
                entries = [{"groupVersion": f"{segs[1]}/{v}", "version": v} for v in versions]
                return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": segs[1], "versions": entries,
                             "preferredVersion": entries[0]}
        route = _route(rec.path)
        if route is None:
            return _status(404, "NotFound", f"the server could not find the requested resource ({rec.path})")
        collection, name = route
        if name is not None and name.endswith("/scale"):
            with self._lock:
                return self._scale(rec, collection, name.removesuffix("/scale"))
        with self._lock:
            if collection in self.discovery and name is None and rec.method == "GET":
                return 200, {"kind": "APIResourceList", "resources": self.discovery[collection]}
            if len(segs) == 3 and segs[0] == "apis" and rec.method == "GET":  # a group version it does not serve
                return _status(404, "NotFound", f"the server could not find the requested resource ({rec.path})")
            if rec.method == "GET":
                return self._get(rec, collection, name)
            if rec.method == "POST" and name is None:
                return self._create(rec, collection)
            if rec.method == "PATCH" and name is not None:
                return self._apply(rec, collection, name)
            if rec.method == "DELETE" and name is not None:
                return self._delete(rec, collection, name)
        return _status(405, "MethodNotAllowed", f"{rec.method} {rec.path}")

    def _get(self, rec: Recorded, collection: str, name: str | None) -> tuple[int, Obj]:
        bucket = self._bucket(collection)
        if name is not None:
            if name not in bucket:
                return _status(404, "NotFound", f'{_plural(collection)} "{name}" not found')
            return 200, copy.deepcopy(bucket[name])
        items = [copy.deepcopy(o) for _, o in sorted(bucket.items())
                 if _labels_match(o, rec.q("labelSelector")) and _fields_match(o, rec.q("fieldSelector"))]
        for item in items:  # the real API leaves kind/apiVersion out of list items
            item.pop("kind", None)
            item.pop("apiVersion", None)
        kind = KIND_OF_PLURAL.get(_plural(collection), "Object")
        return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {"resourceVersion": str(next(self._rv))},
                     "items": items}

    def _namespace_missing(self, collection: str) -> str | None:
        ns = _namespace_of(collection)
        if ns and ns not in self._bucket("/api/v1/namespaces"):
            return ns
        return None

    def _create(self, rec: Recorded, collection: str) -> tuple[int, Obj]:
        obj = rec.body or {}
        name = obj.get("metadata", {}).get("name", "")
        if missing := self._namespace_missing(collection):
            return _status(404, "NotFound", f'namespaces "{missing}" not found')
        if name in self._bucket(collection):
            return _status(409, "AlreadyExists", f'{_plural(collection)} "{name}" already exists')
        stored = self._new_object(obj, rec.q("fieldManager") or "unknown", "Update")
        if rec.q("dryRun") != "All":
            self._bucket(collection)[name] = stored
        return 201, copy.deepcopy(stored)

    def _apply(self, rec: Recorded, collection: str, name: str) -> tuple[int, Obj]:
        if rec.content_type == "application/merge-patch+json" and name in self._bucket(collection):
            return self._merge_patch(rec, collection, name)
        if rec.content_type != "application/apply-patch+yaml":
            return _status(415, "UnsupportedMediaType", f"unsupported patch type {rec.content_type}")
        manager = rec.q("fieldManager")
        if not manager:
            return _status(400, "BadRequest", "fieldManager is required for apply patch")
        bucket = self._bucket(collection)
        applied = rec.body or {}
        dry = rec.q("dryRun") == "All"
        existing = bucket.get(name)
        if existing is None:
            if missing := self._namespace_missing(collection):
                return _status(404, "NotFound", f'namespaces "{missing}" not found')
            stored = self._new_object(applied, manager, "Apply")
            if not dry:
                bucket[name] = stored
                self._after_write(collection, stored)
            return 201, copy.deepcopy(stored)
        other = self.conflicts.get((_plural(collection), name))
        if other and rec.q("force") != "true":
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                    "message": f'Apply failed with 1 conflict: conflict with "{other}" using apps/v1: .spec.replicas',
                    "details": {"causes": [{"reason": "FieldManagerConflict",
                                            "message": f'conflict with "{other}" using apps/v1',
                                            "field": ".spec.replicas"}]}}
            return 409, body
        merged = copy.deepcopy(existing)
        for key, value in applied.items():
            if key == "metadata":
                for mk in ("labels", "annotations"):
                    if mk in value:
                        merged["metadata"][mk] = copy.deepcopy(value[mk])
            elif key != "status":
                merged[key] = copy.deepcopy(value)
        managers = merged["metadata"].setdefault("managedFields", [])
        if not any(m.get("manager") == manager for m in managers):
            managers.append({"manager": manager, "operation": "Apply"})
        if _content(merged) != _content(existing):
            merged["metadata"]["resourceVersion"] = str(next(self._rv))
            if merged.get("spec") != existing.get("spec"):
                merged["metadata"]["generation"] = existing["metadata"].get("generation", 1) + 1
        defaulted = ((existing.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate")
        if defaulted is not None and isinstance(merged.get("spec"), dict):
            # a defaulted field no manager owns survives an apply that does not name it (server-side apply)
            strategy = merged["spec"].setdefault("updateStrategy", {})
            strategy.setdefault("rollingUpdate", copy.deepcopy(defaulted))
        if invalid := _invalid_strategy(merged):
            return invalid
        if not dry:
            bucket[name] = merged
            self._after_write(collection, merged)
        return 200, copy.deepcopy(merged)

    def _merge_patch(self, rec: Recorded, collection: str, name: str) -> tuple[int, Obj]:
        """A JSON merge patch (RFC 7386): null removes a field."""
        def merge(target: Any, patch: Any) -> Any:
            if not isinstance(patch, dict):
                return copy.deepcopy(patch)
            out = dict(target) if isinstance(target, dict) else {}
            for key, value in patch.items():
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = merge(out.get(key), value)
            return out
        bucket = self._bucket(collection)
        merged = merge(bucket[name], rec.body or {})
        if invalid := _invalid_strategy(merged):
            return invalid
        if rec.q("dryRun") != "All":
            merged["metadata"]["resourceVersion"] = str(next(self._rv))
            bucket[name] = merged
            self._after_write(collection, merged)
        return 200, copy.deepcopy(merged)

    def _scale(self, rec: Recorded, collection: str, name: str) -> tuple[int, Obj]:
        """The scale subresource (GET, merge PATCH of spec.replicas), as power.py and `slurmk8s scale` use it."""
        obj = self._bucket(collection).get(name)
        if obj is None:
            return _status(404, "NotFound", f'{_plural(collection)} "{name}" not found')
        if rec.method == "PATCH":
            replicas = ((rec.body or {}).get("spec") or {}).get("replicas")
            if not isinstance(replicas, int):
                return _status(422, "Invalid", "spec.replicas: must be an integer")
            if replicas != obj["spec"].get("replicas"):
                obj["spec"]["replicas"] = replicas
                obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
                obj["metadata"]["resourceVersion"] = str(next(self._rv))
                self._after_write(collection, obj)
        elif rec.method != "GET":
            return _status(405, "MethodNotAllowed", f"{rec.method} {rec.path}")
        return 200, {"kind": "Scale", "apiVersion": "autoscaling/v1",
                     "metadata": {"name": name, "namespace": obj["metadata"].get("namespace")},
                     "spec": {"replicas": obj["spec"].get("replicas", 1)},
                     "status": {"replicas": (obj.get("status") or {}).get("replicas", 0)}}

    def _delete(self, rec: Recorded, collection: str, name: str) -> tuple[int, Obj]:
        bucket = self._bucket(collection)
        if name not in bucket:
            return _status(404, "NotFound", f'{_plural(collection)} "{name}" not found')
        uid = ((rec.body or {}).get("preconditions") or {}).get("uid")
        if uid and uid != bucket[name]["metadata"].get("uid"):
            return _status(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                            f"{bucket[name]['metadata'].get('uid')}")
        if rec.q("dryRun") != "All":
            gone = bucket.pop(name)
            if self.auto_ready and gone.get("kind") in ("StatefulSet", "Deployment"):
                self._sync_pods(collection, gone, 0)
            if self.auto_ready and _plural(collection) == "pods":
                self._recreate_pod(collection, name)
        return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _new_object(self, obj: Obj, manager: str, operation: str) -> Obj:
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._rv)), generation=1,
                    creationTimestamp="2026-01-01T00:00:00Z",
                    managedFields=[{"manager": manager, "operation": operation}])
        return stored

    def _after_write(self, collection: str, obj: Obj) -> None:
        """With auto_ready, workloads report every replica Ready and their pods exist."""
        if not self.auto_ready or obj.get("kind") not in ("StatefulSet", "Deployment"):
            return
        replicas = obj["spec"].get("replicas", 1)
        obj["status"] = {"observedGeneration": obj["metadata"]["generation"], "replicas": replicas,
                         "readyReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas}
        self._sync_pods(collection, obj, replicas)
        if obj["kind"] == "StatefulSet":
            self._sync_revisions(collection, obj)

    def _sync_revisions(self, collection: str, sts: Obj) -> None:
        """As the StatefulSet controller: updateRevision names the template; pods carry the revision they were
        made from; OnDelete leaves existing pods on theirs until they are deleted."""
        revision = f"{sts['metadata']['name']}-{revision_of(sts['spec']['template'])}"
        pods = self._bucket(f"/api/v1/namespaces/{_namespace_of(collection)}/pods")
        on_delete = (sts["spec"].get("updateStrategy") or {}).get("type") == "OnDelete"
        members = [p for n, p in pods.items() if ordinal(sts["metadata"]["name"], n) is not None]
        for pod in members:
            labels = pod["metadata"].setdefault("labels", {})
            if not on_delete or "controller-revision-hash" not in labels:
                labels["controller-revision-hash"] = revision
        sts.setdefault("status", {}).update(updateRevision=revision, updatedReplicas=sum(
            1 for p in members if p["metadata"]["labels"]["controller-revision-hash"] == revision))

    def _recreate_pod(self, collection: str, name: str) -> None:
        """A deleted StatefulSet pod comes back at once, on its StatefulSet's update revision."""
        sets = self._bucket(collection.rsplit("/pods", 1)[0].replace("/api/v1/", "/apis/apps/v1/") + "/statefulsets")
        for sts in sets.values():
            n = ordinal(sts["metadata"]["name"], name)
            if n is not None and n < sts["spec"].get("replicas", 1):
                labels = dict(sts["spec"]["template"]["metadata"].get("labels", {}))
                self._bucket(collection)[name] = make_pod(name, labels, ready=True)
                self._sync_revisions(collection.rsplit("/pods", 1)[0] + "/statefulsets", sts)

    def _sync_pods(self, collection: str, workload: Obj, replicas: int) -> None:
        pods = self._bucket(f"/api/v1/namespaces/{_namespace_of(collection)}/pods")
        prefix = workload["metadata"]["name"] + "-"
        for name in [n for n in pods if n.startswith(prefix) and n[len(prefix):].isdigit()]:
            if int(name[len(prefix):]) >= replicas:
                del pods[name]
        labels = workload["spec"]["template"]["metadata"].get("labels", {})
        for i in range(replicas):
            pods.setdefault(f"{prefix}{i}", make_pod(f"{prefix}{i}", labels, ready=True))


def _invalid_strategy(obj: Obj) -> tuple[int, Obj] | None:
    """The API server's rule: rollingUpdate only with type RollingUpdate."""
    strategy = (obj.get("spec") or {}).get("updateStrategy") or {}
    if obj.get("kind") == "StatefulSet" and strategy.get("type") == "OnDelete" and "rollingUpdate" in strategy:
        return _status(422, "Invalid", f'StatefulSet.apps "{obj["metadata"]["name"]}" is invalid: '
                                       "spec.updateStrategy.rollingUpdate: only allowed for updateStrategy 'RollingUpdate'")
    return None


def ordinal(statefulset: str, pod: str) -> int | None:
    """The ordinal of a pod of that StatefulSet, None for any other pod."""
    rest = pod[len(statefulset) + 1:] if pod.startswith(statefulset + "-") else ""
    return int(rest) if rest.isdigit() else None


def revision_of(template: Obj) -> str:
    """A stable 10-character name for a pod template, like the controller's revision hash."""
    import hashlib
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def make_pod(name: str, labels: dict[str, str], ready: bool, waiting: tuple[str, str] | None = None,
             unschedulable: str = "") -> Obj:
    """A Pod object as the API reports it: Ready, waiting on a container, or unschedulable."""
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    status: Obj = {"phase": "Running" if ready else "Pending", "conditions": conditions}
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": unschedulable})
    state = {"running": {}} if ready else {"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting else {}
    if state:
        status["containerStatuses"] = [{"name": "main", "ready": ready, "restartCount": 0 if ready else 3,
                                        "state": state}]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"containers": [{"name": "main"}], "nodeName": "node-1"}, "status": status}


def _content(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    for key in ("resourceVersion", "generation", "managedFields"):
        out["metadata"].pop(key, None)
    out.pop("status", None)
    return out


def _route(path: str) -> tuple[str, str | None] | None:
    """(collection path, name or None) for an API path; discovery paths map to (path, None)."""
    segs = [s for s in path.split("/") if s]
    if segs[:2] == ["api", "v1"]:
        prefix, rest = "/api/v1", segs[2:]
    elif len(segs) >= 3 and segs[0] == "apis":
        prefix, rest = "/" + "/".join(segs[:3]), segs[3:]
    else:
        return None
    if not rest:
        return prefix, None
    if rest[0] == "namespaces" and len(rest) >= 3:
        coll = f"{prefix}/namespaces/{rest[1]}/{rest[2]}"
        if len(rest) == 3:
            return coll, None
        if len(rest) == 4:
            return coll, rest[3]
        if len(rest) == 5 and rest[4] == "scale":
            return coll, f"{rest[3]}/scale"
        return None  # other subresources (exec, status, ...) are not served
    if len(rest) == 1:
        return f"{prefix}/{rest[0]}", None
    if len(rest) == 2:
        return f"{prefix}/{rest[0]}", rest[1]
    return None


def _api_version_of(collection: str) -> str:
    segs = [s for s in collection.split("/") if s]
    return "v1" if segs[0] == "api" else f"{segs[1]}/{segs[2]}"


def _plural(collection: str) -> str:
    return collection.rsplit("/", 1)[-1]


def _namespace_of(collection: str) -> str | None:
    segs = collection.split("/")
    return segs[segs.index("namespaces") + 1] if "namespaces" in segs[:-1] else None


def _labels_match(obj: Obj, selector: str | None) -> bool:
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in selector.split(","):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif labels.get(term) is None:
            return False
    return True


def _fields_match(obj: Obj, selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        k, v = term.split("=", 1)
        node: Any = obj
        for part in k.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != v:
            return False
    return True


def _status(code: int, reason: str, message: str) -> tuple[int, Obj]:
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                  "reason": reason, "code": code}
