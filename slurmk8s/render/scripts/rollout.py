#!/usr/bin/env python3
"""What `up` does after applying, from inside the cluster: the GitOps hook Job (Argo CD PostSync, Helm
post-upgrade).

First the in-place reconfigure: nudge the controller pods, wait until slurmctld's mounted Slurm files
are the rendered ones (their digest, read by an exec in slurmctld), then `scontrol reconfigure`. Then
the rollout, with the same driver as `slurmk8s rollout` (rollout_core.py next to this file is
slurmk8s's render/rollout.py): drain each stale slurmd pod's node, wait for its jobs, delete the pod,
wait for the new one, resume. It talks to the API with the Job's ServiceAccount token (get the pool
StatefulSets and their pods, delete those pods; annotate and exec in the controller pods: nothing
else) and to slurmctld as SlurmUser.

Standard library only; settings.json next to this file names the StatefulSets and spec.rollout.
"""

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rollout_core  # noqa: E402  (shipped beside this file)

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ANNOTATION_CONFIG_SEEN = "slurmk8s.io/config-applied"  # actions/reconfigure.py's nudge


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


def slurm(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return out.stdout


def main():
    with open(os.path.join(HERE, "settings.json")) as fh:
        settings = json.load(fh)
    api = Api()

    def statefulsets():
        return [s for s in (api.statefulset(n) for n in settings["statefulsets"]) if s]

    def pods():
        # By name: the Role grants get/delete on exactly the pool pods, not a namespace-wide list.
        found = []
        for sts in statefulsets():
            for i in range(int(sts["spec"].get("replicas", 0))):
                pod = api.pod(f"{sts['metadata']['name']}-{i}")
                if pod:
                    found.append(pod)
        return found

    controllers = settings["controllers"]

    def seen():
        try:
            return api.exec(controllers[0], "slurmctld", rollout_core.SEEN_DIGEST)
        except OSError as e:
            log(f"reconfigure: {e}; retrying")
            return ""

    try:
        took = rollout_core.reconfigure_when_seen(
            settings["configDigest"], controllers,
            lambda pod, value: api.annotate_pod(pod, ANNOTATION_CONFIG_SEEN, value), seen, slurm,
            time.monotonic, time.sleep, settings["reconfigureTimeout"])
    except rollout_core.ReconfigureStopped as e:
        log(f"{e}; sync again")
        return 1
    log(f"reconfigured in place: slurmctld read the synced config {took:.0f} s after the sync; no pod restarted for it")
    effects = rollout_core.Effects(statefulsets=statefulsets, pods=pods, delete_pod=api.delete_pod, slurm=slurm,
                                   clock=time.monotonic, sleep=time.sleep, say=log)
    config = rollout_core.Settings(max_unavailable=settings["maxUnavailable"],
                                   drain_timeout=settings["drainTimeout"], ready_timeout=settings["readyTimeout"])
    try:
        rollout_core.run_rollout(effects, config)
    except rollout_core.RolloutStopped as e:
        log(str(e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
