"""Run a command in a pod's container, as `kubectl exec` does (websocket)."""

from __future__ import annotations

import re
from typing import Callable

from kubernetes import client as k8s_client
from kubernetes.stream import stream

from slurmk8s import naming
from slurmk8s.errors import ClusterError, ExecRefused
from slurmk8s.kube.client import Kube

ExecFn = Callable[[list[str]], str]

# The websocket library's words for a refused upgrade (websocket/_handshake.py), which kubernetes.stream
# passes on as an ApiException's reason.
_HANDSHAKE_STATUS = re.compile(r"^Handshake status (\d{3})\b")


def refusal_hint(status: int, namespace: str) -> str:
    """What to check when an exec is refused."""
    if status == 401:
        return "the credentials were rejected; log in again or choose another --context"
    gone = "the pod is gone, or the API server does not serve exec; else " if status == 404 else ""
    return (f"{gone}the credentials need RBAC permission to create pods/exec in namespace {namespace} "
            f"(check: kubectl auth can-i create pods/exec -n {namespace})")


def exec_in_pod(kube: Kube, namespace: str, pod: str, container: str, command: list[str], timeout: float = 30) -> str:
    """stdout of command; a non-zero exit or a failed connection raises ClusterError."""
    what = f"exec {' '.join(command)!r} in pod {namespace}/{pod}"
    # stream() swaps call_api on the client it is given: a private client keeps that
    # from leaking into requests other threads make at the same time.
    core = k8s_client.CoreV1Api(k8s_client.ApiClient(kube.api.configuration))
    try:
        ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace, container=container, command=command,
                    stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False,
                    _request_timeout=timeout)
        ws.run_forever(timeout=timeout)
        out, err, rc = ws.read_stdout(), ws.read_stderr(), ws.returncode
        ws.close()
    except k8s_client.ApiException as e:
        # The websocket handshake error carries headers and body after ' -+-+- '.
        reason = " ".join(str(e.reason or "").split(" -+-+- ")[0].split())
        refused = _HANDSHAKE_STATUS.match(reason)
        if refused and int(refused.group(1)) in (401, 403, 404):
            raise ExecRefused(f"{what}: {reason}: {refusal_hint(int(refused.group(1)), namespace)}") from e
        raise ClusterError(f"{what}: {reason}") from e
    except Exception as e:  # the websocket library raises its own hierarchy and OSErrors
        raise ClusterError(f"{what}: {type(e).__name__}: {' '.join(str(e).split())}") from e
    if rc is None:
        raise ClusterError(f"{what}: no exit status within {timeout:.0f} s")
    if rc != 0:
        raise ClusterError(f"{what}: exit status {rc}: {' '.join(err.split())[:300]}")
    return out


def controller_exec(kube: Kube, namespace: str, pod: str, container: str = naming.DAEMON[naming.CONTROLLER]) -> ExecFn:
    """An ExecFn bound to the (primary) controller pod."""
    return lambda command: exec_in_pod(kube, namespace, pod, container, command)
