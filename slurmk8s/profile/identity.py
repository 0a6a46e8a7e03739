"""spec.identity: the Unix users and groups every Slurm pod resolves, and their ssh keys.

The model, its loading from the schema-valid document and the section's cross-field rules.
The users of spec.scheduling must be declared here once any user is (docs/users-and-storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmk8s.profile.defaults import DEFAULTS
from slurmk8s.profile.volumes import home_volume_paths

Problem = tuple[tuple, str, bool]

# Names the images already use for their daemons and system accounts: a declared user of the
# same name would replace the daemon's entry in the pod's /etc/passwd.
RESERVED_NAMES = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "nobody", "nogroup", "systemd-network", "systemd-resolve", "messagebus",
    "sshd", "_apt", "slurm", "munge", "mysql", "sudo", "adm", "tty", "disk", "wheel", "users", "staff", "shadow",
})


@dataclass(frozen=True)
class UnixUser:
    """One declared user: ids, home, shell, ssh keys and the Slurm accounts it may charge."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str
    ssh_keys: tuple[str, ...]
    accounts: tuple[str, ...]


@dataclass(frozen=True)
class UnixGroup:
    """One group and its (supplementary) members."""

    name: str
    gid: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class Identity:
    """Users and groups, both sorted by name; private groups of users without a declared gid included."""

    users: tuple[UnixUser, ...]
    groups: tuple[UnixGroup, ...]

    def user(self, name: str) -> UnixUser:
        return next(u for u in self.users if u.name == name)


def load_identity(raw: dict | None) -> Identity | None:
    """The model of a schema-valid spec.identity (None when the profile declares nobody)."""
    if not raw or not (raw.get("users") or raw.get("groups")):
        return None
    users = []
    groups = {g["name"]: UnixGroup(g["name"], g["gid"], tuple(sorted(set(g.get("members", [])))))
              for g in raw.get("groups", [])}
    declared_gids = {g.gid for g in groups.values()}
    for u in raw.get("users", []):
        gid = u.get("gid", u["uid"])
        if "gid" not in u and gid not in declared_gids and u["name"] not in groups:
            # A user private group, as useradd makes by default.
            groups[u["name"]] = UnixGroup(u["name"], gid, ())
        users.append(UnixUser(
            name=u["name"], uid=u["uid"], gid=gid,
            home=u.get("home", f"/home/{u['name']}"),
            shell=u.get("shell", DEFAULTS["spec.identity.users[].shell"]),
            ssh_keys=tuple(u.get("sshKeys", [])),
            accounts=tuple(u.get("accounts", [])),
        ))
    return Identity(tuple(sorted(users, key=lambda u: u.name)), tuple(sorted(groups.values(), key=lambda g: g.name)))


def scheduling_with_identity_accounts(spec: dict) -> dict:
    """spec.scheduling with each declared user added to the accounts its `accounts` names (a copy)."""
    scheduling = dict(spec.get("scheduling") or {})
    wanted: dict[str, list[str]] = {}
    for u in (spec.get("identity") or {}).get("users", []):
        for account in u.get("accounts", []):
            wanted.setdefault(account, []).append(u["name"])
    if not wanted:
        return scheduling
    accounts = []
    for a in scheduling.get("accounts", []):
        extra = [n for n in wanted.get(a["name"], []) if n not in a.get("users", [])]
        accounts.append({**a, "users": list(a.get("users", [])) + extra} if extra else a)
    scheduling["accounts"] = accounts
    return scheduling


def check_identity(spec: dict) -> list[Problem]:
    """Every cross-field problem of spec.identity, and scheduling users that are not declared."""
    raw = spec.get("identity") or {}
    at = ("spec", "identity")
    users, groups = raw.get("users", []), raw.get("groups", [])
    out: list[Problem] = []
    out += _unique(users, "name", at + ("users",), "user name")
    out += _unique(users, "uid", at + ("users",), "uid")
    out += _unique(groups, "name", at + ("groups",), "group name")
    out += _unique(groups, "gid", at + ("groups",), "gid")
    group_gids = {g["gid"]: g["name"] for g in groups}
    group_names = {g["name"]: g["gid"] for g in groups}
    user_names = {u["name"] for u in users}
    home_mounts = home_volume_paths(spec)
    for i, u in enumerate(users):
        here = at + ("users", i)
        if u["name"] in RESERVED_NAMES:
            out.append((here + ("name",), f"{u['name']!r} is a system account of the images; choose another name", False))
        if "gid" in u and u["gid"] not in group_gids and u["gid"] != u["uid"]:
            out.append((here + ("gid",), f"gid {u['gid']} is no declared group's (groups: "
                        f"{', '.join(f'{n}={g}' for n, g in sorted(group_names.items())) or 'none'}); declare it "
                        "under spec.identity.groups or leave gid out for a private group", False))
        if "gid" not in u and u["name"] in group_names and group_names[u["name"]] != u["uid"]:
            out.append((here + ("name",), f"group {u['name']!r} has gid {group_names[u['name']]}, not this user's uid "
                        f"{u['uid']}; set gid", False))
        if "gid" not in u and u["name"] not in group_names and u["uid"] in group_gids:
            out.append((here + ("uid",), f"the private group of {u['name']!r} would take gid {u['uid']}, which is group "
                        f"{group_gids[u['uid']]!r}'s; set gid", False))
        for field in ("home", "shell"):
            if field in u and not plain_path(u[field]):
                out.append((here + (field,), f"{u[field]!r} is not a plain absolute path (no '.' or '..' "
                            "components, no '//')", False))
        # Root init containers make each home on the volumes that make homes (render/k8s/volumes.py): a plain
        # path under one is the only place that may happen.
        home = u.get("home", f"/home/{u['name']}")
        if home_mounts and plain_path(home) and not any(home.startswith(m + "/") for m in home_mounts):
            where = here + ("home",) if "home" in u else here + ("name",)
            if home in home_mounts:
                out.append((where, f"home {home} is where a home volume is mounted, shared by everyone and owned by "
                            "root; give the user a directory under it", False))
            else:
                out.append((where, f"home {home} is under no volume that makes homes ({', '.join(home_mounts)}); it "
                            "would never be made: put it under one, or declare a volume for it", False))
    for i, g in enumerate(groups):
        if g["name"] in RESERVED_NAMES:
            out.append((at + ("groups", i, "name"), f"{g['name']!r} is a system group of the images; choose another name",
                        False))
        for j, member in enumerate(g.get("members", [])):
            if member not in user_names:
                out.append((at + ("groups", i, "members", j), f"unknown user {member!r} (declared users: "
                            f"{_names(user_names)})", False))
    accounts = {a["name"] for a in (spec.get("scheduling") or {}).get("accounts", [])}
    for i, u in enumerate(users):
        for j, account in enumerate(u.get("accounts", [])):
            if account not in accounts:
                out.append((at + ("users", i, "accounts", j), f"unknown account {account!r} (spec.scheduling.accounts: "
                            f"{_names(accounts)})", False))
    if users:
        out += _undeclared_scheduling_users(spec, user_names)
    return out


def plain_path(path: str) -> bool:
    """True for an absolute path without '.' or '..' components or an empty one ('//', a trailing '/')."""
    parts = path.split("/")[1:]
    return path == "/" or (path.startswith("/") and all(p not in ("", ".", "..") for p in parts))


def _undeclared_scheduling_users(spec: dict, declared: set[str]) -> list[Problem]:
    """Users the scheduling tree names but nobody declared: their jobs could never run as them."""
    at = ("spec", "scheduling")
    raw = spec.get("scheduling") or {}
    out: list[Problem] = []
    hint = f"declare it under spec.identity.users (declared: {_names(declared)})"
    for i, a in enumerate(raw.get("accounts", [])):
        for j, name in enumerate(a.get("users", [])):
            if name not in declared:
                out.append((at + ("accounts", i, "users", j), f"user {name!r} is not declared; {hint}", False))
    for i, u in enumerate(raw.get("users", [])):
        if u["name"] not in declared:
            out.append((at + ("users", i, "name"), f"user {u['name']!r} is not declared; {hint}", False))
    return out


def _unique(items: list[dict], key: str, at: tuple, what: str) -> list[Problem]:
    seen: dict[Any, int] = {}
    out: list[Problem] = []
    for i, item in enumerate(items):
        value = item[key]
        if value in seen:
            where = ".".join(str(p) for p in at[1:])
            out.append((at + (i, key), f"duplicate {what} {value!r} (also spec.{where}[{seen[value]}])", False))
        seen.setdefault(value, i)
    return out


def _names(names: set[str], limit: int = 12) -> str:
    items = sorted(names)
    if not items:
        return "none"
    return ", ".join(items) if len(items) <= limit else f"{', '.join(items[:limit])}, ... ({len(items)} in all)"
