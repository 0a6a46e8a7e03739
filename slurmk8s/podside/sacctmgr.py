"""The accounts/users/QoS applier: sacctmgr state parsed, the plan to the desired tree, applied in rounds.

One applier for every path: `slurmk8s up` and `slurmk8s accounts apply` run it in-process over
`kubectl exec` into slurmctld, the lab over its own exec, and the GitOps Job (Argo CD PostSync
hook, Helm post-install/post-upgrade hook) runs this very source with `python3` in the controller
image, followed by podside/accounts_job.py (which runs sacctmgr). So this module is pure (the
caller's `run` does every sacctmgr call), standard library only, and imports nothing of slurmk8s
(tests/render/test_accounts_job.py checks); slurmk8s.render.accounts builds the desired tree from a profile.
Reference: https://slurm.schedmd.com/sacctmgr.html
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

BUILTIN_QOS = "normal"  # every database's QoS (slurmk8s.profile.scheduling has the same; a test keeps them equal)
ROOT_ACCOUNT = "root"


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


# ---------------------------------------------------------------- applying

RunFn = Callable[[list[str]], "tuple[int, str, str]"]
# Moving an account changes what its associations inherit, so a second round may find more to do.
MAX_ROUNDS = 3


class AccountsError(Exception):
    """sacctmgr failed, or the tree still differs after MAX_ROUNDS."""


def _check(run: RunFn, argv: list[str]) -> str:
    code, out, err = run(argv)
    if code != 0:
        raise AccountsError(f"`{shlex.join(argv)}` exited {code}: {' '.join((err or out).split())[:300]}")
    return out


def read_tree(run: RunFn, cluster: str) -> Tree:
    """The live tree of one cluster, read with sacctmgr."""
    outputs = {what: _check(run, argv) for what, argv in read_commands(cluster).items()}
    return parse_tree(cluster, outputs["assoc"], outputs["user"], outputs["qos"])


def busy_accounts(run: RunFn) -> frozenset[str]:
    """Accounts with pending or running jobs (never deleted)."""
    return frozenset(a.strip() for a in _check(run, ["squeue", "-h", "-o", "%a"]).split() if a.strip())


def apply_tree(desired: Tree, run: RunFn, delete: bool = False,
               log: Callable[[str], None] = lambda line: None) -> list[list[str]]:
    """Bring slurmdbd to the desired tree; returns the commands run (empty when nothing differed)."""
    done: list[list[str]] = []
    for _ in range(MAX_ROUNDS):
        busy = busy_accounts(run) if delete else frozenset()
        plan = plan_accounts(desired, read_tree(run, desired.cluster), delete=delete, busy_accounts=busy)
        if not plan:
            return done
        for argv in plan:
            log(f"  {shlex.join(argv)}")
            _check(run, argv)
        done += plan
    raise AccountsError(f"accounts of {desired.cluster}: still differing after {MAX_ROUNDS} rounds of sacctmgr")


def tree_to_json(tree: Tree) -> str:
    """The tree as JSON, in the tree's own order (the plan adds parents before children in that order)."""
    data = {"cluster": tree.cluster,
            "accounts": [asdict(a) for a in tree.accounts.values()],
            "users": [asdict(u) for u in tree.users.values()],
            "default_accounts": [[u, a] for u, a in tree.default_accounts.items()],
            "qos": [asdict(q) for q in tree.qos.values()]}
    return json.dumps(data, separators=(",", ":"))


def tree_from_json(text: str) -> Tree:
    """tree_to_json's inverse."""
    data = json.loads(text)

    def tup(v):
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    tree = Tree(data["cluster"])
    for a in data["accounts"]:
        tree.accounts[a["name"]] = AccountState(**{k: tup(v) for k, v in a.items()})
    for u in data["users"]:
        tree.users[(u["user"], u["account"])] = UserAssoc(**{k: tup(v) for k, v in u.items()})
    tree.default_accounts.update((u, a) for u, a in data["default_accounts"])
    for q in data["qos"]:
        tree.qos[q["name"]] = QosState(**{k: tup(v) for k, v in q.items()})
    return tree
