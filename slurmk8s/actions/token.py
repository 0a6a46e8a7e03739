"""`slurmk8s token USER`: a JWT for slurmrestd, minted by slurmctld itself as `scontrol token` does."""

from __future__ import annotations

from typing import Callable

from slurmk8s.actions.interface import header
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.podside.tokens import PREFIX, parse_token, token_argv
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.restapi import USER_NAME, unresolvable
from slurmk8s.render import render


def run_token(profile_path: str, cluster, user: str, lifespan: int, *, echo: Callable[[str], None] = print,
              note: Callable[[str], None] = print, namespace: str | None = None) -> str:
    """Print `SLURM_JWT=<token>` (what `scontrol token` prints, so `export $(slurmk8s token ...)` works)."""
    if not USER_NAME.match(user):
        raise UsageError(f"{user!r} is not a login name (lower-case letters, digits, '_' and '-', at most 32, "
                         "not starting with a digit or '-')")
    profile = read_profile(profile_path, namespace)
    if not profile.restapi_enabled:
        raise UsageError(f"{profile_path}: spec.restapi.enabled is false: slurmctld takes no JWT without slurmrestd "
                         "(AuthAltTypes=auth/jwt); enable it and run `slurmk8s up`")
    declared = {u.name for u in profile.identity.users} if profile.identity else set()
    if unresolvable(user, declared):
        raise UsageError(f"user {user!r} is not declared in {profile_path} (spec.identity.users: "
                         f"{', '.join(sorted(declared))}): slurmctld could not resolve the token's user")
    bundle = render(profile)
    note(header(bundle, cluster))
    answer = cluster.slurm(bundle, token_argv(user, lifespan))
    try:
        token = parse_token(answer)
    except ValueError as e:
        raise ClusterError(f"cluster {bundle.cluster}: {e}") from None
    echo(f"{PREFIX}{token}")
    return token
