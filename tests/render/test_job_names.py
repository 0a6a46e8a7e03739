"""The GitOps Jobs' names change with their input and only with it (issue 24 item 10).

Without hooks (plain `kubectl apply -k`, Flux) a Job is an object like any other: a changed spec under
the same name fails the apply (a Job's template is immutable), and a new input under an old name never
runs. So each Job's name is a digest of what it runs: its spec, the ConfigMap it mounts, what it acts on.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from slurmk8s import naming
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"
ALL = {naming.ACCOUNTS, naming.ROLLOUT, naming.UPGRADE_CHECK}


def jobs(tmp_path: Path, change=None) -> dict[str, dict]:
    """component -> (Job, data of the ConfigMap it mounts) of gpu-ib after change(spec)."""
    data = yaml.safe_load(GPU_IB.read_text())
    if change:
        change(data["spec"])
    path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    bundle = render(read_profile(str(path)))
    maps = {h["metadata"]["name"]: h.get("data") for h in bundle.hooks if h["kind"] == "ConfigMap"}
    out = {}
    for job in (h for h in bundle.hooks if h["kind"] == "Job"):
        mounted = [v["configMap"]["name"] for v in job["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
        out[job["metadata"]["labels"][naming.LABEL_COMPONENT]] = (job, {m: maps.get(m) for m in mounted})
    assert set(out) == ALL
    return out


def _pool(spec, name):
    return next(p for p in spec["pools"] if p["name"] == name)


CHANGES = [
    ("nothing", None, set()),
    ("qos", lambda s: s["scheduling"]["qos"].append({"name": "debug", "priority": 5}), {naming.ACCOUNTS}),
    ("account-users", lambda s: s["scheduling"]["accounts"][1]["users"].append("lin"), {naming.ACCOUNTS}),
    # slurm.conf: the rollout Job reconfigures to its digest; the accounts Job runs with the config.
    ("partition-maxTime", lambda s: s["partitions"][0].update(maxTime="3-00:00:00"), {naming.ROLLOUT, naming.ACCOUNTS}),
    ("pool-tolerations", lambda s: _pool(s, "a100").update(tolerations=[{"key": "x", "operator": "Exists"}]),
     {naming.ROLLOUT}),
    ("image-tag", lambda s: s["slurm"].update(images={"tag": "26.05.9-debian12"}), ALL),
    # Applied to every pod after the Jobs are built: their names must still follow.
    ("priority-class", lambda s: s.setdefault("pods", {}).update(priorityClassName="hpc-critical"), ALL),
    ("pull-secret", lambda s: s.setdefault("pods", {}).update(imagePullSecrets=["regcred"]), ALL),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_a_jobs_name_changes_exactly_when_what_it_runs_changes(tmp_path: Path, change, expected) -> None:
    before, after = jobs(tmp_path), jobs(tmp_path, change)
    renamed = {c for c in ALL if before[c][0]["metadata"]["name"] != after[c][0]["metadata"]["name"]}
    assert renamed == expected
    # Whatever else a name follows (the rollout: the pool templates; the accounts Job: the Slurm config it
    # runs with), a Job whose spec or ConfigMap changes always gets a new name.
    for component in ALL:
        (old_job, old_maps), (new_job, new_maps) = before[component], after[component]
        if old_job["spec"] != new_job["spec"] or old_maps != new_maps:
            assert old_job["metadata"]["name"] != new_job["metadata"]["name"], f"{component}: new input, old name"

def test_the_names_keep_their_form(tmp_path: Path) -> None:
    names = {c: j["metadata"]["name"] for c, (j, _) in jobs(tmp_path).items()}
    for component, name in names.items():
        prefix = f"research-{component}-"
        assert name.startswith(prefix) and len(name) == len(prefix) + 8, name
        int(name[len(prefix):], 16)
