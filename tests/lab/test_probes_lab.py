"""The rendered probes against real daemons: boot waits on every readiness probe (exec and httpGet
run as the kubelet runs them), and a stopped daemon fails its liveness probe, where a TCP probe
still passes (the kernel accepts connections for a stopped process). Needs root and the images.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from slurmk8s import naming
from slurmk8s.lab import lifecycle
from slurmk8s.lab.plan import Probe

from labenv import boot_or_skip, down_and_check_clean
from waiting import wait_for

PROFILES = Path(__file__).resolve().parent / "profiles"

pytestmark = pytest.mark.lab


@pytest.mark.parametrize("profile", ["probes-2605.yaml", "probes-2411.yaml"], ids=["http-26.05", "exec-24.11"])
def test_a_stopped_daemon_fails_its_probes_and_passes_them_again_once_continued(profile: str) -> None:
    lab, bundle = boot_or_skip(PROFILES / profile)  # returns once every readiness probe passed
    try:
        for component, name in ((naming.CONTROLLER, "slurmctld"), (naming.WORKER, "slurmd")):
            pod = next(p for p in lab.pods if p.component == component)
            c = next(x for x in pod.containers if x.name == name)
            assert c.liveness is not None and (c.liveness.command or c.liveness.path), f"{name}: {c.liveness}"
            tcp = Probe(port=6817 if name == "slurmctld" else 6818, timeout_s=c.liveness.timeout_s)
            assert lab.probe_passes(pod, c, c.liveness) and lab.probe_passes(pod, c, c.readiness)
            pid = lifecycle.load_state(lab.lab_id)["pods"][pod.name]["containers"][name]
            os.kill(pid, signal.SIGSTOP)
            try:
                results = {"liveness": lab.probe_passes(pod, c, c.liveness),
                           "readiness": lab.probe_passes(pod, c, c.readiness), "tcp": lab.probe_passes(pod, c, tcp)}
            finally:
                os.kill(pid, signal.SIGCONT)
            assert results == {"liveness": False, "readiness": False, "tcp": True}, (name, results)
            wait_for(f"{name} passes its liveness probe once continued", lambda: lab.probe_passes(pod, c, c.liveness),
                     deadline_s=60)
        for component in (naming.ACCOUNTING, naming.DATABASE, naming.RESTAPI):
            for pod in (p for p in lab.pods if p.component == component):
                for c in pod.containers:
                    assert lab.probe_passes(pod, c, c.liveness), f"{pod.name}/{c.name}: {c.liveness}"
    finally:
        down_and_check_clean(lab)
