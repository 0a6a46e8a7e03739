"""Accounts under GitOps (issue 16): one applier, run in-process by `up` / `accounts apply` and as the rendered Job.

The Job's program is the applier's own source (slurmk8s/podside/sacctmgr.py) plus its entry point; here it
runs for real, with python, against a fake sacctmgr on PATH that answers from files.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmk8s import naming
from slurmk8s.profile.files import read_profile
from slurmk8s.profile import scheduling
from slurmk8s.render import render
from slurmk8s.podside import sacctmgr
from slurmk8s.render.k8s.accounts import accounts_program, desired_tree
from slurmk8s.podside.sacctmgr import fresh_tree, tree_from_json, tree_to_json
from slurmk8s.render.k8s.common import SACK_VOLUME

ROOT = Path(__file__).resolve().parents[2]
GPU_IB = ROOT / "profiles" / "gpu-ib.yaml"
SCRIPT = ROOT / "slurmk8s" / "podside" / "accounts_job.py"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

sys.path.insert(0, str(Path(__file__).parent))
from test_accounts import FakeSacctmgr  # noqa: E402  (sacctmgr over an in-memory slurmdbd)


def top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_applier_and_the_job_use_the_standard_library_only() -> None:
    """They run in the controller image, where slurmk8s is not installed."""
    assert top_level_imports(Path(sacctmgr.__file__)) <= STDLIB
    assert top_level_imports(SCRIPT) <= STDLIB


def test_builtin_names_agree_with_the_profile_rules() -> None:
    assert (sacctmgr.BUILTIN_QOS, sacctmgr.ROOT_ACCOUNT) == (scheduling.BUILTIN_QOS, scheduling.ROOT_ACCOUNT)


@pytest.mark.parametrize("profile", [GPU_IB, ROOT / "tests/lab/profiles/sched-2605.yaml"], ids=lambda p: p.name)
def test_the_tree_survives_json(profile: Path) -> None:
    tree = desired_tree(read_profile(profile))
    assert tree_from_json(tree_to_json(tree)) == tree
    assert list(tree_from_json(tree_to_json(tree)).accounts) == list(tree.accounts)  # parents before children
    assert tree_to_json(tree_from_json(tree_to_json(tree))) == tree_to_json(tree)


def job_of(profile: Path) -> dict:
    (job,) = [h for h in render(read_profile(profile)).hooks
              if h["kind"] == "Job" and h["metadata"]["labels"].get(naming.LABEL_COMPONENT) == naming.ACCOUNTS]
    return job


def fake_sacctmgr(tmp_path: Path, current, desired, registered_after: int = 1) -> Path:
    """A sacctmgr on PATH: `show cluster` lists nothing `registered_after` times, `show` answers from current's
    tree until a `-i` command ran, then from desired's (a database that took the commands)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "before.json").write_text(json.dumps({w: FakeSacctmgr(current).show(w) for w in ("assoc", "user", "qos")}))
    (state / "after.json").write_text(json.dumps({w: FakeSacctmgr(desired).show(w) for w in ("assoc", "user", "qos")}))
    (state / "cluster").write_text(current.cluster)
    (state / "waits").write_text(str(registered_after))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sacctmgr"
    fake.write_text(f"""#!{sys.executable}
import json, os, sys
state = {str(state)!r}
args = sys.argv[1:]
with open(os.path.join(state, "log"), "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:1] == ["-i"]:
    open(os.path.join(state, "changed"), "w").close()
    sys.exit(0)
if args[:4] == ["-P", "-n", "show", "cluster"]:
    waits = int(open(os.path.join(state, "waits")).read())
    open(os.path.join(state, "waits"), "w").write(str(waits - 1))
    print("" if waits > 0 else open(os.path.join(state, "cluster")).read())
    sys.exit(0)
if args[:3] == ["-P", "-n", "show"]:
    which = "after.json" if os.path.exists(os.path.join(state, "changed")) else "before.json"
    sys.stdout.write(json.load(open(os.path.join(state, which)))[args[3]])
    sys.exit(0)
sys.exit(f"fake sacctmgr: unexpected {{args}}")
""")
    fake.chmod(0o755)
    return state


def run_job(job: dict, bin_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """The Job's main container command, with this machine's python3 and the fake sacctmgr first on PATH."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:2] == ["python3", "-c"]
    job_env = {e["name"]: e["value"] for e in container["env"]}
    return subprocess.run([sys.executable, "-c", command[2]], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **job_env,
                               "SLURMK8S_ACCOUNTS_POLL": "0.01", **env})


def test_the_job_waits_for_the_cluster_then_applies_the_tree(tmp_path: Path) -> None:
    profile = read_profile(GPU_IB)
    state = fake_sacctmgr(tmp_path, fresh_tree(profile.name), desired_tree(profile), registered_after=2)
    run = run_job(job_of(GPU_IB), tmp_path / "bin")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("waiting for slurmdbd to know cluster research") == 2
    commands = [json.loads(line) for line in (state / "log").read_text().splitlines()]
    applied = [c for c in commands if c[:1] == ["-i"]]
    # exactly the commands render writes for review (accounts.sh), then a second read finds nothing to do
    review = render(profile).files["accounts.sh"].splitlines()[4:]
    assert [" ".join(["sacctmgr"] + c) for c in applied] == review
    assert run.stdout.strip().endswith(f"slurmk8s-accounts: {len(review)} sacctmgr command(s) applied")


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    profile = read_profile(GPU_IB)
    state = fake_sacctmgr(tmp_path, desired_tree(profile), desired_tree(profile), registered_after=0)
    run = run_job(job_of(GPU_IB), tmp_path / "bin")
    assert run.returncode == 0, run.stderr
    assert not [c for c in (state / "log").read_text().splitlines() if c.startswith('["-i"')]
    assert run.stdout.strip() == "slurmk8s-accounts: the tree is as the profile says"


def test_the_job_fails_with_one_line_when_slurmdbd_never_knows_the_cluster(tmp_path: Path) -> None:
    profile = read_profile(GPU_IB)
    fake_sacctmgr(tmp_path, fresh_tree(profile.name), desired_tree(profile), registered_after=10**6)
    run = run_job(job_of(GPU_IB), tmp_path / "bin", SLURMK8S_ACCOUNTS_WAIT="0.05")
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1].startswith("slurmk8s-accounts: cluster research is not registered in slurmdbd")
    assert "Traceback" not in run.stderr


def test_the_job_is_named_by_what_it_applies(tmp_path: Path) -> None:
    """A Job's pod template cannot change; a changed tree must be a new Job (kustomize applies it as one)."""
    changed = tmp_path / "p.yaml"
    changed.write_text(GPU_IB.read_text().replace("fairshare: 40", "fairshare: 41", 1))
    assert "fairshare: 41" in changed.read_text()
    first, again, other = job_of(GPU_IB), job_of(GPU_IB), job_of(changed)
    assert first["metadata"]["name"] == again["metadata"]["name"] != other["metadata"]["name"]
    assert first["metadata"]["name"].startswith("research-accounts-")


def test_no_service_or_policy_of_a_daemon_selects_the_job_pod() -> None:
    """The Job's pod has its own component label: the slurmdbd Service must never resolve to it."""
    bundle = render(read_profile(GPU_IB))
    labels = job_of(GPU_IB)["spec"]["template"]["metadata"]["labels"]
    for obj in bundle.objects:
        selector = (obj.get("spec", {}).get("selector") if obj["kind"] == "Service" else
                    (obj.get("spec", {}).get("selector") or {}).get("matchLabels") if obj["kind"] == "PodDisruptionBudget"
                    else None)
        if selector:
            assert not all(labels.get(k) == v for k, v in selector.items()), obj["metadata"]["name"]


def test_the_program_is_the_applier_in_process_uses() -> None:
    assert accounts_program().startswith(Path(sacctmgr.__file__).read_text())



@pytest.mark.parametrize("component", [naming.ACCOUNTS, naming.ROLLOUT])
def test_under_auth_slurm_a_hook_jobs_clients_have_a_sackd_beside_them(component: str) -> None:
    """An auth/slurm client asks a sack socket (no daemon runs in a Job's pod), so each Slurm Job carries
    sackd as a native sidecar sharing its socket directory with the container that runs the clients."""
    profile = read_profile(ROOT / "tests/lab/profiles/sched-2605.yaml")
    assert profile.auth == "slurm"
    (job,) = [h for h in render(profile).hooks
              if h["kind"] == "Job" and h["metadata"]["labels"].get(naming.LABEL_COMPONENT) == component]
    pod = job["spec"]["template"]["spec"]
    (sackd,) = [c for c in pod["initContainers"] if c["name"] == "sackd"]
    assert sackd["restartPolicy"] == "Always" and sackd["command"][0] == "sackd"
    assert sackd["image"] == profile.images.login  # the image that carries sackd (images/recipes.py)
    socket_dir = {m["name"]: m["mountPath"] for m in sackd["volumeMounts"]}[SACK_VOLUME]
    (client,) = pod["containers"]
    assert {"name": SACK_VOLUME, "mountPath": socket_dir} in client["volumeMounts"]
    assert pod["initContainers"].index(sackd) > 0  # after the config it reads is installed


def test_under_munge_no_job_runs_sackd() -> None:
    hooks = render(read_profile(ROOT / "profiles/legacy-munge.yaml")).hooks
    assert not [c for h in hooks if h["kind"] == "Job"
                for c in h["spec"]["template"]["spec"].get("initContainers", []) if c["name"] == "sackd"]
