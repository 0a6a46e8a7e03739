"""A local HTTPS server in the part of the Kubernetes API server, for the pods' API client (podside/kubeapi.py).

It listens on 127.0.0.1 with a certificate for the names given (kubernetes.default.svc, as a real API
server's), so a test proves the client checks the name it was told, not the address it reached.
"""

from __future__ import annotations

import datetime
import http.server
import json
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

API_NAME = "kubernetes.default.svc"


def make_cert(directory: Path, dns_names: list[str], stem: str = "api") -> tuple[Path, Path]:
    """(certificate, key) PEM files of a self-signed certificate for dns_names; it is its own CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class Seen:
    """One request the server answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ApiServer:
    """Answers each request with the next of `answers` (status, JSON body), the last one again when they run out."""

    cert: Path
    key: Path
    answers: list[tuple[int, object]] = field(default_factory=lambda: [(200, {})])
    seen: list[Seen] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)  # the SNI of each handshake

    def start(self) -> "ApiServer":
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                api.seen.append(Seen(self.command, self.path, dict(self.headers), self.rfile.read(length)))
                status, body = api.answers[min(len(api.seen), len(api.answers)) - 1]
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PATCH = do_DELETE = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def service_account(directory: Path, ca: Path, token: str = "pod-token", namespace: str | None = "slurm") -> Path:
    """A ServiceAccount directory as the kubelet mounts it: token, ca.crt and (unless None) namespace."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token + "\n")
    (directory / "ca.crt").write_bytes(ca.read_bytes())
    if namespace is not None:
        (directory / "namespace").write_text(namespace + "\n")
    return directory
