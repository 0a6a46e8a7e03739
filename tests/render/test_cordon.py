"""A cordoned Kubernetes node drains its Slurm nodes (spec.rollout.drainOnCordon, docs/rollout.md).

The render (what the pool pods get, and the one ClusterRole), then the HealthCheckProgram itself: run
with stand-ins for sinfo, scontrol and pgrep, against a real HTTPS server in the part of the API server.
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render
from slurmk8s.render.k8s.health import CORDON_REASON, KUBE_DIR, build_configmap_health, render_health_script

BASE = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: c, namespace: hpc}
spec:
  pools:
    - {name: cpu, replicas: 1, cpus: 2, memory: 2Gi}
"""
TOKEN = "the-pool-token"
KUBE_NODE = "worker-7"


def slurmd_of(bundle, pool: str = "cpu") -> dict:
    pod = bundle.find("StatefulSet", f"c-{pool}")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "slurmd")


def test_by_default_the_pool_pods_read_their_node_with_a_root_only_token_and_get_on_nodes_only():
    bundle = render(load_profile(BASE.encode()))
    assert "\nHealthCheckProgram=/opt/slurmk8s/health/check\nHealthCheckInterval=60\n" in bundle.files["slurm.conf"]
    pod = bundle.find("StatefulSet", "c-cpu")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    volume = next(v for v in pod["volumes"] if v["name"] == "kube-api")
    assert volume["projected"]["defaultMode"] == 0o400  # root: jobs run as their users
    slurmd = slurmd_of(bundle)
    assert {"name": "kube-api", "mountPath": KUBE_DIR, "readOnly": True} in slurmd["volumeMounts"]
    assert {"name": "SLURMK8S_KUBE_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in slurmd["env"]
    role = bundle.find("ClusterRole", "slurmk8s-hpc-c-nodes")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert "namespace" not in role["metadata"]
    binding = bundle.find("ClusterRoleBinding", "slurmk8s-hpc-c-nodes")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "c-worker", "namespace": "hpc"}]
    script = bundle.find("ConfigMap", "c-health")["data"]["cpu.sh"]
    assert "CHECKS_ON=0" in script and "CORDON_ON=1" in script


def test_drain_on_cordon_off_renders_none_of_it():
    bundle = render(load_profile((BASE + "  rollout: {drainOnCordon: false}\n").encode()))
    assert "HealthCheckProgram" not in bundle.files["slurm.conf"]
    assert not [o for o in bundle.objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert "kube-api" not in json.dumps(bundle.find("StatefulSet", "c-cpu"))


# --- the program, against a real HTTPS server ------------------------------------------------------

class FakeApi:
    """GET /api/v1/nodes/<name> with the pool's token: the node, cordoned or not."""

    def __init__(self, tmp_path: Path):
        self.cordoned, self.requests = False, []
        key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=api",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                api.requests.append(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send_response(401)
                    self.end_headers()
                    return
                if self.path != f"/api/v1/nodes/{KUBE_NODE}":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({"kind": "Node", "spec": {"unschedulable": True} if api.cordoned else {}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.cert = cert
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeApi]:
    server = FakeApi(tmp_path)
    yield server
    server.server.shutdown()


@pytest.fixture
def slurmd_process(api: FakeApi) -> Iterator[int]:
    """A stand-in for slurmd: a process whose environment is a slurmd container's."""
    env = {"PATH": "/usr/bin:/bin", "SLURMK8S_KUBE_NODE": KUBE_NODE, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(api.port)}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    yield proc.pid
    proc.kill()
    proc.wait()


def run_program(tmp_path: Path, api: FakeApi, slurmd_pid: int, state: str, reason: str,
                token: str = TOKEN, health: bool = False) -> list[str]:
    """Run the cpu pool's HealthCheckProgram once; the scontrol calls it made."""
    bin_dir, kube = tmp_path / "bin", tmp_path / "kube"
    for d in (bin_dir, kube):
        d.mkdir(exist_ok=True)
    (kube / "token").write_text(token + "\n")
    (kube / "ca.crt").write_text(api.cert.read_text())
    calls = tmp_path / "calls"
    calls.write_text("")
    stubs = {"sinfo": "case \"$*\" in *--format=%N\\|%T\\|%E*) echo 'cpu-0|" + state + "|" + reason + "' ;; *) exit 1 ;; esac",
             "scontrol": f"printf '%s\\n' \"$*\" >> {calls}",
             "pgrep": f'[ "$*" = "-o -x slurmd" ] && echo {slurmd_pid}'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        os.chmod(bin_dir / name, 0o755)
    text = BASE + ("  healthChecks: {enabled: true}\n" if health else "")
    profile = load_profile(text.encode())
    (kube / "kubeapi.py").write_text(build_configmap_health(profile)["data"]["kubeapi.py"])  # the projected volume's
    script = render_health_script(profile, profile.pool("cpu")).replace(f"KUBE_DIR={KUBE_DIR}", f"KUBE_DIR={kube}")
    script = script.replace("MOUNTS='/etc/slurm /var/spool/slurmd /dev/shm'", "MOUNTS='/proc'")
    script = script.replace("DISK_PATHS='/var/spool/slurmd /tmp'", f"DISK_PATHS='{tmp_path}'")
    done = subprocess.run(["sh", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "cpu-0"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


DRAIN = f"update nodename=cpu-0 state=drain reason={CORDON_REASON}"
RESUME = "update nodename=cpu-0 state=resume"


def test_a_cordon_drains_the_node_with_its_reason(tmp_path, api, slurmd_process):
    api.cordoned = True
    assert run_program(tmp_path, api, slurmd_process, "allocated", "none") == [DRAIN]
    assert api.requests == [f"/api/v1/nodes/{KUBE_NODE}"]
    # drained already, by the cordon: nothing more to do
    assert run_program(tmp_path, api, slurmd_process, "draining", CORDON_REASON) == []


def test_an_uncordon_resumes_only_the_cordons_drain(tmp_path, api, slurmd_process):
    assert run_program(tmp_path, api, slurmd_process, "drained", CORDON_REASON) == [RESUME]
    assert run_program(tmp_path, api, slurmd_process, "drained", "admin: bad fan") == []
    assert run_program(tmp_path, api, slurmd_process, "drained", "slurmk8s rollout") == []
    assert run_program(tmp_path, api, slurmd_process, "idle", "none") == []


def test_a_cordon_leaves_an_administrators_drain_alone(tmp_path, api, slurmd_process):
    api.cordoned = True
    assert run_program(tmp_path, api, slurmd_process, "drained", "admin: bad fan") == []
    assert run_program(tmp_path, api, slurmd_process, "draining", "slurmk8s: pod stopping") == []


def test_when_the_node_cannot_be_read_the_cordons_drain_stays(tmp_path, api, slurmd_process):
    assert run_program(tmp_path, api, slurmd_process, "drained", CORDON_REASON, token="expired") == []
    assert api.requests  # it did ask, and was refused
    assert run_program(tmp_path, api, slurmd_process, "idle", "none", token="expired") == []


def test_a_healthy_node_drained_by_its_check_turns_into_the_cordons_drain(tmp_path, api, slurmd_process):
    api.cordoned = True
    assert run_program(tmp_path, api, slurmd_process, "drained", "slurmk8s-health: /x not mounted", health=True) == [DRAIN]
    api.cordoned = False
    assert run_program(tmp_path, api, slurmd_process, "drained", CORDON_REASON, health=True) == [RESUME]
