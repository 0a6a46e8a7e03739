"""Slurm's own metrics and the health checks on real Slurm 26.05 (tests/lab/profiles/observe-2605.yaml).

Metrics are scraped over HTTP from slurmctld's port, as Prometheus does through the rendered
Service; the health check is the rendered HealthCheckProgram that slurmd runs by itself.
Needs root and the project's 26.05 images.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from slurmk8s import naming
from slurmk8s.actions.slurmview import read_view
from slurmk8s.profile.observe import METRIC_PATHS, exported_metrics

from labenv import boot_or_skip, down_and_check_clean
from waiting import wait_for

PROFILE = Path(__file__).resolve().parent / "profiles/observe-2605.yaml"
NODE = "cpu-0"
MARKER = "/tmp/sk8s-broken"

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab():
    booted, bundle = boot_or_skip(PROFILE)
    booted.bundle = bundle
    try:
        yield booted
    finally:
        down_and_check_clean(booted)


def scrape(lab, path: str) -> str:
    """One endpoint of slurmctld's OpenMetrics, over HTTP from outside the pod (as a scraper would)."""
    controller = naming.pod_name(naming.component_name(lab.bundle.cluster, naming.CONTROLLER), 0)
    ip = lab.network.pods[controller].ip
    with urllib.request.urlopen(f"http://{ip}:6817{path}", timeout=10) as reply:
        assert reply.status == 200
        return reply.read().decode()


def sample(text: str, metric: str, **labels: str) -> float | None:
    """The value of one series (None when absent)."""
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(metric)}(\{{[^}}]*\}})?\s+(\S+)", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            return float(m.group(2))
    return None


def sh(lab, *argv: str, pod: str | None = None, container: str | None = None) -> str:
    done = lab.exec(list(argv), pod=pod, container=container, timeout=60)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout


def test_every_scraped_endpoint_answers_openmetrics(lab):
    served = set()
    for path in METRIC_PATHS:
        text = scrape(lab, path)
        assert re.search(r"^# TYPE slurm_\w+ (gauge|counter)", text, re.M), (path, text[:500])
        served |= set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    # what validate and the dashboard take as exported is exported
    assert exported_metrics() <= served, sorted(exported_metrics() - served)


def test_pending_count_rises_and_falls_with_a_held_job(lab):
    pending = lambda: sample(scrape(lab, "/metrics/partitions"), "slurm_partition_jobs_pending", partition="cpu")
    before = wait_for("pending jobs of partition cpu reported", pending, lambda v: v is not None)
    job = sh(lab, "sbatch", "--parsable", "-H", "-p", "cpu", "--wrap", "true").strip()
    try:
        wait_for("the held job counted as pending", pending, lambda v: v == before + 1, deadline_s=60)
    finally:
        sh(lab, "scancel", job)
    wait_for("the pending count back where it was", pending, lambda v: v == before, deadline_s=60)


def node_state(lab) -> tuple[str, str]:
    """(state, reason) of NODE as sinfo shows them."""
    out = sh(lab, "sinfo", "-h", "-N", "-n", NODE, "-o", "%t|%E").strip().splitlines()[0]
    state, reason = out.split("|", 1)
    return state, reason


def test_a_failing_check_drains_and_fixing_it_resumes(lab):
    pod = naming.pod_name(naming.pool_statefulset(lab.bundle.cluster, "cpu"), 0)
    wait_for(f"{NODE} idle", lambda: node_state(lab), lambda s: s[0] == "idle", deadline_s=90)
    sh(lab, "touch", MARKER, pod=pod, container="slurmd")
    try:
        state, reason = wait_for(f"{NODE} drained by its health check", lambda: node_state(lab),
                                 lambda s: s[0].startswith("drain"), deadline_s=60)
        assert reason == "slurmk8s-health: check marker failed"
        # `slurmk8s status` reads the same through slurmctld's pod: real output, parsed, judged degraded
        view = read_view(lambda argv: sh(lab, *argv), {"cpu"})
        assert view.controllers == (("obslab-controller-0", "UP"),)
        assert {n.name: n.pool for n in view.nodes} == {"cpu-0": "cpu", "cpu-1": "cpu"}
        assert view.problems == ("node cpu-0 drained by its health check: check marker failed",)
        # an admin's drain of the other node is not the check's to undo
        sh(lab, "scontrol", "update", "nodename=cpu-1", "state=drain", "reason=admin: maintenance")
    finally:
        sh(lab, "rm", "-f", MARKER, pod=pod, container="slurmd")
    wait_for(f"{NODE} resumed by its health check", lambda: node_state(lab), lambda s: s[0] == "idle",
             deadline_s=60)
    # run cpu-1's check now, as slurmd does, rather than hope its interval came round
    other_pod = naming.pod_name(naming.pool_statefulset(lab.bundle.cluster, "cpu"), 1)
    sh(lab, "env", "SLURMD_NODENAME=cpu-1", "/opt/slurmk8s/health/check", pod=other_pod, container="slurmd")
    other = sh(lab, "sinfo", "-h", "-N", "-n", "cpu-1", "-o", "%t|%E").strip()
    assert other.startswith("drain") and other.endswith("|admin: maintenance"), other
    sh(lab, "scontrol", "update", "nodename=cpu-1", "state=resume")
