"""The one Kubernetes API the lab answers: statefulsets/scale, over HTTPS with a bearer token.

The rendered ResumeProgram/SuspendProgram scripts call it exactly as they would call a real
kube-apiserver (the lab hands them the address, a ServiceAccount token and the CA, as a
kubelet would). Authorization follows the bundle's Role: only the verbs and resourceNames
granted to the controller's ServiceAccount on statefulsets/scale are allowed.
"""

from __future__ import annotations

import http.server
import json
import re
import secrets
import ssl
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from slurmk8s.lab.errors import LabError
from slurmk8s.render import Bundle

ADMIN = "lab-admin"
SCALE_PATH = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/statefulsets/([^/]+)/scale$")


class NotFound(LabError):
    """The bundle has no StatefulSet of that name (the API answers 404)."""

    def __init__(self, statefulset: str):
        super().__init__(f"statefulset {statefulset} not found")
        self.statefulset = statefulset


@dataclass(frozen=True)
class Grant:
    """What one ServiceAccount may do on statefulsets/scale."""

    namespace: str
    service_account: str
    verbs: frozenset[str]
    names: frozenset[str]


def scale_grants(bundle: Bundle) -> list[Grant]:
    """statefulsets/scale permissions the bundle's Roles give, per bound ServiceAccount."""
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in bundle.of_kind("Role")}
    grants = []
    for binding in bundle.of_kind("RoleBinding"):
        ns = binding["metadata"]["namespace"]
        role = roles.get((ns, binding["roleRef"]["name"]))
        if role is None:
            continue
        for rule in role.get("rules", []):
            if "apps" in rule.get("apiGroups", []) and "statefulsets/scale" in rule.get("resources", []):
                for subject in binding.get("subjects", []):
                    if subject["kind"] == "ServiceAccount":
                        grants.append(Grant(subject.get("namespace", ns), subject["name"],
                                            frozenset(rule.get("verbs", [])), frozenset(rule.get("resourceNames", []))))
    return grants


@dataclass
class ScaleAPI:
    """HTTPS server on the lab bridge; get_scale/set_replicas act on the lab's StatefulSets.

    get_scale(name) -> (spec.replicas, status.replicas); set_replicas returns once the pods match;
    both raise NotFound for a StatefulSet the lab lacks.
    """

    address: str
    directory: Path
    get_scale: Callable[[str], tuple[int, int]]
    set_replicas: Callable[[str, int], None]
    grants: list[Grant]
    port: int = 443  # where kubernetes.default.svc answers
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)  # token -> (namespace, serviceaccount)
    calls: list[tuple[str, str, int]] = field(default_factory=list)  # (method, statefulset, status)

    def admin_token(self) -> str:
        """A token allowed to get/patch every StatefulSet's scale (what `slurmk8s scale --lab` uses, like a kubeconfig)."""
        token = self.token_for("", ADMIN)
        self.grants.append(Grant("", ADMIN, frozenset({"get", "patch"}), frozenset()))
        return token

    def token_for(self, namespace: str, service_account: str) -> str:
        """A bearer token that authenticates as that ServiceAccount."""
        token = secrets.token_urlsafe(32)
        self.tokens[token] = (namespace, service_account)
        return token

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def start(self) -> None:
        """Make a self-signed certificate for the bridge address and serve in a thread."""
        self.directory.mkdir(parents=True, exist_ok=True)
        key = self.directory / "tls.key"
        done = subprocess.run(
            # an EC key: 20 ms where RSA 2048 took 0.4 s of every boot here
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-days", "2", "-subj", "/CN=kubernetes",
             "-addext", f"subjectAltName=IP:{self.address},DNS:kubernetes.default.svc",
             "-keyout", str(key), "-out", str(self.ca_file)], capture_output=True, text=True)
        if done.returncode != 0:
            raise LabError(f"scale API: openssl could not make a certificate: {done.stderr.strip()}")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, key)
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, verb: str) -> None:
                m = SCALE_PATH.match(self.path)
                if not m:
                    return self._reply(404, {"kind": "Status", "code": 404, "message": f"{self.path}: not served by the lab"})
                namespace, name = m.groups()
                who = api.tokens.get(self.headers.get("Authorization", "").removeprefix("Bearer ").strip())
                if who is None:
                    api.calls.append((verb, name, 401))
                    return self._reply(401, {"kind": "Status", "code": 401, "message": "Unauthorized"})
                allowed = any(g.namespace in (namespace, "") and (g.namespace, g.service_account) == who
                              and verb in g.verbs and (not g.names or name in g.names) for g in api.grants)
                if not allowed:
                    api.calls.append((verb, name, 403))
                    return self._reply(403, {"kind": "Status", "code": 403,
                                             "message": f"{who[1]} cannot {verb} statefulsets/scale {name}"})
                try:
                    if verb == "patch":
                        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                        api.set_replicas(name, int(body["spec"]["replicas"]))
                    replicas, running = api.get_scale(name)
                except NotFound as e:
                    api.calls.append((verb, name, 404))
                    return self._reply(404, {"kind": "Status", "code": 404, "message": str(e)})
                except (ValueError, LabError) as e:
                    api.calls.append((verb, name, 422))
                    return self._reply(422, {"kind": "Status", "code": 422, "message": str(e)})
                api.calls.append((verb, name, 200))
                self._reply(200, {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                  "metadata": {"name": name, "namespace": namespace},
                                  "spec": {"replicas": replicas}, "status": {"replicas": running}})

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                self._handle("get")

            def do_PATCH(self) -> None:  # noqa: N802
                self._handle("patch")

        self._server: http.server.ThreadingHTTPServer | None = http.server.ThreadingHTTPServer(
            (self.address, self.port), Handler)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="lab-scale-api", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        server, self._server = getattr(self, "_server", None), None
        if server is not None:
            server.shutdown()
            server.server_close()
