"""The hook Jobs' API client (podside/kubeapi.py): its exec over a WebSocket, against a real TLS server
that speaks Kubernetes' v4.channel.k8s.io framing."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import urllib.parse
from pathlib import Path

import pytest

from apiserver import API_NAME, make_cert, service_account
from slurmk8s.podside import kubeapi


def frame(payload: bytes, opcode: int = 0x2) -> bytes:
    """One unmasked server frame (RFC 6455 5.2)."""
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big") if n < 65536
                                     else bytes([127]) + n.to_bytes(8, "big"))
    return head + payload


class ExecServer:
    """Answers one exec upgrade with the given frames; keeps the request it got."""

    def __init__(self, tmp_path: Path, frames: list[bytes], status: str = "101 Switching Protocols"):
        self.cert, key = make_cert(tmp_path, [API_NAME])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.request = b""

        def serve():
            conn, _ = self.listener.accept()
            with context.wrap_socket(conn, server_side=True) as tls:
                while b"\r\n\r\n" not in self.request:
                    self.request += tls.recv(4096)
                tls.sendall(f"HTTP/1.1 {status}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n".encode())
                for f in frames:
                    tls.sendall(f)
        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()


def client(server: ExecServer, tmp_path: Path) -> kubeapi.Api:
    sa = service_account(tmp_path / "sa", server.cert, token="hook-token")
    return kubeapi.Api(sa_dir=str(sa), host="127.0.0.1", port=server.port)


def test_exec_returns_stdout_across_frames_and_asks_for_the_command(tmp_path: Path) -> None:
    long_line = b"x" * 300 + b"\n"  # a 2-byte extended length
    frames = [frame(b"\x01"), frame(b"\x02"), frame(b"\x01abc"), frame(b"\x02warning\n"), frame(b"\x01" + long_line),
              frame(b"\x01  -\n"), frame(b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode()),
              frame(b"", opcode=0x8)]
    server = ExecServer(tmp_path, frames)
    out = client(server, tmp_path).exec("dev-controller-0", "slurmctld", ["/bin/sh", "-c", "cat /mnt/slurm-config/* | sha256sum"])
    assert out == "abc" + long_line.decode() + "  -\n"
    head = server.request.decode()
    path = head.split(" ")[1]
    assert path.startswith("/api/v1/namespaces/slurm/pods/dev-controller-0/exec?")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    assert query["command"] == ["/bin/sh", "-c", "cat /mnt/slurm-config/* | sha256sum"]
    assert query["container"] == ["slurmctld"]
    assert "Authorization: Bearer hook-token\r\n" in head and "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n" in head


def test_a_failed_command_raises_with_the_api_servers_message(tmp_path: Path) -> None:
    status = {"status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated with non-zero exit code"}
    server = ExecServer(tmp_path, [frame(b"\x03" + json.dumps(status).encode()), frame(b"", opcode=0x8)])
    with pytest.raises(OSError, match="exec in dev-controller-0: command terminated with non-zero exit code"):
        client(server, tmp_path).exec("dev-controller-0", "slurmctld", ["false"])


def test_a_refused_upgrade_raises(tmp_path: Path) -> None:
    server = ExecServer(tmp_path, [], status="403 Forbidden")
    with pytest.raises(OSError, match="exec in dev-controller-0: HTTP/1.1 403 Forbidden"):
        client(server, tmp_path).exec("dev-controller-0", "slurmctld", ["true"])
