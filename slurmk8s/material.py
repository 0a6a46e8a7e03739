"""Key material for the Secrets a bundle references: made by `up` (and the lab), never by render."""

from __future__ import annotations

import secrets
import string

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_ALNUM = string.ascii_letters + string.digits


def generate(kind: str) -> bytes:
    """Fresh random material for a RequiredSecret kind."""
    if kind in ("slurm.key", "munge.key"):
        return secrets.token_bytes(1024)
    if kind == "jwt":
        return secrets.token_bytes(32)
    if kind == "ssh-host-ed25519":
        return openssh_ed25519_private_key()
    if kind == "empty":  # a Secret a Job of the cluster fills (the token Secrets)
        return b""
    if kind == "password":
        # Alphanumeric: the MariaDB init script embeds it in SQL and slurmdbd.conf.
        return "".join(secrets.choice(_ALNUM) for _ in range(32)).encode()
    raise ValueError(f"unknown secret kind {kind!r}")


def openssh_ed25519_private_key() -> bytes:
    """A new unencrypted Ed25519 key in the OpenSSH private key format (PROTOCOL.key), as sshd reads a HostKey."""
    # cryptography's constant-time Ed25519, not our own arithmetic: the seed is secret.
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
