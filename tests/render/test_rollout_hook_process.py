"""The rollout hook's shipped files run as the Job runs them (python3 rollout.py in a directory of the ConfigMap's
files), against a real HTTPS server in the API server's part: the reconfigure (annotate, exec over a WebSocket,
scontrol reconfigure), then a rollout with nothing to replace."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

from slurmk8s.actions.render import render_file
from slurmk8s.podside import rollout_core as rollout

ROOT = Path(__file__).resolve().parents[2]
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"
TOKEN = "rollout-token"


def frame(payload: bytes) -> bytes:
    n = len(payload)
    return bytes([0x82]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big")) + payload


class Cluster:
    """Just enough of the API server for the hook: the pool StatefulSet and pods, the controller pod's patch and exec."""

    def __init__(self, tmp_path: Path, seen_digests: list[str]):
        self.seen = list(seen_digests)
        self.calls: list[tuple[str, str]] = []
        key, self.cert = tmp_path / "key.pem", tmp_path / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=api",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc", "-keyout", str(key), "-out", str(self.cert)],
                       check=True, capture_output=True, timeout=60)
        cluster = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                path = urllib.parse.urlsplit(self.path).path
                cluster.calls.append(("GET", path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.answer(401, {})
                if path.endswith("/pods/dev-controller-0/exec"):
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    assert self.headers["Upgrade"] == "websocket", self.headers
                    assert query["command"] == ["/bin/sh", "-c", "cat /mnt/slurm-config/* | sha256sum"], query
                    self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                     b"Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n")
                    digest = cluster.seen.pop(0) if len(cluster.seen) > 1 else cluster.seen[0]
                    self.wfile.write(frame(b"\x01") + frame(b"\x01" + f"{digest}  -\n".encode())
                                     + frame(b'\x03{"metadata":{},"status":"Success"}') + b"\x88\x00")
                    self.close_connection = True
                    return
                if path == "/apis/apps/v1/namespaces/slurm/statefulsets/dev-cpu":
                    return self.answer(200, {"metadata": {"name": "dev-cpu", "labels": {
                        "app.kubernetes.io/component": "worker", "slurmk8s.io/pool": "cpu"}},
                        "spec": {"replicas": 1, "updateStrategy": {"type": "OnDelete"}},
                        "status": {"updateRevision": "dev-cpu-1"}})
                if path == "/api/v1/namespaces/slurm/pods/dev-cpu-0":
                    return self.answer(200, {"metadata": {"name": "dev-cpu-0",
                                                          "labels": {"controller-revision-hash": "dev-cpu-1"}}})
                return self.answer(404, {})

            def do_PATCH(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                cluster.calls.append(("PATCH", self.path))
                assert self.headers["Content-Type"] == "application/merge-patch+json"
                self.answer(200, body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def run_hook(tmp_path: Path, cluster: Cluster, reconfigure_timeout: int = 30) -> tuple[subprocess.CompletedProcess, list[str]]:
    configmap = next(h for h in render_file(KIND_DEV).hooks if h["kind"] == "ConfigMap"
                     and h["metadata"]["name"] == "dev-rollout")
    hook, sa, bin_dir = tmp_path / "hook", tmp_path / "sa", tmp_path / "bin"
    for d in (hook, sa, bin_dir):
        d.mkdir()
    for name, text in configmap["data"].items():
        if name == "kubeapi.py":
            text = text.replace('SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"', f'SA_DIR = "{sa}"')
        if name == "settings.json":
            text = json.dumps({**json.loads(text), "reconfigureTimeout": reconfigure_timeout})
        (hook / name).write_text(text)
    (sa / "token").write_text(TOKEN)
    (sa / "namespace").write_text("slurm")
    (sa / "ca.crt").write_text(cluster.cert.read_text())
    calls = tmp_path / "slurm-calls"
    for tool in ("scontrol", "sinfo", "squeue"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho \"{tool} $*\" >> {calls}\n")
        os.chmod(bin_dir / tool, 0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(cluster.server.server_address[1])}
    done = subprocess.run([sys.executable, str(hook / "rollout.py")], env=env, capture_output=True, text=True,
                          timeout=120)
    return done, calls.read_text().splitlines() if calls.exists() else []


def rendered_digest() -> str:
    return json.loads(next(h for h in render_file(KIND_DEV).hooks if h["kind"] == "ConfigMap"
                           and h["metadata"]["name"] == "dev-rollout")["data"]["settings.json"])["configDigest"]


def test_the_hook_reconfigures_once_slurmctld_sees_the_synced_files(tmp_path: Path) -> None:
    want = rendered_digest()
    cluster = Cluster(tmp_path, [hashlib.sha256(b"old").hexdigest(), want])
    done, slurm_calls = run_hook(tmp_path, cluster)
    assert done.returncode == 0, done.stderr
    assert slurm_calls == ["scontrol reconfigure"]
    assert cluster.calls[0] == ("PATCH", "/api/v1/namespaces/slurm/pods/dev-controller-0")
    assert cluster.calls[1:3] == [("GET", "/api/v1/namespaces/slurm/pods/dev-controller-0/exec")] * 2
    assert "reconfigured in place" in done.stderr


def test_the_hook_fails_the_sync_when_slurmctld_never_sees_them(tmp_path: Path) -> None:
    """The process end to end, on a 1 s deadline (the timing itself is the fake-clock test below)."""
    cluster = Cluster(tmp_path, [hashlib.sha256(b"old").hexdigest()])
    done, slurm_calls = run_hook(tmp_path, cluster, reconfigure_timeout=1)
    assert done.returncode == 1
    assert slurm_calls == []
    assert "the controller did not see the new Slurm config within 1 s" in done.stderr


def test_the_wait_for_the_synced_files_gives_up_at_its_deadline_on_a_fake_clock() -> None:
    now = [0.0]
    polls: list[float] = []
    nudged: list[str] = []

    def seen() -> str:
        polls.append(now[0])
        return "old-digest"

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(rollout.ReconfigureStopped, match="within 30 s"):
        rollout.reconfigure_when_seen("new-digest", ["dev-controller-0"], lambda pod, value: nudged.append(pod),
                                      seen, lambda argv: pytest.fail(f"ran {argv}"), lambda: now[0], sleep, 30)
    assert nudged == ["dev-controller-0"]
    assert polls == [float(s) for s in range(0, 31, 2)]  # every 2 s until 30 s have passed, then no more
