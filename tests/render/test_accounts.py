"""The accounts tree: sacctmgr output parsing, the plan between two trees, and the rendered file."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.actions.accounts import apply_accounts
from slurmk8s.actions.files import read_profile
from slurmk8s.errors import ClusterError
from slurmk8s.render import render
from slurmk8s.render.accounts import (
    AccountState, QosState, UserAssoc, desired_tree, fresh_tree, parse_tree, plan_accounts, slurm_minutes,
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


def test_extra_entries_are_deleted_only_when_asked_and_never_busy_accounts() -> None:
    profile = read_profile(GPU_IB)
    desired = desired_tree(profile)
    current = desired_tree(profile)
    current.accounts["old"] = AccountState("old", "root", 1, ("normal",), "")
    current.accounts["oldchild"] = AccountState("oldchild", "old", 1, ("normal",), "")
    current.accounts["busy"] = AccountState("busy", "root", 1, ("normal",), "")
    current.users[("eve", "old")] = UserAssoc("eve", "old", ("normal",), "")
    current.qos["legacy"] = QosState("legacy")
    assert plan_accounts(desired, current) == []
    plan = plan_accounts(desired, current, delete=True, busy_accounts=frozenset({"busy"}))
    assert [cmd[2:6] for cmd in plan] == [
        ["delete", "user", "where", "name=eve"],
        ["delete", "account", "where", "name=oldchild"],
        ["delete", "account", "where", "name=old"],
        ["delete", "qos", "where", "name=legacy"],
    ]


class FakeDatabase:
    """sacctmgr `show` over an in-memory tree, in the lab's output format; other commands are recorded."""

    def __init__(self, tree):
        self.tree = tree
        self.commands: list[list[str]] = []

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[:4] == ["sacctmgr", "-P", "-n", "show"]:
            return 0, self.show(argv[4]), ""
        self.commands.append(argv)
        return 0, "", ""

    def show(self, what: str) -> str:
        t = self.tree
        tres = lambda pairs: ",".join(f"{k}={v}" for k, v in pairs)  # noqa: E731
        if what == "assoc":
            rows = [f"{a.name}|||{a.parent}|{a.fairshare}|{','.join(a.qos)}|{a.default_qos}" for a in t.accounts.values()]
            rows += [f"{u.account}|{u.user}|||1|{','.join(u.qos)}|{u.default_qos}" for u in t.users.values()]
            return "\n".join(rows) + "\n"
        if what == "user":
            return "".join(f"{u}|{a}\n" for u, a in t.default_accounts.items())
        return "".join(f"{q.name}|{q.priority}|{','.join(q.preempt)}|{tres(q.grp_tres)}|{tres(q.max_tres_per_user)}|"
                       f"{tres(q.max_tres_per_job)}|{q.max_wall or ''}|{q.max_jobs_per_user or ''}\n" for q in t.qos.values())


def test_apply_accounts_reads_plans_runs_then_finds_nothing_to_do() -> None:
    profile = read_profile(LAB)
    # a database that already holds the profile's tree: nothing is run
    db = FakeDatabase(desired_tree(profile))
    assert apply_accounts(profile, db.run) == []
    assert db.commands == []
    # a fresh one: the whole tree is added, and the commands are what render wrote for review
    fresh = FakeDatabase(fresh_tree(profile.name))
    with pytest.raises(ClusterError, match="still differing after 3 rounds"):
        apply_accounts(profile, fresh.run)  # the fake never changes, so the applier must give up
    first_round = fresh.commands[: len(fresh.commands) // 3]
    assert ["# " + " ".join(c) for c in first_round] == ["# " + line for line in
                                                          render(profile).files["accounts.sh"].splitlines()[4:]]


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
