"""The one Kubernetes API client of the code slurmk8s ships into pods: the pod's ServiceAccount token, the
cluster CA, the API server's certificate checked against its name, retries and timeouts.

Standard library only (the programs run in a Slurm image with python3 and nothing else). Shipped beside
each program that calls the API (power.py, busy.py, the rollout hook, the upgrade check, the health
check's cordon test), which imports it by its bare name.

The address is KUBERNETES_SERVICE_HOST (an IP, set in every pod), or the API's cluster DNS name when a
program starts with a bare environment (slurmctld's ResumeProgram may). Whatever the address, TLS
verifies the certificate for API_NAME, as the official clients do: every kube-apiserver serving
certificate names kubernetes.default.svc (kubeadm, kind and the managed services add it).
"""

import base64
import http.client
import json
import os
import socket
import ssl
import sys
import time
import urllib.parse

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_NAME = "kubernetes.default.svc"
MERGE_PATCH = "application/merge-patch+json"


def log(message):
    print(message, file=sys.stderr, flush=True)


class ApiError(OSError):
    """An API call that was refused (status: its HTTP status) or that failed on every attempt (status None)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class _Connection(http.client.HTTPSConnection):
    """HTTPS to the API's address; the TLS handshake is the client's (its CA, its name)."""

    def __init__(self, api, timeout):
        super().__init__(api.host, api.port, timeout=timeout)
        self._api = api

    def connect(self):
        self.sock = self._api.connect(self.timeout)


class Api:
    """The API calls of the shipped programs, with a ServiceAccount's token and CA (sa_dir).

    A call retries 429, 5xx and connection failures, `attempts` times in all; each request may take
    `timeout` seconds. A certificate that the CA did not sign, or that does not name tls_name, is refused
    at once and never retried.
    """

    def __init__(self, sa_dir=None, host=None, port=None, tls_name=API_NAME, timeout=30.0, attempts=6,
                 sleep=time.sleep, say=log):
        self.sa_dir = sa_dir or SA_DIR
        self.host = host or os.environ.get("KUBERNETES_SERVICE_HOST") or API_NAME
        self.port = int(port or os.environ.get("KUBERNETES_SERVICE_PORT") or 443)
        self.tls_name = tls_name
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.sleep = sleep
        self.say = say
        # check_hostname stays on (create_default_context's default): the name checked is tls_name.
        self.context = ssl.create_default_context(cafile=os.path.join(self.sa_dir, "ca.crt"))
        self._namespace = None

    @property
    def namespace(self):
        """The namespace this pod runs in (a kustomize overlay may have moved it from the rendered one)."""
        if self._namespace is None:
            with open(os.path.join(self.sa_dir, "namespace")) as fh:
                self._namespace = fh.read().strip()
        return self._namespace

    def token(self):
        with open(os.path.join(self.sa_dir, "token")) as fh:
            return fh.read().strip()  # re-read: the kubelet rotates projected tokens

    def connect(self, timeout):
        """A TLS socket to the API server, its certificate verified for tls_name."""
        raw = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            return self.context.wrap_socket(raw, server_hostname=self.tls_name)
        except BaseException:
            raw.close()
            raise

    def _once(self, method, path, data, content_type):
        connection = _Connection(self, self.timeout)
        try:
            headers = {"Authorization": f"Bearer {self.token()}", "Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            return response.status, response.reason, response.read()
        finally:
            connection.close()

    def call(self, method, path, body=None, content_type="application/json"):
        """The decoded answer; None for 404. ApiError for another refusal, or when no attempt got an answer."""
        data = None if body is None else json.dumps(body).encode()
        last = ""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(attempt)
            try:
                status, reason, payload = self._once(method, path, data, content_type)
            except ssl.SSLCertVerificationError as e:
                raise ApiError(f"{method} {path}: the API server's certificate is not valid for {self.tls_name}: "
                               f"{e.verify_message}") from e
            except OSError as e:
                last = str(e) or type(e).__name__
                self.say(f"{method} {path}: {last}" + ("; retrying" if attempt + 1 < self.attempts else ""))
                continue
            if status == 404:
                return None
            if 200 <= status < 300:
                return json.loads(payload) if payload.strip() else {}
            last = f"{status} {reason}"
            if status < 500 and status != 429:
                raise ApiError(f"{method} {path}: {last}", status)
            self.say(f"{method} {path}: {last}" + ("; retrying" if attempt + 1 < self.attempts else ""))
        raise ApiError(f"{method} {path}: no answer after {self.attempts} attempt(s): {last}")

    def get(self, path):
        return self.call("GET", path)

    def merge_patch(self, path, body):
        return self.call("PATCH", path, body, MERGE_PATCH)

    def statefulset(self, name):
        return self.get(f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}")

    def pod(self, name):
        return self.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def delete_pod(self, name):
        self.call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def annotate_pod(self, name, key, value):
        self.merge_patch(f"/api/v1/namespaces/{self.namespace}/pods/{name}",
                         {"metadata": {"annotations": {key: value}}})

    def label_pod(self, name, key, value):
        self.merge_patch(f"/api/v1/namespaces/{self.namespace}/pods/{name}", {"metadata": {"labels": {key: value}}})

    def exec(self, pod, container, argv, timeout=60):
        """stdout of argv run in the container: the exec subresource over a WebSocket (RFC 6455,
        Kubernetes' v4.channel.k8s.io: the first byte of each message names the stream)."""
        query = urllib.parse.urlencode([("container", container), ("stdout", "true"), ("stderr", "true")]
                                       + [("command", a) for a in argv])
        key = base64.b64encode(os.urandom(16)).decode()
        with self.connect(timeout) as sock:
            sock.sendall((f"GET /api/v1/namespaces/{self.namespace}/pods/{pod}/exec?{query} HTTP/1.1\r\n"
                          f"Host: {self.tls_name}\r\nAuthorization: Bearer {self.token()}\r\n"
                          "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n").encode())
            stream = sock.makefile("rb")
            status = stream.readline().decode("latin-1")
            while stream.readline() not in (b"\r\n", b""):
                pass  # the rest of the upgrade's headers
            if " 101 " not in status:
                raise OSError(f"exec in {pod}: {status.strip()}")
            out, error = b"", b""
            while True:
                head = stream.read(2)
                if len(head) < 2:
                    break
                opcode, length = head[0] & 0x0F, head[1] & 0x7F
                if length >= 126:
                    length = int.from_bytes(stream.read(2 if length == 126 else 8), "big")
                payload = stream.read(length)
                if opcode == 0x8:  # close
                    break
                if opcode in (0x0, 0x1, 0x2) and payload:
                    if payload[0] == 1:
                        out += payload[1:]
                    elif payload[0] == 3:
                        error += payload[1:]
        if error and json.loads(error).get("status") != "Success":
            raise OSError(f"exec in {pod}: {json.loads(error).get('message', error.decode())}")
        return out.decode()
