"""Reading a profile file, with every failure reported as a located ProfileError."""

from __future__ import annotations

from pathlib import Path

from slurmk8s.errors import FieldError, ProfileError
from slurmk8s.profile import Profile, load_profile
from slurmk8s.profile.loader import MAX_PROFILE_BYTES


def read_profile(path: str | Path) -> Profile:
    """Load and validate the profile at path (exit code 2 on any problem)."""
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
