"""Files the lab writes: created with their final mode, so key material is never readable in between."""

from __future__ import annotations

import os
from pathlib import Path


def write_file(path: Path, data: str | bytes, mode: int) -> None:
    """Write data to path, created (or truncated) with mode from the first byte on; parents are made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    # O_CREAT applies mode minus the umask; a file that already exists keeps its old mode until
    # fchmod, so take the mode away first: write only once nobody else can read it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o600)
    try:
        os.fchmod(fd, mode & 0o600)
        with os.fdopen(fd, "wb", closefd=False) as out:
            out.write(payload)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
