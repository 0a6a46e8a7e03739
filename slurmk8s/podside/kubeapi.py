"""The few Kubernetes API calls slurmk8s's in-cluster hook Jobs make, with the pod's ServiceAccount token.

Standard library only (the Jobs run in a Slurm image with python3 and nothing else). Shipped in each
hook's ConfigMap next to its program (render/k8s/rollout.py, render/k8s/upgradecheck.py).
"""

import base64
import json
import os
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def log(message):
    print(message, file=sys.stderr, flush=True)


class Api:
    """The few API calls the rollout makes, with the pod's ServiceAccount."""

    def __init__(self):
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{host}:{port}"
        with open(os.path.join(SA_DIR, "namespace")) as fh:
            self.namespace = fh.read().strip()
        self.context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))
        self.context.check_hostname = False  # reached by IP; the cluster CA pins who answers

    def token(self):
        with open(os.path.join(SA_DIR, "token")) as fh:
            return fh.read().strip()  # re-read: the kubelet rotates projected tokens

    def call(self, method, path, body=None, content_type="application/json"):
        """The decoded answer; None for 404."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, method=method, data=data)
        request.add_header("Authorization", f"Bearer {self.token()}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        for attempt in range(6):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    return None
                if e.code < 500 and e.code != 429:
                    raise SystemExit(f"{method} {path}: {e.code} {e.reason}")
                log(f"{method} {path}: {e}; retrying")
            except OSError as e:
                log(f"{method} {path}: {e}; retrying")
            time.sleep(1 + attempt)
        raise SystemExit(f"{method} {path}: API unreachable")

    def statefulset(self, name):
        return self.call("GET", f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}")

    def pod(self, name):
        return self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def delete_pod(self, name):
        self.call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def annotate_pod(self, name, key, value):
        self.call("PATCH", f"/api/v1/namespaces/{self.namespace}/pods/{name}",
                  {"metadata": {"annotations": {key: value}}}, "application/merge-patch+json")

    def exec(self, pod, container, argv, timeout=60):
        """stdout of argv run in the container: the exec subresource over a WebSocket (RFC 6455,
        Kubernetes' v4.channel.k8s.io: the first byte of each message names the stream)."""
        query = urllib.parse.urlencode([("container", container), ("stdout", "true"), ("stderr", "true")]
                                       + [("command", a) for a in argv])
        host, port = urllib.parse.urlsplit(self.base).hostname, urllib.parse.urlsplit(self.base).port
        key = base64.b64encode(os.urandom(16)).decode()
        raw = socket.create_connection((host, port), timeout=timeout)
        with self.context.wrap_socket(raw, server_hostname=host) as sock:
            sock.sendall((f"GET /api/v1/namespaces/{self.namespace}/pods/{pod}/exec?{query} HTTP/1.1\r\n"
                          f"Host: {host}:{port}\r\nAuthorization: Bearer {self.token()}\r\n"
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
