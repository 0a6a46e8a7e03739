"""`fence`: the side-by-side split of each shared node shape, as a table."""

from __future__ import annotations

from slurmk8s.profile.files import read_profile
from slurmk8s.render.fence import fence_table


def fence_plan_text(profile_path: str) -> str:
    """Load (and so check) a profile; the fence plan of its shared nodes as text."""
    return fence_table(read_profile(profile_path))
