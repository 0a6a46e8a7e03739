"""Key material for the Secrets a bundle references: made by `up` (and the lab), never by render."""

from __future__ import annotations

import base64
import hashlib
import secrets
import string
import struct

_ALNUM = string.ascii_letters + string.digits


def generate(kind: str) -> bytes:
    """Fresh random material for a RequiredSecret kind."""
    if kind in ("slurm.key", "munge.key"):
        return secrets.token_bytes(1024)
    if kind == "jwt":
        return secrets.token_bytes(32)
    if kind == "ssh-host-ed25519":
        return openssh_ed25519_private_key(secrets.token_bytes(32), "slurmk8s login host key")
    if kind == "password":
        # Alphanumeric: the MariaDB init script embeds it in SQL and slurmdbd.conf.
        return "".join(secrets.choice(_ALNUM) for _ in range(32)).encode()
    raise ValueError(f"unknown secret kind {kind!r}")


# Ed25519 (RFC 8032) over the standard library only: the login host key is made once by `up`,
# on whatever machine runs it, without ssh-keygen or a crypto package there.
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_BASE = (15112221349535400772501151409588531511454012693041857206046113283949847762202,
         46316835694926478169428394003475163141307993866256225615783033603165251855960)


def _edwards_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = a, b
    t = _D * x1 * x2 * y1 * y2 % _P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, _P - 2, _P) % _P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, _P - 2, _P) % _P
    return x3, y3


def ed25519_public_key(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte private seed."""
    digest = hashlib.sha512(seed).digest()
    scalar = (int.from_bytes(digest[:32], "little") & ((1 << 254) - 8)) | (1 << 254)
    point, addend = (0, 1), _BASE
    while scalar:
        if scalar & 1:
            point = _edwards_add(point, addend)
        addend = _edwards_add(addend, addend)
        scalar >>= 1
    x, y = point
    return (y | ((x & 1) << 255)).to_bytes(32, "little")


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def openssh_ed25519_private_key(seed: bytes, comment: str) -> bytes:
    """An unencrypted OpenSSH private key file (PROTOCOL.key) for an Ed25519 seed."""
    public = ed25519_public_key(seed)
    key_type = b"ssh-ed25519"
    public_blob = _ssh_string(key_type) + _ssh_string(public)
    check = secrets.token_bytes(4)
    private = check + check + public_blob + _ssh_string(seed + public) + _ssh_string(comment.encode())
    private += bytes(range(1, 1 + (-len(private) % 8)))
    body = (b"openssh-key-v1\0" + _ssh_string(b"none") + _ssh_string(b"none") + _ssh_string(b"")
            + struct.pack(">I", 1) + _ssh_string(public_blob) + _ssh_string(private))
    text = base64.b64encode(body).decode()
    lines = [text[i:i + 70] for i in range(0, len(text), 70)]
    return ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n").encode()
