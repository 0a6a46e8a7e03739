"""`slurmk8s status` shows Slurm's view (nodes by state per pool, jobs per partition, slurmctld's health)
and exits 1 when Slurm is degraded; `-o json` keeps the documented fields (docs/status.md)."""

from __future__ import annotations

import json

import pytest

from conftest import GPU_IB, KIND_DEV
from stubcluster import stub_cluster

from slurmk8s.actions.slurmview import node_problem, parse_jobs, parse_nodes, parse_ping, SlurmNode
from slurmk8s.actions.status import run_status

PING_UP = "Slurmctld(primary) at dev-controller-0 is UP\n"
SINFO = "cpu-0|idle|none\ncpu-0|idle|none\ncpu-1|allocated|none\ncpu-2|idle~|none\ncpu-3|idle~|none\n"
SQUEUE = "main|PENDING\nmain|RUNNING\nmain|PENDING\n"


def fake_slurm(ping=PING_UP, sinfo=SINFO, squeue=SQUEUE):
    answers = {"scontrol": ping, "sinfo": sinfo, "squeue": squeue}
    return lambda argv: answers[argv[0]]


def test_parsers_read_what_the_commands_print():
    assert parse_ping("Slurmctld(primary) at a-0 is UP\nSlurmctld(backup) at a-1 is DOWN\n") == (("a-0", "UP"), ("a-1", "DOWN"))
    nodes = parse_nodes(SINFO + "dgx-01|mixed|none\n", {"cpu"})
    assert [(n.name, n.pool, n.state) for n in nodes] == [
        ("dgx-01", "-", "mixed"), ("cpu-0", "cpu", "idle"), ("cpu-1", "cpu", "allocated"),
        ("cpu-2", "cpu", "idle~"), ("cpu-3", "cpu", "idle~")]
    assert parse_jobs(SQUEUE + "a,b|PENDING\n") == (("a", "pending", 1), ("b", "pending", 1), ("main", "pending", 2),
                                                    ("main", "running", 1))


@pytest.mark.parametrize("state, reason, problem", [
    ("idle~", "", None),
    ("drained", "admin: new fan", None),
    ("drained", "slurmk8s-health: check nfs failed", "node x-0 drained by its health check: check nfs failed"),
    ("down*", "Not responding", "node x-0 not responding (down*)"),
    ("down", "reboot", "node x-0 down: reboot"),
], ids=["powered-down", "admin-drain", "health-drain", "not-responding", "down"])
def test_which_node_states_degrade_the_cluster(state, reason, problem):
    assert node_problem(SlurmNode("x-0", "x", state, reason)) == problem


def test_status_shows_slurms_view_and_stays_healthy(up, kubeconfig):
    up(KIND_DEV)
    lines: list[str] = []
    status = run_status(KIND_DEV, stub_cluster(kubeconfig, fake_slurm()), echo=lines.append)
    assert status.problems == ()
    text = "\n".join(lines)
    assert "slurmctld: dev-controller-0 UP" in text
    assert "cpu   1 allocated, 1 idle, 2 idle~" in text
    assert "main       2        1        0" in text


def test_json_fields_are_the_documented_ones(up, kubeconfig):
    up(KIND_DEV)
    lines: list[str] = []
    run_status(KIND_DEV, stub_cluster(kubeconfig, fake_slurm()), echo=lines.append, output="json", note=lambda line: None)
    doc = json.loads("\n".join(lines))
    assert doc["healthy"] is True
    assert doc["slurm"] == {
        "available": True, "error": "",
        "controller": {"healthy": True, "hosts": [{"host": "dev-controller-0", "state": "UP"}]},
        "nodesByPool": {"cpu": {"allocated": 1, "idle": 1, "idle~": 2}},
        "jobsByPartition": {"debug": {"pending": 0, "running": 0, "other": 0},
                            "main": {"pending": 2, "running": 1, "other": 0}},
        "nodes": [{"name": f"cpu-{i}", "pool": "cpu", "state": s, "reason": ""}
                  for i, s in enumerate(["idle", "allocated", "idle~", "idle~"])],
        "problems": [],
    }


def test_a_health_drain_or_a_silent_slurmctld_makes_status_exit_1(up, kubeconfig):
    up(KIND_DEV)
    drained = fake_slurm(sinfo="cpu-0|drained|slurmk8s-health: /tmp has 3 MiB free, needs 1024\ncpu-1|idle|none\n")
    status = run_status(KIND_DEV, stub_cluster(kubeconfig, drained), echo=lambda line: None)
    assert status.problems == ("node cpu-0 drained by its health check: /tmp has 3 MiB free, needs 1024",)
    down = fake_slurm(ping="Slurmctld(primary) at dev-controller-0 is DOWN\n")
    status = run_status(KIND_DEV, stub_cluster(kubeconfig, down), echo=lambda line: None)
    assert status.problems == ("slurmctld does not answer: dev-controller-0 DOWN",)


def test_partitions_without_jobs_are_listed_with_zeros(up, kubeconfig):
    up(GPU_IB)
    lines: list[str] = []
    slurm = fake_slurm(ping="Slurmctld(primary) at research-controller-0 is UP\n",
                       sinfo="h100-0|idle|none\na100-0|mixed|none\n", squeue="")
    run_status(GPU_IB, stub_cluster(kubeconfig, slurm), echo=lines.append, output="json", note=lambda line: None)
    doc = json.loads("\n".join(lines))
    assert doc["slurm"]["jobsByPartition"] == {"gpu": {"pending": 0, "running": 0, "other": 0},
                                               "h100": {"pending": 0, "running": 0, "other": 0}}
    assert doc["slurm"]["nodesByPool"] == {"a100": {"mixed": 1}, "h100": {"idle": 1}}
