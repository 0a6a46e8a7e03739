"""Key material for the Secrets a bundle references: made by `up` (and the lab), never by render."""

from __future__ import annotations

import secrets
import string

_ALNUM = string.ascii_letters + string.digits


def generate(kind: str) -> bytes:
    """Fresh random material for a RequiredSecret kind."""
    if kind in ("slurm.key", "munge.key"):
        return secrets.token_bytes(1024)
    if kind == "jwt":
        return secrets.token_bytes(32)
    if kind == "password":
        # Alphanumeric: the MariaDB init script embeds it in SQL and slurmdbd.conf.
        return "".join(secrets.choice(_ALNUM) for _ in range(32)).encode()
    raise ValueError(f"unknown secret kind {kind!r}")
