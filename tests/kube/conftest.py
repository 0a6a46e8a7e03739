"""Fixtures: a recording API stub and a kubeconfig pointing at it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from apistub import ApiStub


@pytest.fixture
def stub():
    """A fresh API stub on 127.0.0.1, stopped after the test."""
    server = ApiStub().start()
    # A GPU cluster with KEDA installed (profiles/gpu-ib.yaml renders a ScaledObject).
    server.discovery["/apis/keda.sh/v1alpha1"] = [{"name": "scaledobjects", "kind": "ScaledObject", "namespaced": True}]
    # and the prometheus-operator (gpu-ib renders a ServiceMonitor)
    server.discovery["/apis/monitoring.coreos.com/v1"] = [
        {"name": "servicemonitors", "kind": "ServiceMonitor", "namespaced": True},
        {"name": "podmonitors", "kind": "PodMonitor", "namespaced": True}]
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(stub, tmp_path, monkeypatch):
    """Path of a kubeconfig for the stub; KUBECONFIG and HOME point away from the user's own config."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return str(stub.write_kubeconfig(tmp_path / "kubeconfig"))


REPO = Path(__file__).resolve().parents[2]
KIND_DEV = str(REPO / "profiles" / "kind-dev.yaml")
GPU_IB = str(REPO / "profiles" / "gpu-ib.yaml")


@pytest.fixture
def edited_profile(tmp_path):
    """edited_profile(source, change) writes a copy of a profile after change(dict) and returns its path."""
    def write(source: str, change) -> str:
        data = yaml.safe_load(Path(source).read_text())
        change(data)
        out = tmp_path / f"edited-{len(list(tmp_path.glob('edited-*')))}.yaml"
        out.write_text(yaml.safe_dump(data))
        return str(out)
    return write


@pytest.fixture
def up(kubeconfig):
    """up(profile, **options) runs `slurmk8s up` in-process against the stub and returns (plan, output lines)."""
    from slurmk8s.actions.up import UpOptions, run_up
    from stubcluster import stub_cluster

    def run(profile: str = KIND_DEV, exec_fn=None, **options):
        lines: list[str] = []
        options.setdefault("wait", exec_fn is not None)
        up_options = UpOptions(**options)
        cluster = stub_cluster(kubeconfig, exec_fn, verbose=up_options.verbose, timeout=up_options.timeout,
                               pool_size=max(up_options.workers, 4) * 2)  # as actions.interface.connect sizes it for up
        plan = run_up(profile, cluster, up_options, echo=lines.append, progress=lines.append)
        return plan, lines
    return run


def object_count(profile) -> int:
    """How many objects the profile renders (the numbers below follow the renderer)."""
    from slurmk8s.actions.render import render_file
    return len(render_file(str(profile)).objects)
