"""One install order (render/order.py): `up`'s apply stages and Argo CD's sync waves both come from it."""

from __future__ import annotations

from pathlib import Path

from slurmk8s import naming
from slurmk8s.actions.render import render_file
from slurmk8s.kube.stages import STAGE_NAMES, group_by_stage
from slurmk8s.output.argocd import sync_wave
from slurmk8s.render.order import INSTALL_ORDER, stage_of


def test_workload_stages_follow_the_start_order_and_waves_never_go_back() -> None:
    components = [s.component for s in INSTALL_ORDER if s.component is not None]
    assert components == list(naming.COMPONENTS)
    waves = [s.wave for s in INSTALL_ORDER]
    assert waves == sorted(waves), "a later stage would sync in an earlier Argo CD wave"
    assert STAGE_NAMES == tuple(s.name for s in INSTALL_ORDER)


def test_argocd_waves_are_the_apply_stages_waves(example_profile: Path) -> None:
    bundle = render_file(example_profile)
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in bundle.objects}
    for obj in bundle.objects:
        if obj["kind"] == "ScaledObject":  # KEDA needs its target to exist: the wave after it
            target = obj["spec"]["scaleTargetRef"]
            want = INSTALL_ORDER[stage_of(by_name[(target["kind"], target["name"])])].wave + 1
        else:
            want = INSTALL_ORDER[stage_of(obj)].wave
        assert sync_wave(obj, bundle.objects) == want, f"{obj['kind']}/{obj['metadata']['name']}"
    # Every workload waits in Argo CD for what `up` applies before it.
    stages = [name for name, _ in group_by_stage(bundle.objects)]
    assert stages == sorted(stages, key=STAGE_NAMES.index)
    workloads = [o for o in bundle.objects if o["kind"] in naming.WORKLOAD_KINDS]
    for a in workloads:
        for b in workloads:
            if stage_of(a) < stage_of(b):
                assert sync_wave(a) <= sync_wave(b), (a["metadata"]["name"], b["metadata"]["name"])
