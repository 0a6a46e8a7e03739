"""--timeout bounds each API request as a whole, and a reply's size is capped (issue 24 item 22, N5).

A server on 127.0.0.1 that answers slowly, a byte every half second, used to keep status, diff and
down running for ever: urllib3's read timeout applies to each socket read, and every read got a byte.
"""

from __future__ import annotations

import socketserver
import sys
import threading
import time

import pytest
import yaml

from conftest import KIND_DEV
from test_safety import one_line, slurmk8s_run

DRIP_SECONDS = 0.5


class Misbehaving(socketserver.ThreadingTCPServer):
    """Answers every request as `mode` says: drip (body), drip-headers, huge (Content-Length), flood."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str):
        self.mode = mode
        self.stopping = threading.Event()
        super().__init__(("127.0.0.1", 0), Handler)

    def handle_error(self, request, client_address) -> None:
        """The client hanging up on it (what the command under test must do) is no error of the server's;
        anything else is reported as socketserver does (the command runs in this process, on its stderr)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: Misbehaving = self.server  # type: ignore[assignment]
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # the request's headers (our GETs and DELETEs with a body are answered before it is read)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if server.mode == "drip":
            self.drip(head + b"Content-Length: 100000\r\n\r\n", at_once=True)
            self.drip(b"{" + b" " * 99998 + b"}")
        elif server.mode == "drip-headers":
            self.drip(head + b"Content-Length: 2\r\n\r\n{}")
        elif server.mode == "huge":
            self.wfile.write(head + b"Content-Length: 200000000\r\n\r\n{")
        elif server.mode == "flood":  # no Content-Length: the body ends when the connection does
            self.wfile.write(head + b"Connection: close\r\n\r\n[")
            chunk = b"0," * (1 << 19)
            for _ in range(80):  # 80 MiB
                if server.stopping.is_set():
                    return
                self.wfile.write(chunk)

    def drip(self, data: bytes, at_once: bool = False) -> None:
        if at_once:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            if self.server.stopping.is_set():  # type: ignore[attr-defined]
                return
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(DRIP_SECONDS)  # the misbehaviour under test, not a wait for a condition


@pytest.fixture
def bad_server(tmp_path):
    """start(mode) -> a kubeconfig pointing at a misbehaving server on 127.0.0.1."""
    servers: list[Misbehaving] = []

    def start(mode: str) -> str:
        server = Misbehaving(mode)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host, port = server.server_address
        path = tmp_path / f"kubeconfig-{mode}"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "bad",
            "clusters": [{"name": "bad", "cluster": {"server": f"http://{host}:{port}"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "bad", "context": {"cluster": "bad", "user": "u"}}]}))
        return str(path)
    yield start
    for server in servers:
        server.stopping.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["status"], ["diff"], ["down", "--yes"]])
@pytest.mark.parametrize("mode", ["drip", "drip-headers"])
def test_a_trickling_server_cannot_hold_a_command_past_its_timeout(bad_server, command, mode):
    kubeconfig = bad_server(mode)
    started = time.monotonic()
    run = slurmk8s_run(command[0], KIND_DEV, *command[1:], "--timeout", "1", "--kubeconfig", kubeconfig, timeout=60)
    took = time.monotonic() - started
    assert run.returncode not in (0, None) and "Traceback" not in run.stderr, run.stderr
    assert "timed out: no complete answer from the Kubernetes API" in run.stderr, run.stderr
    # a request's budget (1 s) for each request the command makes, far below the 100000 bytes' 14 hours
    assert took < 20, took


@pytest.mark.parametrize("mode", ["huge", "flood"])
def test_a_reply_larger_than_the_cap_is_refused(bad_server, mode):
    kubeconfig = bad_server(mode)
    run = slurmk8s_run("status", KIND_DEV, "--timeout", "20", "--kubeconfig", kubeconfig, timeout=60)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert "reply is larger than 64 MiB; refused" in run.stderr, run.stderr


# ---------------------------------------------------------------- replies that are not what was asked (item 23)

@pytest.mark.parametrize("command", [["rollout"], ["secrets", "create"], ["up", "--no-wait"], ["diff"], ["status"],
                                     ["down", "--yes"], ["down", "--dry-run"]])
def test_a_server_answering_an_empty_object_fails_every_command(stub, kubeconfig, command):
    """N19: `{}` for everything made rollout and `secrets create` report success, and up blame a phantom parent."""
    stub.reply(200, {}, when=lambda r: True)
    verb = [c for c in command if not c.startswith("--")]
    flags = [c for c in command if c.startswith("--")]
    run = slurmk8s_run(*verb, KIND_DEV, *flags, "--kubeconfig", kubeconfig)
    assert run.returncode not in (0, None) and "Traceback" not in run.stderr, (run.stdout, run.stderr)
    assert "malformed reply from the Kubernetes API" in run.stderr, run.stderr
    assert "is not the ApplySet parent" not in run.stderr


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_malformed_applyset_parent_is_one_line(stub, kubeconfig, dry_run):
    """N17: `metadata` a string in the parent's reply was an AttributeError in read_parent."""
    stub.reply(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "notadict"},
               when=lambda r: r.path.endswith("/configmaps/dev-applyset"))
    run = slurmk8s_run("down", KIND_DEV, "--yes", *dry_run, "--kubeconfig", kubeconfig)
    assert one_line(run, 1).startswith(
        "read ConfigMap/dev-applyset: malformed reply from the Kubernetes API: expected ConfigMap/dev-applyset")
