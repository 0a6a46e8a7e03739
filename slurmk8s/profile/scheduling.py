"""spec.scheduling: backfill, multifactor priority, preemption, and the accounts/users/QoS tree.

The model (frozen dataclasses), its loading from the schema-valid document, and the
cross-field rules of this section live here; loader.py and checks.py call in.
References: https://slurm.schedmd.com/sched_config.html, priority_multifactor.html,
preempt.html, qos.html, sacctmgr.html.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.defaults import default, value_or_default

Problem = tuple[tuple, str, bool]

# Exists in every Slurm accounting database; a profile may use it without defining it.
BUILTIN_QOS = "normal"
ROOT_ACCOUNT = "root"
# Profile TRES key -> Slurm TRES name.
TRES_NAMES = {"cpu": "cpu", "gpu": "gres/gpu", "node": "node"}


@dataclass(frozen=True)
class Qos:
    """One QoS as sacctmgr knows it (limits unset when None/empty)."""

    name: str
    priority: int
    preempt: tuple[str, ...]
    grp_tres: tuple[tuple[str, int], ...]
    max_tres_per_user: tuple[tuple[str, int], ...]
    max_tres_per_job: tuple[tuple[str, int], ...]
    max_wall: str | None
    max_jobs_per_user: int | None


@dataclass(frozen=True)
class Account:
    """An account association: its parent, shares, users and (effective, inherited when unset) QoS."""

    name: str
    parent: str
    fairshare: int
    users: tuple[str, ...]
    qos: tuple[str, ...]
    default_qos: str | None


@dataclass(frozen=True)
class User:
    """A user and the account their jobs use when they name none."""

    name: str
    default_account: str


@dataclass(frozen=True)
class Weights:
    """PriorityWeight* of priority/multifactor."""

    fairshare: int
    age: int
    job_size: int
    partition: int
    qos: int


@dataclass(frozen=True)
class Scheduling:
    """The scheduling policy of a cluster."""

    scheduler: str  # backfill | builtin
    bf_interval: int
    bf_window: int
    bf_continue: bool
    bf_max_job_test: int
    priority: str  # multifactor | basic
    weights: Weights
    decay_half_life: str
    max_age: str
    calc_period: int
    preemption: str  # off | partition_prio | qos
    preempt_mode: str  # requeue | cancel
    accounts: tuple[Account, ...]  # parents before children
    users: tuple[User, ...]  # sorted by name
    qos: tuple[Qos, ...]  # sorted by name

    @property
    def manages_tree(self) -> bool:
        """True when slurmdbd holds accounts or QoS from the profile (and limits are enforced)."""
        return bool(self.accounts or self.qos)



def _tres(raw: dict | None) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((TRES_NAMES[k], v) for k, v in (raw or {}).items()))


def load_scheduling(raw: dict) -> Scheduling:
    """The model of a schema-valid spec.scheduling (absent: {})."""
    p = "spec.scheduling"
    sched, prio, preempt = raw.get("scheduler", {}), raw.get("priority", {}), raw.get("preemption", {})
    weights = prio.get("weights", {})
    qos = []
    for q in raw.get("qos", []):
        limits = q.get("limits", {})
        qos.append(Qos(
            name=q["name"], priority=value_or_default(q, "priority", f"{p}.qos[].priority"),
            preempt=tuple(sorted(set(q.get("preempt", [])))),
            grp_tres=_tres(limits.get("grpTRES")), max_tres_per_user=_tres(limits.get("maxTRESPerUser")),
            max_tres_per_job=_tres(limits.get("maxTRESPerJob")),
            max_wall=str(limits["maxWall"]) if "maxWall" in limits else None,
            max_jobs_per_user=limits.get("maxJobsPerUser"),
        ))
    return Scheduling(
        scheduler=value_or_default(sched, "type", f"{p}.scheduler.type"),
        bf_interval=value_or_default(sched, "interval", f"{p}.scheduler.interval"),
        bf_window=value_or_default(sched, "window", f"{p}.scheduler.window"),
        bf_continue=value_or_default(sched, "continue", f"{p}.scheduler.continue"),
        bf_max_job_test=value_or_default(sched, "maxJobTest", f"{p}.scheduler.maxJobTest"),
        priority=value_or_default(prio, "type", f"{p}.priority.type"),
        weights=Weights(*(value_or_default(weights, k, f"{p}.priority.weights.{k}")
                          for k in ("fairshare", "age", "jobSize", "partition", "qos"))),
        decay_half_life=str(value_or_default(prio, "decayHalfLife", f"{p}.priority.decayHalfLife")),
        max_age=str(value_or_default(prio, "maxAge", f"{p}.priority.maxAge")),
        calc_period=value_or_default(prio, "calcPeriod", f"{p}.priority.calcPeriod"),
        preemption=value_or_default(preempt, "type", f"{p}.preemption.type"),
        preempt_mode=value_or_default(preempt, "mode", f"{p}.preemption.mode"),
        accounts=_accounts(raw.get("accounts", [])),
        users=_users(raw),
        qos=tuple(sorted(qos, key=lambda q: q.name)),
    )


def _accounts(raw: list[dict]) -> tuple[Account, ...]:
    """Accounts parents first (then by name), QoS inherited from the parent where unset.

    A broken tree (unknown parent, cycle) is reported by check_scheduling; here such
    accounts are left out so that loading never fails.
    """
    by_name = {a["name"]: a for a in raw}
    children: dict[str, list[str]] = {}
    for name, a in sorted(by_name.items()):
        children.setdefault(a.get("parent", ROOT_ACCOUNT), []).append(name)
    done: dict[str, Account] = {}
    root = Account(ROOT_ACCOUNT, "", 1, (), (BUILTIN_QOS,), None)
    level = [root]
    while level:
        nxt = []
        for parent in level:
            for name in children.get(parent.name, ()):
                if name in done or name == ROOT_ACCOUNT:
                    continue
                a = by_name[name]
                qos = tuple(sorted(set(a["qos"]))) if "qos" in a else parent.qos
                default_qos = a.get("defaultQos")
                if default_qos is None and parent.default_qos in qos:
                    default_qos = parent.default_qos
                acc = Account(name, parent.name, value_or_default(a, "fairshare", "spec.scheduling.accounts[].fairshare"),
                              tuple(sorted(set(a.get("users", [])))), qos, default_qos)
                done[name] = acc
                nxt.append(acc)
        level = nxt
    return tuple(done.values())


def _users(raw: dict) -> tuple[User, ...]:
    """Every user named under an account; the default account is the first (in profile order) unless set."""
    first: dict[str, str] = {}
    for a in raw.get("accounts", []):
        for u in a.get("users", []):
            first.setdefault(u, a["name"])
    explicit = {u["name"]: u.get("defaultAccount") for u in raw.get("users", [])}
    return tuple(User(name, explicit.get(name) or first[name]) for name in sorted(first))


# ---------------------------------------------------------------- cross-field rules


def check_scheduling(spec: dict) -> list[Problem]:
    """Every cross-field problem of spec.scheduling (paths index the document as written)."""
    raw = spec.get("scheduling")
    if not raw:
        return []
    at = ("spec", "scheduling")
    out: list[Problem] = []
    accounts, qos_list, users = raw.get("accounts", []), raw.get("qos", []), raw.get("users", [])
    accounting = spec.get("accounting", {}).get("enabled", default("spec.accounting.enabled"))
    if not accounting:
        for key in ("accounts", "qos", "users"):
            if key in raw:
                out.append((at + (key,), f"{key} live in slurmdbd: they need accounting.enabled true", True))
    out += _duplicates(accounts, at + ("accounts",), "account")
    out += _duplicates(qos_list, at + ("qos",), "QoS")
    out += _duplicates(users, at + ("users",), "user")
    names = {a["name"] for a in accounts}
    qos_names = {q["name"] for q in qos_list} | {BUILTIN_QOS}
    defined = name_list(qos_names)
    for i, a in enumerate(accounts):
        here = at + ("accounts", i)
        if a["name"] == ROOT_ACCOUNT:
            out.append((here + ("name",), "'root' is Slurm's own top account; put accounts under it", False))
        parent = a.get("parent", ROOT_ACCOUNT)
        if parent != ROOT_ACCOUNT and parent not in names:
            out.append((here + ("parent",), f"unknown account {parent!r} (accounts: {name_list(names)})", False))
        for j, q in enumerate(a.get("qos", [])):
            if q not in qos_names:
                out.append((here + ("qos", j), f"QoS {q!r} is not defined (QoS: {defined})", False))
        default_qos = a.get("defaultQos")
        if default_qos is not None:
            if default_qos not in qos_names:
                out.append((here + ("defaultQos",), f"QoS {default_qos!r} is not defined (QoS: {defined})", False))
            elif "qos" in a and default_qos not in a["qos"]:
                out.append((here + ("defaultQos",), f"{default_qos!r} is not in this account's qos list", False))
        seen_users: set[str] = set()
        for j, u in enumerate(a.get("users", [])):
            if u in seen_users:
                out.append((here + ("users", j), f"user {u!r} is listed twice", False))
            seen_users.add(u)
    out += _cycles(accounts, at)
    member_of: dict[str, list[str]] = {}
    for a in accounts:
        for u in a.get("users", []):
            member_of.setdefault(u, []).append(a["name"])
    for i, u in enumerate(users):
        here = at + ("users", i)
        if u["name"] not in member_of:
            out.append((here + ("name",), f"user {u['name']!r} is in no account; list it under an account's users", False))
        elif "defaultAccount" in u and u["defaultAccount"] not in member_of[u["name"]]:
            out.append((here + ("defaultAccount",), f"user {u['name']!r} is not in account {u['defaultAccount']!r} "
                        f"(its accounts: {name_list(member_of[u['name']], sort=False)})", False))
    for i, q in enumerate(qos_list):
        for j, target in enumerate(q.get("preempt", [])):
            if target not in qos_names:
                out.append((at + ("qos", i, "preempt", j), f"QoS {target!r} is not defined (QoS: {defined})", False))
            elif target == q["name"]:
                out.append((at + ("qos", i, "preempt", j), "a QoS cannot preempt itself", False))
    # slurmdbd knows gres/gpu only when slurm.conf declares it (GresTypes, from pools with GPUs):
    # sacctmgr rejects a limit on an unknown TRES, after every object before it was applied.
    if not any(p.get("gpus") for p in spec.get("pools", [])):
        for i, q in enumerate(qos_list):
            for field, tres in q.get("limits", {}).items():
                if isinstance(tres, dict) and "gpu" in tres:
                    out.append((at + ("qos", i, "limits", field, "gpu"),
                                "a GPU limit needs a pool with GPUs (no pool has gpus)", False))
    preemption = raw.get("preemption", {})
    if preemption.get("type") == "qos" and not any(q.get("preempt") for q in qos_list):
        out.append((at + ("preemption", "type"), "preemption by QoS needs a QoS that may preempt another "
                    "(set preempt on one of spec.scheduling.qos)", False))
    return out


def _duplicates(items: list[dict], at: tuple, what: str) -> list[Problem]:
    out: list[Problem] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item["name"] in seen:
            where = ".".join(str(p) for p in at[1:])
            out.append((at + (i, "name"), f"duplicate {what} name {item['name']!r} (also spec.{where}[{seen[item['name']]}])", False))
        seen.setdefault(item["name"], i)
    return out


def name_list(names, limit: int = 12, sort: bool = True) -> str:
    """'a, b, c' for a message; a long list is cut after limit names so the line stays readable."""
    items = sorted(names) if sort else list(names)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit])}, ... ({len(items)} in all)"


def _cycles(accounts: list[dict], at: tuple) -> list[Problem]:
    """Accounts whose parent chain comes back to themselves (reported once, at the first member listed).

    Linear: each account is walked once; a walk stops at an account an earlier walk finished.
    """
    parent = {a["name"]: a.get("parent", ROOT_ACCOUNT) for a in accounts if a["name"] != ROOT_ACCOUNT}
    index = {a["name"]: i for i, a in enumerate(accounts)}
    out: list[Problem] = []
    finished: set[str] = set()
    for a in accounts:
        chain: list[str] = []
        on_chain: dict[str, int] = {}
        name = a["name"]
        while name in parent and name not in finished and name not in on_chain:
            on_chain[name] = len(chain)
            chain.append(name)
            name = parent[name]
        if name in on_chain:
            cycle = chain[on_chain[name]:]
            first = min(cycle, key=index.__getitem__)
            start = cycle.index(first)
            loop = cycle[start:] + cycle[:start] + [first]
            shown = " -> ".join(loop) if len(loop) <= 13 else \
                f"{' -> '.join(loop[:6])} -> ... -> {' -> '.join(loop[-6:])} ({len(cycle)} accounts)"
            out.append((at + ("accounts", index[first], "parent"), f"accounts form a cycle: {shown}", False))
        finished.update(chain)
    return out
