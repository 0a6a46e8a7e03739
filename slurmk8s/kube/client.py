"""Cluster access as kubectl does it, and one `request()` that wraps every failure once.

Every call to the API server goes through `Kube.request`: it turns unreachable servers,
401, 403 and conflicts into one-line `ClusterError`s naming what we were doing, and keeps
the response body for `--verbose`. It bounds each request by the command's --timeout, and
retries what the API server says is temporary (429, 502-504), waiting as Retry-After asks.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from slurmk8s.errors import ClusterError

Obj = dict[str, Any]

APPLY_PATCH = "application/apply-patch+yaml"
# One attempt: connect fast-fails an unreachable server; a read may be slow on a loaded control
# plane, but no single answer takes half a minute. Both shrink to what --timeout leaves.
CONNECT_TIMEOUT, READ_TIMEOUT = 10.0, 30.0
DEFAULT_TIMEOUT = 60.0  # a request and its retries, when the command has no --timeout
DEADLINE_SLACK = 0.5  # past a request's deadline, for its thread to report its own error first
# A reply body larger than this is refused: our label-selected lists in one namespace stay far below
# it, and a runaway reply (a proxy's, or 200 MB of some other list) must not take the memory.
MAX_REPLY_BYTES = 64 << 20
CHUNK_BYTES = 1 << 16
# Statuses that say "try again": too many requests, and a gateway or server that is briefly away.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 8.0


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
    what: str = ""

    def object_of(self, kind: str, name: str) -> Obj:
        """The body as the object asked for: a reply of another kind or name, or without an apiVersion,
        is a ClusterError (a server answering `{}` must not pass for the object)."""
        meta = self.body.get("metadata")
        found = (self.body.get("kind"), meta.get("name") if isinstance(meta, dict) else None)
        if found != (kind, name) or not isinstance(self.body.get("apiVersion"), str):
            got = f"kind {found[0]!r}, apiVersion {self.body.get('apiVersion')!r}, metadata.name {found[1]!r}"
            raise KubeApiError(f"{self.what}: malformed reply from the Kubernetes API: expected {kind}/{name}, got "
                               f"{_one_line(got)[:200]}", self.status, json.dumps(self.body)[:2000])
        return self.body

    def items(self) -> list[Obj]:
        """The objects of a list reply; a reply that is not one is a ClusterError, not a KeyError later."""
        kind = self.body.get("kind")
        if not (isinstance(kind, str) and kind.endswith("List") and isinstance(self.body.get("apiVersion"), str)):
            raise KubeApiError(f"{self.what}: malformed reply from the Kubernetes API: expected a list (kind *List, "
                               f"with an apiVersion), got kind {_one_line(repr(kind))[:80]}", self.status,
                               json.dumps(self.body)[:2000])
        items = self.body.get("items")
        if items is None:
            return []
        if not isinstance(items, list) or not all(
                isinstance(i, dict) and isinstance(i.get("metadata"), dict) and isinstance(i["metadata"].get("name"), str)
                for i in items):
            raise KubeApiError(f"{self.what}: malformed reply from the Kubernetes API: expected a list of objects "
                               "with metadata.name", self.status, json.dumps(self.body)[:2000])
        return items


def dig(obj: Any, *path: str, default: Any = None) -> Any:
    """obj[path[0]][path[1]]..., or default where a level is missing or not a mapping (replies are untrusted)."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


@dataclass(frozen=True)
class RecordedCall:
    """One request as logged with --verbose."""

    method: str
    path: str
    status: int
    seconds: float


def kubeconfig_files(access: Access) -> list[str]:
    """The kubeconfig files kubectl would read, in its order: --kubeconfig, else $KUBECONFIG, else ~/.kube/config."""
    if access.kubeconfig:
        return [access.kubeconfig]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
    default_file = Path(os.path.expanduser("~/.kube/config"))
    return [str(default_file)] if default_file.exists() else []


def read_kubeconfig(path: str) -> Obj:
    """One kubeconfig file as a mapping; anything else is a one-line ClusterError naming the file."""
    try:
        with open(path, "rb") as f:
            data = yaml.safe_load(f.read().decode("utf-8"))
    except IsADirectoryError:
        raise ClusterError(f"kubeconfig {path}: is a directory, not a kubeconfig file") from None
    except UnicodeDecodeError:
        raise ClusterError(f"kubeconfig {path}: not a kubeconfig (not UTF-8 text)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ClusterError(f"kubeconfig {path}: not YAML{where}: {getattr(e, 'problem', None) or e}") from None
    except OSError as e:
        raise ClusterError(f"kubeconfig {path}: cannot read: {e.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else type(data).__name__
        raise ClusterError(f"kubeconfig {path}: not a kubeconfig (expected a mapping, found {kind})")
    return data


def current_context(files: list[str]) -> str | None:
    """kubectl's rule: the first file that sets current-context wins (the Python client takes the last).

    Every file is read, so a broken one is reported by name even when an earlier one decides.
    """
    found = None
    for path in files:
        if not os.path.exists(path):
            continue  # kubectl skips missing files in $KUBECONFIG
        context = read_kubeconfig(path).get("current-context")
        if context and found is None:
            found = str(context)
    return found


def load_configuration(access: Access) -> tuple[k8s_client.Configuration, str, tuple[str | None, str | None]]:
    """Client configuration following kubectl: --kubeconfig, then KUBECONFIG, ~/.kube/config, in-cluster;
    with where it came from, as a sentence and as (context name, kubeconfig file), both None in-cluster."""
    cfg = k8s_client.Configuration()
    files = kubeconfig_files(access)
    try:
        if files:
            if access.kubeconfig and not os.path.exists(access.kubeconfig):
                raise ClusterError(f"kubeconfig {access.kubeconfig}: no such file")
            context = current_context(files)
            context = access.context or context
            source = access.kubeconfig or os.pathsep.join(files)
            try:
                k8s_config.load_kube_config(config_file=source, context=context,
                                            client_configuration=cfg, persist_config=False)
            except (ConfigException, ClusterError, FileNotFoundError):
                raise
            except Exception as e:  # a kubeconfig whose entries have the wrong shape (a list for a map, ...)
                raise ClusterError(f"cannot load Kubernetes credentials from {source}: malformed kubeconfig "
                                   f"({type(e).__name__}: {_one_line(str(e))})") from e
            return cfg, f"context {context or '(none)'} of {source}", (context, source)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            if access.context:
                raise ClusterError(f"--context {access.context}: no kubeconfig found, and in-cluster access has no contexts")
            k8s_config.load_incluster_config(client_configuration=cfg)
            return cfg, "in-cluster service account", (None, None)
    except ConfigException as e:
        raise ClusterError(f"cannot load Kubernetes credentials: {_one_line(str(e))}") from e
    except FileNotFoundError as e:
        raise ClusterError(f"cannot load Kubernetes credentials: {e.filename}: no such file") from e
    raise ClusterError("no Kubernetes cluster configured: no --kubeconfig, KUBECONFIG, ~/.kube/config "
                       "or in-cluster service account")


def request_budget(timeout: float) -> float:
    """How long one request (with its retries) may take under a command's --timeout."""
    return min(timeout, DEFAULT_TIMEOUT)


def connect(access: Access, verbose: bool = False, pool_size: int = 16, timeout: float = DEFAULT_TIMEOUT) -> Kube:
    """A Kube for the cluster that access names (no request is made yet); timeout bounds each request."""
    cfg, source, (context, kubeconfig) = load_configuration(access)
    cfg.connection_pool_maxsize = pool_size
    # urllib3 retries: one retry on connect so an unreachable server fails in seconds, not minutes.
    # Status retries are Kube.request's own (it honours Retry-After within the timeout).
    cfg.retries = urllib3.Retry(total=2, connect=1, read=0, status=0, backoff_factor=0.2, raise_on_status=False)
    kube = Kube(k8s_client.ApiClient(cfg), source, verbose=verbose, timeout=timeout)
    kube.context_name, kube.kubeconfig = context, kubeconfig
    return kube


class Kube:
    """A thread-safe handle on one API server; every request goes through `request`."""

    def __init__(self, api_client: k8s_client.ApiClient, source: str = "", verbose: bool = False,
                 log: Callable[[str], None] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 sleep: Callable[[float], None] = time.sleep):
        self.api = api_client
        self.host = api_client.configuration.host
        self.source = source
        self.context_name: str | None = None  # the kubeconfig context and file; None in-cluster
        self.kubeconfig: str | None = None
        self.verbose = verbose
        self.timeout = timeout
        self._sleep = sleep
        self._log = log or (lambda line: print(line, file=sys.stderr))
        self._lock = threading.Lock()
        self._local = threading.local()
        self.calls: list[RecordedCall] = []

    @contextmanager
    def deadline(self, when: float) -> Iterator[None]:
        """Requests made by this thread inside the block end (with their retries) by time.monotonic() == when."""
        outer = getattr(self._local, "deadline", None)
        self._local.deadline = when if outer is None else min(outer, when)
        try:
            yield
        finally:
            self._local.deadline = outer

    def request(self, method: str, path: str, *, what: str, query: Iterable[tuple[str, str]] = (),
                body: Obj | None = None, content_type: str = "application/json",
                tolerate: Iterable[int] = ()) -> Response:
        """Send one request; statuses in `tolerate` come back as a Response, others raise KubeApiError.

        A 429 or 502-504 is retried with backoff (Retry-After when the server gives one) while the
        request's budget lasts: --timeout, or what is left of an enclosing deadline().
        """
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        query = list(query)
        tolerate = tuple(tolerate)
        started = time.monotonic()
        end = started + self.timeout
        outer = getattr(self._local, "deadline", None)
        if outer is not None:
            end = min(end, outer)
        attempt = 0
        while True:
            attempt += 1
            status, data, retry_after = self._send(method, path, what, query, headers, body, end)
            parsed = _parse(data)
            if 200 <= status < 300 and data and not _is_object(data):
                text = data.decode(errors="replace")
                raise KubeApiError(f"{what}: malformed reply from the Kubernetes API: expected a JSON object, got "
                                   f"{_one_line(text[:80])!r}", status, text)
            if 200 <= status < 300 or status in tolerate:
                return Response(status, parsed, what)
            error = _api_error(what, status, parsed, data, self)
            if status not in RETRY_STATUSES and not (status == 500 and retry_after is not None):
                raise error
            pause = retry_after if retry_after is not None else \
                min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
            left = end - time.monotonic()
            if pause > left:
                asked = f"; the server asked to retry after {retry_after:g} s" if retry_after is not None else ""
                raise KubeApiError(f"{error} (gave up after {attempt} attempt(s) in {time.monotonic() - started:.0f} s"
                                   f"{asked}, beyond --timeout)", status, error.detail) from error
            if self.verbose:
                self._log(f"  {method} {path}: HTTP {status}, retrying in {pause:.1f} s")
            self._sleep(pause)

    def _send(self, method: str, path: str, what: str, query: list, headers: dict, body: Obj | None,
              end: float) -> tuple[int, bytes, float | None]:
        """One attempt: (status, body bytes, Retry-After seconds or None), over by `end` as a whole.

        urllib3's read timeout bounds each socket read, not the reply: a server sending a byte every
        half second would never trip it. So the attempt runs on its own thread, and the caller stops
        waiting at the deadline; the body is read a chunk at a time, checking the deadline and its size.
        """
        left = end - time.monotonic()
        if left <= 0:
            raise self._timed_out(what)
        method_, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=query, header_params=dict(headers), auth_settings=["BearerToken"])
        started = time.monotonic()
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def attempt() -> None:
            try:
                raw = self.api.call_api(method_, url, header_params=headers, body=body,
                                        _request_timeout=(min(CONNECT_TIMEOUT, left), min(READ_TIMEOUT, left)))
                outcome["reply"] = raw, self._read_body(raw, what, end)
            except BaseException as e:  # handed to the caller's thread as it is
                outcome["error"] = e
            finally:
                done.set()

        # A daemon thread: one stuck in a stalled server's headers must not hold the process at exit.
        threading.Thread(target=attempt, name="kube-request", daemon=True).start()
        if not done.wait(max(0.0, end - time.monotonic()) + DEADLINE_SLACK):
            raise self._timed_out(what)
        try:
            if "error" in outcome:
                raise outcome["error"]
        except k8s_client.ApiException as e:
            # The client reports TLS failures this way (status 0).
            raise KubeApiError(f"{what}: cannot talk to the Kubernetes API at {self.host}: {_one_line(e.reason or '')}",
                               detail=str(e)) from e
        except urllib3.exceptions.HTTPError as e:
            raise KubeApiError(f"{what}: cannot reach the Kubernetes API at {self.host} ({self.source}): "
                               f"{_connection_reason(e)}", detail=repr(e)) from e
        raw, data = outcome["reply"]
        status = raw.status
        elapsed = time.monotonic() - started
        with self._lock:
            self.calls.append(RecordedCall(method, path, status, elapsed))
        if self.verbose:
            self._log(f"  {method} {path} -> {status} ({elapsed * 1000:.0f} ms)")
        return status, data, _retry_after(raw, data)

    def _timed_out(self, what: str) -> KubeApiError:
        return KubeApiError(f"{what}: timed out: no complete answer from the Kubernetes API at {self.host} "
                            "within --timeout")

    def _read_body(self, raw: Any, what: str, end: float) -> bytes:
        """The reply's body, read as it arrives: KubeApiError past the deadline or beyond MAX_REPLY_BYTES."""
        reply = raw.response  # the urllib3 response, streamed (the client asks for no preloading)
        too_big = KubeApiError(f"{what}: the Kubernetes API's reply is larger than {MAX_REPLY_BYTES >> 20} MiB; "
                               "refused", raw.status)
        read = getattr(reply, "read1", reply.read)  # read1: what has arrived, at most one socket read
        chunks, size = [], 0
        try:
            length = reply.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > MAX_REPLY_BYTES:
                raise too_big
            while chunk := read(CHUNK_BYTES):
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise too_big
                if time.monotonic() > end:
                    raise self._timed_out(what)
                chunks.append(chunk)
        except KubeApiError:
            reply.close()  # the rest of the body is not read: the connection cannot be reused
            raise
        finally:
            reply.release_conn()
        return b"".join(chunks)


def _parse(data: bytes) -> Obj:
    if not data:
        return {}
    try:
        parsed = json.loads(data)
    except ValueError:
        return {"message": data.decode(errors="replace")[:500]}
    return parsed if isinstance(parsed, dict) else {"message": f"unexpected reply: {json.dumps(parsed)[:200]}"}


def _is_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def _retry_after(raw: Any, data: bytes) -> float | None:
    """Seconds the server asks us to wait: the Retry-After header, else a Status's details.retryAfterSeconds."""
    headers = getattr(raw, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None and data:
        try:
            value = dig(json.loads(data), "details", "retryAfterSeconds")
        except ValueError:
            value = None
    if value is None:  # float(None) is the TypeError below
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < 24 * 3600 else None


def _api_error(what: str, status: int, body: Obj, raw: bytes, kube: Kube) -> KubeApiError:
    message = _one_line(str(body.get("message") or ""))
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
        reason = body.get("reason") if isinstance(body.get("reason"), str) else ""
        text = f"{what}: HTTP {status} {reason}: {message}".rstrip(": ")
    return KubeApiError(text, status, detail)


def _conflict_fields(body: Obj) -> str:
    """'conflict with "kubectl-edit": .spec.replicas' from a server-side apply 409 (malformed parts skipped)."""
    causes = dig(body, "details", "causes", default=[])
    parts = [f"{c.get('message', '')}: {c.get('field', '')}".strip(": ")
             for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []
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
