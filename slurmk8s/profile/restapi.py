"""spec.restapi.tokens: users whose slurmrestd token a Secret holds, kept fresh by a CronJob (render/k8s/tokens.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from slurmk8s import naming
from slurmk8s.profile.defaults import value_or_default

Problem = tuple[tuple, str, bool]

# Refresh periods that divide an hour, so `*/N` in a cron schedule runs evenly.
REFRESH_MINUTES = (5, 10, 15, 20, 30, 60)
# Images' own accounts that may hold a token without being declared (slurmrestd resolves the name).
IMAGE_USERS = ("root", "slurm")
# A login name, as the schema's spec.identity.users[].name and spec.restapi.tokens[].user (tests agree them).
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class TokenSecret:
    """One user's token Secret and Slurm's lifespan of each token."""

    user: str
    lifespan: int  # seconds, scontrol token's lifespan=


def unresolvable(user: str, declared: set[str]) -> bool:
    """True when spec.identity declares users and user is neither one of them nor an image's own account:
    slurmctld could not map the token's name to a uid."""
    return bool(declared) and user not in declared and user not in IMAGE_USERS


def load_tokens(raw: dict[str, Any]) -> tuple[TokenSecret, ...]:
    return tuple(TokenSecret(t["user"], value_or_default(t, "lifespan", "spec.restapi.tokens[].lifespan"))
                 for t in raw.get("tokens", []))


def refresh_minutes(tokens: tuple[TokenSecret, ...]) -> int:
    """Minutes between refreshes: at most a third of the shortest lifespan, so a token read just before its
    refresh still has two thirds of its life, and one failed run is survived."""
    shortest = min(t.lifespan for t in tokens)
    return max([m for m in REFRESH_MINUTES if m * 60 * 3 <= shortest] or [REFRESH_MINUTES[0]])


def check_restapi(spec: dict) -> list[Problem]:
    """Tokens need slurmrestd on, one entry per user, Secret names that do not collide, and known users."""
    raw = spec.get("restapi") or {}
    tokens = raw.get("tokens", [])
    at = ("spec", "restapi", "tokens")
    out: list[Problem] = []
    if tokens and not raw.get("enabled", False):
        out.append((at, "tokens are for slurmrestd: set spec.restapi.enabled: true, or drop the tokens", True))
    identity = spec.get("identity") or {}
    declared = {u["name"] for u in identity.get("users", [])}
    seen: dict[str, str] = {}
    for i, t in enumerate(tokens):
        user = t["user"]
        secret = naming.token_secret("", user)
        if secret in seen:
            what = "is listed twice" if seen[secret] == user else f"gets the same Secret name as {seen[secret]!r}"
            out.append((at + (i, "user"), f"user {user!r} {what}", False))
        seen.setdefault(secret, user)
        if unresolvable(user, declared):
            out.append((at + (i, "user"), f"user {user!r} is not declared; slurmctld could not resolve the token's "
                        f"user: declare it under spec.identity.users (declared: {', '.join(sorted(declared))})", False))
    return out
