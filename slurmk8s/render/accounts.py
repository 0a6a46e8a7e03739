"""The accounts/users/QoS tree that slurmdbd holds: desired state, parsed state, and the sacctmgr plan between.

Pure: `up` and the lab read the current state with the commands in READ_COMMANDS, parse it
here, and run what plan_accounts returns (slurmk8s/actions/accounts.py). render writes the
plan from a fresh database as slurm/accounts.sh for review.
Reference: https://slurm.schedmd.com/sacctmgr.html
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from slurmk8s.profile.model import Profile
from slurmk8s.profile.scheduling import BUILTIN_QOS, ROOT_ACCOUNT

SACCTMGR = ["sacctmgr", "-i"]  # -i: commit without asking
ASSOC_FORMAT = "account,user,partition,parentname,share,qos,defaultqos"
USER_FORMAT = "user,defaultaccount"
QOS_FORMAT = "name,priority,preempt,grptres,maxtrespu,maxtrespj,maxwall,maxjobspu"
Tres = tuple[tuple[str, int], ...]


def read_commands(cluster: str) -> dict[str, list[str]]:
    """The sacctmgr queries whose output parse_tree reads (parsable, no header)."""
    show = ["sacctmgr", "-P", "-n", "show"]
    return {"assoc": show + ["assoc", f"cluster={cluster}", f"format={ASSOC_FORMAT}"],
            "user": show + ["user", f"format={USER_FORMAT}"],
            "qos": show + ["qos", f"format={QOS_FORMAT}"]}


@dataclass(frozen=True)
class AccountState:
    name: str
    parent: str
    fairshare: int  # -1: "parent" or unparsable, never equal to a profile's value
    qos: tuple[str, ...]
    default_qos: str  # "" when unset


@dataclass(frozen=True)
class UserAssoc:
    user: str
    account: str
    qos: tuple[str, ...]
    default_qos: str


@dataclass(frozen=True)
class QosState:
    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    grp_tres: Tres = ()
    max_tres_per_user: Tres = ()
    max_tres_per_job: Tres = ()
    max_wall: int | None = None  # minutes
    max_jobs_per_user: int | None = None


@dataclass(frozen=True)
class Tree:
    """One cluster's accounts (by name), user associations (by (user, account)), default accounts, QoS."""

    cluster: str
    accounts: dict[str, AccountState] = field(default_factory=dict)
    users: dict[tuple[str, str], UserAssoc] = field(default_factory=dict)
    default_accounts: dict[str, str] = field(default_factory=dict)
    qos: dict[str, QosState] = field(default_factory=dict)


def fresh_tree(cluster: str) -> Tree:
    """What a newly registered cluster's database holds: account root, user root, QoS normal."""
    return Tree(cluster, {ROOT_ACCOUNT: AccountState(ROOT_ACCOUNT, "", 1, (BUILTIN_QOS,), "")},
                {("root", ROOT_ACCOUNT): UserAssoc("root", ROOT_ACCOUNT, (BUILTIN_QOS,), "")},
                {"root": ROOT_ACCOUNT}, {BUILTIN_QOS: QosState(BUILTIN_QOS)})


def slurm_minutes(text: str) -> int | None:
    """A Slurm time string in minutes, seconds rounded up (None for ''/UNLIMITED/-1).

    Formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
    days-hours:minutes, days-hours:minutes:seconds.
    """
    text = text.strip()
    if text in ("", "-1") or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    if days:
        h, m, s = (parts + [0, 0])[:3]
        return int(days) * 1440 + h * 60 + m + (1 if s else 0)
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[0] + (1 if parts[1] else 0)
    return parts[0] * 60 + parts[1] + (1 if parts[2] else 0)


def slurm_time(minutes: int) -> str:
    """Minutes as Slurm writes a time limit: [days-]hours:minutes:seconds."""
    days, rest = divmod(minutes, 1440)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def _tres(text: str) -> Tres:
    return tuple(sorted((k, int(v)) for k, v in (kv.split("=", 1) for kv in text.split(",") if kv)))


def _names(text: str) -> tuple[str, ...]:
    return tuple(sorted(n for n in text.split(",") if n))


def _int(text: str, unset: int | None = None) -> int | None:
    return int(text) if re.fullmatch(r"-?[0-9]+", text.strip()) else unset


def parse_tree(cluster: str, assoc: str, users: str, qos: str) -> Tree:
    """The Tree from the outputs of read_commands (sacctmgr -P -n, '|'-separated)."""
    tree = Tree(cluster)
    for line in assoc.splitlines():
        if not line.strip():
            continue
        account, user, partition, parent, share, qos_list, default_qos = line.split("|")[:7]
        if partition:
            continue  # per-partition associations are not managed here
        if user:
            tree.users[(user, account)] = UserAssoc(user, account, _names(qos_list), default_qos)
        else:
            tree.accounts[account] = AccountState(account, parent, _int(share, -1), _names(qos_list), default_qos)
    for line in users.splitlines():
        if line.strip():
            user, default = line.split("|")[:2]
            tree.default_accounts[user] = default
    for line in qos.splitlines():
        if not line.strip():
            continue
        name, priority, preempt, grp, mpu, mpj, wall, jobs = line.split("|")[:8]
        tree.qos[name] = QosState(name, _int(priority, 0), _names(preempt), _tres(grp), _tres(mpu), _tres(mpj),
                                  slurm_minutes(wall), _int(jobs))
    return tree


def desired_tree(profile: Profile) -> Tree:
    """The tree the profile asks for, on top of what every database holds."""
    s = profile.scheduling
    tree = fresh_tree(profile.name)
    for a in s.accounts:
        tree.accounts[a.name] = AccountState(a.name, a.parent, a.fairshare, a.qos, a.default_qos or "")
        for u in a.users:
            tree.users[(u, a.name)] = UserAssoc(u, a.name, a.qos, a.default_qos or "")
    for u in s.users:
        tree.default_accounts[u.name] = u.default_account
    for q in s.qos:
        tree.qos[q.name] = QosState(q.name, q.priority, q.preempt, q.grp_tres, q.max_tres_per_user,
                                    q.max_tres_per_job, slurm_minutes(q.max_wall) if q.max_wall else None,
                                    q.max_jobs_per_user)
    return tree


# ---------------------------------------------------------------- planning


def _tres_arg(want: Tres, have: Tres) -> str | None:
    """A TRES setting turning `have` into `want` (-1 clears a limit); None when equal."""
    if want == have:
        return None
    wanted = dict(want)
    cleared = [(k, -1) for k, _ in have if k not in wanted]
    return ",".join(f"{k}={v}" for k, v in sorted(list(want) + cleared))


def _qos_settings(want: QosState, have: QosState, with_preempt: bool = True) -> list[str]:
    out = []
    if want.priority != have.priority:
        out.append(f"Priority={want.priority}")
    for key, w, h in (("GrpTRES", want.grp_tres, have.grp_tres), ("MaxTRESPerUser", want.max_tres_per_user, have.max_tres_per_user),
                      ("MaxTRESPerJob", want.max_tres_per_job, have.max_tres_per_job)):
        arg = _tres_arg(w, h)
        if arg:
            out.append(f"{key}={arg}")
    if want.max_wall != have.max_wall:
        out.append(f"MaxWall={-1 if want.max_wall is None else slurm_time(want.max_wall)}")
    if want.max_jobs_per_user != have.max_jobs_per_user:
        out.append(f"MaxJobsPerUser={-1 if want.max_jobs_per_user is None else want.max_jobs_per_user}")
    if with_preempt and want.preempt != have.preempt:
        out.append(f"Preempt={','.join(want.preempt)}")
    return out


def _assoc_settings(want_qos: tuple[str, ...], want_default: str, have_qos: tuple[str, ...] | None,
                    have_default: str | None) -> list[str]:
    out = []
    if want_qos != have_qos:
        out.append(f"QOS={','.join(want_qos)}")
    if want_default != have_default and (want_default or have_default):
        out.append(f"DefaultQOS={want_default or -1}")
    return out


def plan_accounts(desired: Tree, current: Tree, delete: bool = False,
                  busy_accounts: frozenset[str] = frozenset()) -> list[list[str]]:
    """sacctmgr argv lists that turn current into desired: add what is missing, modify what differs.

    Nothing is deleted unless `delete`; even then accounts in busy_accounts (they have
    jobs) and their users are kept, as are Slurm's own root account, root user and QoS normal.
    Parents come before children, QoS before the accounts that allow them.
    """
    c = desired.cluster
    cmds: list[list[str]] = []
    # QoS: add without Preempt (its targets may not exist yet), then modify what differs.
    for name, want in desired.qos.items():
        if name not in current.qos:
            cmds.append(SACCTMGR + ["add", "qos", name] + _qos_settings(want, QosState(name), with_preempt=False))
    for name, want in desired.qos.items():
        have = current.qos.get(name)
        have = have if have is not None else replace(want, preempt=())
        settings = _qos_settings(want, have)
        if settings:
            cmds.append(SACCTMGR + ["modify", "qos", "where", f"name={name}", "set"] + settings)
    for name, want in desired.accounts.items():
        if name == ROOT_ACCOUNT:
            continue
        have = current.accounts.get(name)
        if have is None:
            cmds.append(SACCTMGR + ["add", "account", name, f"Cluster={c}", f"Parent={want.parent}",
                                    f"Fairshare={want.fairshare}"] + _assoc_settings(want.qos, want.default_qos, None, None))
            continue
        where = SACCTMGR + ["modify", "account", "where", f"name={name}", f"cluster={c}", "set"]
        if want.parent != have.parent:
            cmds.append(where + [f"Parent={want.parent}"])
        settings = ([f"Fairshare={want.fairshare}"] if want.fairshare != have.fairshare else []) + \
            _assoc_settings(want.qos, want.default_qos, have.qos, have.default_qos)
        if settings:
            cmds.append(where + settings)
    # A new user's first association carries its DefaultAccount, so add that one first.
    order = sorted(desired.users, key=lambda k: (k[0], desired.default_accounts.get(k[0]) != k[1], k[1]))
    new_users = {u for u, _ in desired.users} - set(current.default_accounts)
    for key in order:
        user, account = key
        if user == "root" and account == ROOT_ACCOUNT:
            continue
        want, have = desired.users[key], current.users.get(key)
        if have is None:
            extra = []
            if user in new_users:
                extra = [f"DefaultAccount={desired.default_accounts.get(user, account)}"]
                new_users.discard(user)
            cmds.append(SACCTMGR + ["add", "user", user, f"Account={account}", f"Cluster={c}"] + extra
                        + _assoc_settings(want.qos, want.default_qos, None, None))
            continue
        settings = _assoc_settings(want.qos, want.default_qos, have.qos, have.default_qos)
        if settings:
            cmds.append(SACCTMGR + ["modify", "user", "where", f"name={user}", f"account={account}", f"cluster={c}", "set"] + settings)
    added = {(cmd[4], arg) for cmd in cmds if cmd[2:4] == ["add", "user"]
             for arg in cmd if arg.startswith("DefaultAccount=")}
    for user, account in sorted(desired.default_accounts.items()):
        if (user, f"DefaultAccount={account}") not in added and current.default_accounts.get(user) != account:
            cmds.append(SACCTMGR + ["modify", "user", "where", f"name={user}", "set", f"DefaultAccount={account}"])
    if delete:
        cmds += _deletions(desired, current, busy_accounts)
    return cmds


def _deletions(desired: Tree, current: Tree, busy: frozenset[str]) -> list[list[str]]:
    c = desired.cluster
    cmds = []
    for user, account in sorted(current.users):
        if (user, account) in desired.users or account in busy or (user == "root" and account == ROOT_ACCOUNT):
            continue
        cmds.append(SACCTMGR + ["delete", "user", "where", f"name={user}", f"account={account}", f"cluster={c}"])
    extra = [a for a in current.accounts if a not in desired.accounts and a != ROOT_ACCOUNT]

    def depth(name: str) -> int:
        d, seen = 0, set()
        while name in current.accounts and name not in seen:
            seen.add(name)
            name, d = current.accounts[name].parent, d + 1
        return d

    keep = set(busy)
    for name in extra:  # an account with a busy descendant stays too
        if any(_descends(current, b, name) for b in busy):
            keep.add(name)
    for name in sorted(extra, key=lambda n: (-depth(n), n)):
        if name not in keep:
            cmds.append(SACCTMGR + ["delete", "account", "where", f"name={name}", f"cluster={c}"])
    for name in sorted(set(current.qos) - set(desired.qos) - {BUILTIN_QOS}):
        cmds.append(SACCTMGR + ["delete", "qos", "where", f"name={name}"])
    return cmds


def _descends(tree: Tree, account: str, ancestor: str) -> bool:
    seen = set()
    while account in tree.accounts and account not in seen:
        if account == ancestor:
            return True
        seen.add(account)
        account = tree.accounts[account].parent
    return False


def render_accounts_file(profile: Profile) -> str | None:
    """slurm/accounts.sh: the sacctmgr commands that build the profile's tree in a fresh database."""
    if not profile.scheduling.manages_tree or not profile.accounting.enabled:
        return None
    lines = [f"# Accounts, users and QoS of cluster {profile.name} in slurmdbd, generated by slurmk8s; do not edit.",
             "# These commands build the tree in a fresh database. `slurmk8s up` reads the live tree and",
             "# runs only the difference (nothing is deleted unless asked).",
             "# Reference: https://slurm.schedmd.com/sacctmgr.html"]
    lines += [shlex.join(cmd) for cmd in plan_accounts(desired_tree(profile), fresh_tree(profile.name))]
    return "\n".join(lines) + "\n"
