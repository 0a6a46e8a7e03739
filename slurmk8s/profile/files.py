"""Reading a profile file (or standard input for '-'), with every failure reported as a located ProfileError.

The one module of the core that reads files: load_profile (loader.py) parses bytes, this gets them.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from slurmk8s.errors import FieldError, ProfileError
from slurmk8s.profile.loader import MAX_PROFILE_BYTES, load_profile
from slurmk8s.profile.model import Profile

STDIN = "-"
STDIN_SOURCE = "<stdin>"
_stdin_data: bytes | None = None  # stdin is read once; a command may load its profile twice


def read_profile(path: str | Path, namespace: str | None = None) -> Profile:
    """Load and validate the profile at path, '-' for standard input (exit code 2 on any problem); a namespace
    given (the CLI's -n, a DNS-1123 label it checked) replaces metadata.namespace, as helm's -n does."""
    profile = _read_profile(path)
    return profile if namespace is None else dataclasses.replace(profile, namespace=namespace)


def _read_profile(path: str | Path) -> Profile:
    if str(path) == STDIN:
        return load_profile(_read_stdin(), STDIN_SOURCE)
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_PROFILE_BYTES + 1)  # enough for load_profile to refuse a huge file
    except FileNotFoundError:
        raise ProfileError(str(p), [FieldError(0, 0, "", "no such file")]) from None
    except IsADirectoryError:
        raise ProfileError(str(p), [FieldError(0, 0, "", "is a directory, expected a profile file")]) from None
    except OSError as e:
        raise ProfileError(str(p), [FieldError(0, 0, "", f"cannot read: {e.strerror}")]) from None
    return load_profile(data, str(p))


def _read_stdin() -> bytes:
    global _stdin_data
    if _stdin_data is None:
        if sys.stdin is None:
            raise ProfileError(STDIN_SOURCE, [FieldError(0, 0, "", "standard input is closed")])
        try:
            _stdin_data = sys.stdin.buffer.read(MAX_PROFILE_BYTES + 1)
        except OSError as e:
            raise ProfileError(STDIN_SOURCE, [FieldError(0, 0, "", f"cannot read: {e.strerror}")]) from None
    return _stdin_data
