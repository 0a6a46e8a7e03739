"""Cluster access as kubectl does it, and one `request()` that wraps every failure once.

Every call to the API server goes through `Kube.request`: it turns unreachable servers,
401, 403 and conflicts into one-line `ClusterError`s naming what we were doing, and keeps
the response body for `--verbose`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from slurmk8s.errors import ClusterError

Obj = dict[str, Any]

APPLY_PATCH = "application/apply-patch+yaml"
# Connect fast-fails an unreachable server; reads may be slow on a loaded control plane.
REQUEST_TIMEOUT = (10, 60)


class KubeApiError(ClusterError):
    """A failed API request: one-line message, HTTP status, and the full response for --verbose."""

    def __init__(self, message: str, status: int = 0, detail: str = ""):
        super().__init__(message)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Access:
    """How to reach the cluster: kubectl's --kubeconfig and --context (None = kubectl's defaults)."""

    kubeconfig: str | None = None
    context: str | None = None


@dataclass(frozen=True)
class Response:
    """A successful (or explicitly tolerated) API response."""

    status: int
    body: Obj


@dataclass(frozen=True)
class RecordedCall:
    """One request as logged with --verbose."""

    method: str
    path: str
    status: int
    seconds: float


def load_configuration(access: Access) -> tuple[k8s_client.Configuration, str]:
    """Client configuration following kubectl: --kubeconfig, then KUBECONFIG, ~/.kube/config, in-cluster."""
    cfg = k8s_client.Configuration()
    default_file = Path(os.path.expanduser("~/.kube/config"))
    try:
        if access.kubeconfig or os.environ.get("KUBECONFIG") or default_file.exists():
            # Read KUBECONFIG now, not at import; the client merges a colon-separated list like kubectl.
            source = access.kubeconfig or os.environ.get("KUBECONFIG") or str(default_file)
            k8s_config.load_kube_config(config_file=source, context=access.context,
                                        client_configuration=cfg, persist_config=False)
            where = f"context {access.context}" if access.context else "the current context"
            return cfg, f"{where} of {source}"
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            if access.context:
                raise ClusterError(f"--context {access.context}: no kubeconfig found, and in-cluster access has no contexts")
            k8s_config.load_incluster_config(client_configuration=cfg)
            return cfg, "in-cluster service account"
    except ConfigException as e:
        raise ClusterError(f"cannot load Kubernetes credentials: {_one_line(str(e))}") from e
    except FileNotFoundError as e:
        raise ClusterError(f"cannot load Kubernetes credentials: {e.filename}: no such file") from e
    raise ClusterError("no Kubernetes cluster configured: no --kubeconfig, KUBECONFIG, ~/.kube/config "
                       "or in-cluster service account")


def connect(access: Access, verbose: bool = False, pool_size: int = 16) -> Kube:
    """A Kube for the cluster that access names (no request is made yet)."""
    cfg, source = load_configuration(access)
    cfg.connection_pool_maxsize = pool_size
    # urllib3 retries: one retry on connect so an unreachable server fails in seconds, not minutes.
    cfg.retries = urllib3.Retry(total=2, connect=1, read=0, status=0, backoff_factor=0.2, raise_on_status=False)
    return Kube(k8s_client.ApiClient(cfg), source, verbose=verbose)


class Kube:
    """A thread-safe handle on one API server; every request goes through `request`."""

    def __init__(self, api_client: k8s_client.ApiClient, source: str = "", verbose: bool = False,
                 log: Callable[[str], None] | None = None):
        self.api = api_client
        self.host = api_client.configuration.host
        self.source = source
        self.verbose = verbose
        self._log = log or (lambda line: print(line, file=sys.stderr))
        self._lock = threading.Lock()
        self.calls: list[RecordedCall] = []

    def request(self, method: str, path: str, *, what: str, query: Iterable[tuple[str, str]] = (),
                body: Obj | None = None, content_type: str = "application/json",
                tolerate: Iterable[int] = ()) -> Response:
        """Send one request; statuses in `tolerate` come back as a Response, others raise KubeApiError."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method_, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=list(query), header_params=headers, auth_settings=["BearerToken"])
        started = time.monotonic()
        try:
            raw = self.api.call_api(method_, url, header_params=headers, body=body,
                                    _request_timeout=REQUEST_TIMEOUT)
            data = raw.read()
        except k8s_client.ApiException as e:
            # The client reports TLS failures this way (status 0).
            raise KubeApiError(f"{what}: cannot talk to the Kubernetes API at {self.host}: {_one_line(e.reason or '')}",
                               detail=str(e)) from e
        except urllib3.exceptions.HTTPError as e:
            raise KubeApiError(f"{what}: cannot reach the Kubernetes API at {self.host} ({self.source}): "
                               f"{_connection_reason(e)}", detail=repr(e)) from e
        status = raw.status
        elapsed = time.monotonic() - started
        with self._lock:
            self.calls.append(RecordedCall(method, path, status, elapsed))
        if self.verbose:
            self._log(f"  {method} {path} -> {status} ({elapsed * 1000:.0f} ms)")
        parsed = _parse(data)
        if 200 <= status < 300 or status in tolerate:
            return Response(status, parsed)
        raise _api_error(what, status, parsed, data, self)


def _parse(data: bytes) -> Obj:
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except ValueError:
        return {"message": data.decode(errors="replace")[:500]}
    return parsed if isinstance(parsed, dict) else {"items": parsed}


def _api_error(what: str, status: int, body: Obj, raw: bytes, kube: Kube) -> KubeApiError:
    message = _one_line(body.get("message") or "")
    detail = f"HTTP {status} from {kube.host} ({kube.source})\n{raw.decode(errors='replace')}"
    if status == 401:
        text = (f"{what}: the Kubernetes API at {kube.host} rejected our credentials (401 Unauthorized); "
                f"they may have expired: log in again or choose another --context")
    elif status == 403:
        text = f"{what}: forbidden (403): {message or 'the credentials lack permission'}"
    elif status == 409 and body.get("reason") == "Conflict" and _conflict_fields(body):
        text = f"{what}: {_conflict_fields(body)}; another tool owns these fields (--force-conflicts takes them over)"
    elif status == 404:
        text = f"{what}: not found: {message}"
    else:
        text = f"{what}: HTTP {status} {body.get('reason', '')}: {message}".rstrip(": ")
    return KubeApiError(text, status, detail)


def _conflict_fields(body: Obj) -> str:
    """'conflict with "kubectl-edit": .spec.replicas' from a server-side apply 409."""
    causes = (body.get("details") or {}).get("causes") or []
    parts = [f"{c.get('message', '')}: {c.get('field', '')}".strip(": ") for c in causes]
    return "; ".join(p for p in parts if p)


def _connection_reason(e: Exception) -> str:
    reason = getattr(e, "reason", None) or e
    text = str(reason)
    for marker in ("Connection refused", "Name or service not known", "timed out", "No route to host",
                   "Temporary failure in name resolution", "certificate verify failed"):
        if marker in text:
            return marker.lower()
    return _one_line(text)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
