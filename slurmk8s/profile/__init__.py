"""The cluster profile: load, schema, defaults, cross-field checks (pure, no I/O)."""

from slurmk8s.profile.loader import load_profile
from slurmk8s.profile.model import Profile

__all__ = ["load_profile", "Profile"]
