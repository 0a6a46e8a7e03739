"""The accounts tree: sacctmgr output parsing, the plan between two trees, and the rendered file."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from slurmk8s.actions.accounts import apply_accounts, read_tree
from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.render import render
from slurmk8s.render.k8s.accounts import desired_tree
from slurmk8s.podside.sacctmgr import (
    AccountState, QosState, UserAssoc, fresh_tree, parse_tree, plan_accounts, slurm_minutes, slurm_time,
)

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles/gpu-ib.yaml"
LAB = ROOT / "tests/lab/profiles/sched-2605.yaml"

# Captured from the pod lab (Slurm 26.05, `sacctmgr -P -n show ... format=` of read_commands).
ASSOC_2605 = """\
root||||1|normal|
root|root|||1|normal|
ml|||root|10|normal|
ml|alice|||1|normal|
phys|||root|40|high,low,normal|normal
phys|bob||||1|high,low,normal|normal
"""
USER_2605 = "alice|ml\nbob|phys\nroot|root\n"
QOS_2605 = """\
normal|0||||||
low|0||||||
high|100|low|gres/gpu=1|cpu=2|node=1|1-00:00:00|3
"""


def test_parse_real_output() -> None:
    tree = parse_tree("c", ASSOC_2605, USER_2605, QOS_2605)
    assert tree.accounts["phys"] == AccountState("phys", "root", 40, ("high", "low", "normal"), "normal")
    assert tree.accounts["ml"].parent == "root" and tree.accounts["ml"].fairshare == 10
    assert tree.users[("alice", "ml")] == UserAssoc("alice", "ml", ("normal",), "")
    assert tree.default_accounts == {"alice": "ml", "bob": "phys", "root": "root"}
    assert tree.qos["high"] == QosState("high", 100, ("low",), (("gres/gpu", 1),), (("cpu", 2),), (("node", 1),), 1440, 3)
    assert tree.qos["low"] == QosState("low")


@pytest.mark.parametrize("text, minutes", [("1-00:00:00", 1440), ("01:30:00", 90), ("90", 90), ("7-0", 10080),
                                           ("0:10:00", 10), ("2:30", 3), ("1-02:03", 1563), ("UNLIMITED", None), ("", None)])
def test_slurm_minutes(text: str, minutes: int | None) -> None:
    assert slurm_minutes(text) == minutes


def test_plan_from_fresh_database_orders_qos_parents_and_default_account() -> None:
    profile = read_profile(GPU_IB)
    plan = plan_accounts(desired_tree(profile), fresh_tree(profile.name))
    verbs = [" ".join(cmd[2:5]) for cmd in plan]
    assert verbs.index("add account physics") < verbs.index("add account lattice")
    assert verbs.index("add qos urgent") < verbs.index("modify qos where")
    max_cmds = [cmd for cmd in plan if cmd[2:5] == ["add", "user", "max"]]
    assert "Account=ml" in max_cmds[0] and "DefaultAccount=ml" in max_cmds[0]
    assert not any(a.startswith("DefaultAccount") for a in max_cmds[1])
    assert not any(cmd[2] == "delete" for cmd in plan)


def test_plan_between_equal_trees_is_empty_and_only_differences_are_planned() -> None:
    profile = read_profile(GPU_IB)
    desired = desired_tree(profile)
    assert plan_accounts(desired, desired) == []
    current = desired_tree(profile)
    current.accounts["ml"] = AccountState("ml", "root", 5, ("normal",), "")
    current.qos["urgent"] = QosState("urgent", 1000, ("scavenger",), (("cpu", 8), ("gres/gpu", 32)), (("gres/gpu", 16),), (), 720, None)
    current.default_accounts["max"] = "physics"
    plan = plan_accounts(desired, current)
    assert plan == [
        ["sacctmgr", "-i", "modify", "qos", "where", "name=urgent", "set", "GrpTRES=cpu=-1,gres/gpu=32"],
        ["sacctmgr", "-i", "modify", "account", "where", "name=ml", "cluster=research", "set",
         "Fairshare=40", "QOS=normal,scavenger", "DefaultQOS=normal"],
        ["sacctmgr", "-i", "modify", "user", "where", "name=max", "set", "DefaultAccount=ml"],
    ]


def with_extras(tree, eve_in: str):
    """tree plus what a profile dropped: accounts old > oldchild and busy, user eve in eve_in, QoS legacy."""
    tree.accounts["old"] = AccountState("old", "root", 1, ("normal",), "")
    tree.accounts["oldchild"] = AccountState("oldchild", "old", 1, ("normal",), "")
    tree.accounts["busy"] = AccountState("busy", "root", 1, ("normal",), "")
    tree.users[("eve", eve_in)] = UserAssoc("eve", eve_in, ("normal",), "")
    tree.qos["legacy"] = QosState("legacy")
    return tree


def test_extra_entries_are_deleted_only_when_asked_and_never_busy_accounts() -> None:
    profile = read_profile(GPU_IB)
    desired = desired_tree(profile)
    current = with_extras(desired_tree(profile), eve_in="old")
    assert plan_accounts(desired, current) == []
    plan = plan_accounts(desired, current, delete=True, busy_accounts=frozenset({"busy"}))
    assert [cmd[2:6] for cmd in plan] == [
        ["delete", "user", "where", "name=eve"],
        ["delete", "account", "where", "name=oldchild"],
        ["delete", "account", "where", "name=old"],
        ["delete", "qos", "where", "name=legacy"],
    ]


class FakeSacctmgr:
    """sacctmgr over an in-memory slurmdbd: `show` prints the tree in the lab's format (ASSOC_2605 above),
    `-i add|modify|delete` change it as sacctmgr does, refusing what sacctmgr refuses (unknown parent, QoS
    or account; a default QoS outside the allowed list; deleting an account that still has children).

    An association whose QoS is unset inherits its parent's, as slurmdbd's does. `ignore` lists
    (verb, entity) pairs that answer success but change nothing, like a sacctmgr without the
    privilege to commit; `busy` is what squeue reports as the accounts with jobs.
    """

    def __init__(self, tree, ignore: frozenset[tuple[str, str]] = frozenset(), busy: tuple[str, ...] = ()):
        self.cluster = tree.cluster
        self.qos = dict(tree.qos)
        self.accounts = {n: [a.parent, a.fairshare, a.qos, a.default_qos] for n, a in tree.accounts.items()}
        self.users = {k: [u.qos, u.default_qos] for k, u in tree.users.items()}
        self.default_accounts = dict(tree.default_accounts)
        self.ignore, self.busy = ignore, busy
        self.commands: list[list[str]] = []

    # ---- reading
    def effective_qos(self, account: str, user: str = "") -> tuple[tuple[str, ...], str]:
        """(QoS list, default QoS) of an association: its own where set, else its nearest ancestor's."""
        qos, default = self.users[(user, account)] if user else self.accounts[account][2:]
        above = account if user else self.accounts[account][0]
        while (qos is None or default is None) and above in self.accounts:
            parent, _, parent_qos, parent_default = self.accounts[above]
            qos = parent_qos if qos is None else qos
            default = parent_default if default is None else default
            above = parent
        return qos or (), default or ""

    def show(self, what: str) -> str:
        tres = lambda pairs: ",".join(f"{k}={v}" for k, v in pairs)  # noqa: E731
        if what == "assoc":
            rows = []
            for name, (parent, share, _, _) in self.accounts.items():
                rows.append(f"{name}|||{parent}|{share}|{','.join(self.effective_qos(name)[0])}|{self.effective_qos(name)[1]}")
            for user, account in self.users:
                qos, default = self.effective_qos(account, user)
                rows.append(f"{account}|{user}|||1|{','.join(qos)}|{default}")
            return "\n".join(rows) + "\n"
        if what == "user":
            return "".join(f"{u}|{a}\n" for u, a in self.default_accounts.items())
        return "".join(f"{q.name}|{q.priority}|{','.join(q.preempt)}|{tres(q.grp_tres)}|{tres(q.max_tres_per_user)}|"
                       f"{tres(q.max_tres_per_job)}|{slurm_time(q.max_wall) if q.max_wall else ''}|"
                       f"{q.max_jobs_per_user or ''}\n" for q in self.qos.values())

    # ---- writing
    def run(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[:4] == ["sacctmgr", "-P", "-n", "show"]:
            return 0, self.show(argv[4]), ""
        if argv[:3] == ["squeue", "-h", "-o"]:
            return 0, "".join(f"{a}\n" for a in self.busy), ""
        assert argv[:2] == ["sacctmgr", "-i"], argv
        self.commands.append(argv)
        verb, entity = argv[2], argv[3]
        if (verb, entity) in self.ignore:
            return 0, "", ""
        if verb == "add":
            name, where, settings = argv[4], {}, dict(kv.split("=", 1) for kv in argv[5:])
        else:
            assert argv[4] == "where", argv
            cut = argv.index("set") if "set" in argv else len(argv)
            name = None
            where = {k.lower(): v for k, v in (kv.split("=", 1) for kv in argv[5:cut])}
            settings = dict(kv.split("=", 1) for kv in argv[cut + 1:])
        try:
            getattr(self, f"_{verb}_{entity}")(name or where.get("name"), where, settings)
        except ValueError as e:
            return 1, "", f" sacctmgr: error: {e}"
        return 0, "", ""

    def _qos_list(self, text: str) -> tuple[str, ...]:
        names = tuple(sorted(n for n in text.split(",") if n))
        unknown = [n for n in names if n not in self.qos]
        if unknown:
            raise ValueError(f"You gave a bad qos '{unknown[0]}'")
        return names

    def _set_assoc_qos(self, row: list, settings: dict, at: int) -> None:
        if "QOS" in settings:
            row[at] = self._qos_list(settings["QOS"])
        if "DefaultQOS" in settings:
            row[at + 1] = "" if settings["DefaultQOS"] == "-1" else settings["DefaultQOS"]
        if row[at + 1] and row[at] is not None and row[at + 1] not in row[at]:
            raise ValueError(f"Default QOS {row[at + 1]} is not in the allowed QOS list")

    def _add_qos(self, name: str, where: dict, settings: dict) -> None:
        if name in self.qos:
            raise ValueError(f"QOS {name} already exists")
        self.qos[name] = QosState(name)
        self._modify_qos(name, where, settings)

    def _modify_qos(self, name: str, where: dict, settings: dict) -> None:
        q = self.qos.get(name)
        if q is None:
            raise ValueError(f"no QOS {name}")

        def tres(old, text):
            merged = dict(old)
            for k, v in (kv.split("=", 1) for kv in text.split(",") if kv):
                merged.pop(k, None) if v == "-1" else merged.__setitem__(k, int(v))
            return tuple(sorted(merged.items()))

        for key, value in settings.items():
            if key == "Priority":
                q = replace(q, priority=int(value))
            elif key == "Preempt":
                q = replace(q, preempt=self._qos_list(value))
            elif key in ("GrpTRES", "MaxTRESPerUser", "MaxTRESPerJob"):
                field = {"GrpTRES": "grp_tres", "MaxTRESPerUser": "max_tres_per_user", "MaxTRESPerJob": "max_tres_per_job"}[key]
                q = replace(q, **{field: tres(getattr(q, field), value)})
            elif key == "MaxWall":
                q = replace(q, max_wall=None if value == "-1" else slurm_minutes(value))
            elif key == "MaxJobsPerUser":
                q = replace(q, max_jobs_per_user=None if value == "-1" else int(value))
            else:
                raise ValueError(f"Unknown option: {key}")
        self.qos[name] = q

    def _delete_qos(self, name: str, where: dict, settings: dict) -> None:
        del self.qos[name]

    def _add_account(self, name: str, where: dict, settings: dict) -> None:
        parent = settings.get("Parent", "root")
        if parent not in self.accounts:
            raise ValueError(f"Parent account {parent} doesn't exist")
        self.accounts[name] = row = [parent, int(settings.get("Fairshare", 1)), None, None]
        self._set_assoc_qos(row, settings, 2)

    def _modify_account(self, name: str, where: dict, settings: dict) -> None:
        row = self.accounts[name]
        if "Parent" in settings:
            if settings["Parent"] not in self.accounts:
                raise ValueError(f"Parent account {settings['Parent']} doesn't exist")
            row[0] = settings["Parent"]
        if "Fairshare" in settings:
            row[1] = int(settings["Fairshare"])
        self._set_assoc_qos(row, settings, 2)

    def _delete_account(self, name: str, where: dict, settings: dict) -> None:
        if any(row[0] == name for row in self.accounts.values()) or any(a == name for _, a in self.users):
            raise ValueError(f"account {name} still has child associations")
        del self.accounts[name]

    def _add_user(self, name: str, where: dict, settings: dict) -> None:
        account = settings["Account"]
        if account not in self.accounts:
            raise ValueError(f"account {account} doesn't exist")
        self.users[(name, account)] = row = [None, None]
        self._set_assoc_qos(row, settings, 0)
        if name not in self.default_accounts:  # a new user's default is the account it is added with, unless given
            self.default_accounts[name] = settings.get("DefaultAccount", account)

    def _modify_user(self, name: str, where: dict, settings: dict) -> None:
        if "DefaultAccount" in settings:
            if (name, settings["DefaultAccount"]) not in self.users:
                raise ValueError(f"user {name} has no association with account {settings['DefaultAccount']}")
            self.default_accounts[name] = settings.pop("DefaultAccount")
        if settings:
            self._set_assoc_qos(self.users[(name, where["account"])], settings, 0)

    def _delete_user(self, name: str, where: dict, settings: dict) -> None:
        del self.users[(name, where["account"])]
        if not any(u == name for u, _ in self.users):
            del self.default_accounts[name]


def converged(profile, db: FakeSacctmgr) -> bool:
    """The fake now holds exactly the profile's tree, read back the way `up` reads it."""
    return plan_accounts(desired_tree(profile), read_tree(db.run, profile.name)) == []


@pytest.mark.parametrize("path", [LAB, GPU_IB], ids=["sched-lab", "gpu-ib"])
def test_a_fresh_database_gets_the_reviewed_commands_and_then_holds_the_tree(path: Path) -> None:
    profile = read_profile(path)
    db = FakeSacctmgr(fresh_tree(profile.name))
    applied = apply_accounts(profile, db.run)
    # what ran is exactly what render wrote for review, and one round was enough
    assert ["# " + shlex.join(c) for c in applied] == ["# " + line for line in
                                                       render(profile).files["accounts.sh"].splitlines()[4:]]
    assert db.commands == applied and converged(profile, db)
    assert apply_accounts(profile, db.run) == [] and db.commands == applied


def test_a_drifted_database_is_modified_back_without_adding_or_deleting() -> None:
    profile = read_profile(GPU_IB)
    drifted = desired_tree(profile)
    drifted.accounts["lattice"] = AccountState("lattice", "root", 20, ("normal", "scavenger", "urgent"), "")
    drifted.accounts["ml"] = AccountState("ml", "root", 5, ("normal",), "")
    drifted.qos["urgent"] = replace(drifted.qos["urgent"], priority=1, grp_tres=(("cpu", 8), ("gres/gpu", 4)), max_wall=None)
    drifted.default_accounts["max"] = "physics"
    db = FakeSacctmgr(drifted)
    assert not converged(profile, db)
    applied = apply_accounts(profile, db.run)
    assert {tuple(c[2:4]) for c in applied} == {("modify", "qos"), ("modify", "account"), ("modify", "user")}, applied
    assert converged(profile, db)
    assert db.accounts["lattice"][0] == "physics" and db.accounts["ml"][1:3] == [40, ("normal", "scavenger")]
    assert db.qos["urgent"].grp_tres == (("gres/gpu", 32),) and db.qos["urgent"].max_wall == 720
    assert db.default_accounts["max"] == "ml"
    assert apply_accounts(profile, db.run) == []


def test_delete_removes_extras_children_first_but_keeps_busy_accounts() -> None:
    profile = read_profile(GPU_IB)
    extra = with_extras(desired_tree(profile), eve_in="oldchild")
    extra.default_accounts["eve"] = "oldchild"
    db = FakeSacctmgr(extra, busy=("busy",))
    assert apply_accounts(profile, db.run) == []  # nothing is deleted unless asked
    applied = apply_accounts(profile, db.run, delete=True)
    assert [c[2:6] for c in applied] == [["delete", "user", "where", "name=eve"],
                                         ["delete", "account", "where", "name=oldchild"],
                                         ["delete", "account", "where", "name=old"],
                                         ["delete", "qos", "where", "name=legacy"]]
    assert sorted(db.accounts) == sorted(["busy", *desired_tree(profile).accounts])
    assert "eve" not in db.default_accounts and "legacy" not in db.qos


def test_a_database_that_never_changes_makes_the_applier_give_up() -> None:
    profile = read_profile(LAB)
    db = FakeSacctmgr(fresh_tree(profile.name), ignore=frozenset({("modify", "qos")}))
    with pytest.raises(ClusterError, match="still differing after 3 rounds"):
        apply_accounts(profile, db.run)
    modifies = [c for c in db.commands if c[2:4] == ["modify", "qos"]]
    assert modifies and modifies == modifies[: len(modifies) // 3] * 3  # the same commands, in each round


def test_apply_accounts_fails_loudly_on_sacctmgr_errors() -> None:
    profile = read_profile(LAB)

    def run(argv: list[str]) -> tuple[int, str, str]:
        if argv[:2] == ["sacctmgr", "-i"]:
            return 1, "", " sacctmgr: error: Problem adding account"
        return 0, "", ""

    with pytest.raises(ClusterError, match="Problem adding"):
        apply_accounts(profile, run)


def test_render_writes_accounts_file_only_with_a_tree() -> None:
    bundle = render(read_profile(LAB))
    text = bundle.files["accounts.sh"]
    assert "sacctmgr -i add user sk8s-bob Account=teamb Cluster=schedlab DefaultAccount=teamb QOS=normal\n" in text
    assert "AccountingStorageEnforce=associations,limits,qos,safe\n" in bundle.files["slurm.conf"]
    assert "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n" in bundle.files["slurm.conf"]
    kind = render(read_profile(ROOT / "profiles/kind-dev.yaml"))
    assert "accounts.sh" not in kind.files and "AccountingStorageEnforce" not in kind.files["slurm.conf"]
    assert "SchedulerType=sched/backfill\n" in kind.files["slurm.conf"]
