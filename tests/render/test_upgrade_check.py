"""The GitOps upgrade check: a hook that runs before the sync and refuses what `up` refuses (docs/rollout.md)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from slurmk8s import versions
from slurmk8s.actions.render import render_file
from slurmk8s.output.argocd import argocd_tree, post_sync_hooks
from slurmk8s.output.helm import helm_tree

ROOT = Path(__file__).resolve().parents[2]
KIND_DEV = ROOT / "profiles" / "kind-dev.yaml"


def check_hooks(bundle) -> list[dict]:
    return [h for h in bundle.hooks if h["metadata"]["labels"].get("app.kubernetes.io/component") == "upgrade-check"]


def test_the_check_may_only_get_the_slurm_statefulsets_and_ships_slurmk8s_own_rule() -> None:
    sa, role, binding, configmap, job = check_hooks(render_file(KIND_DEV))
    assert [o["kind"] for o in (sa, role, binding, configmap, job)] == [
        "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Job"]
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["statefulsets"],
                              "resourceNames": ["dev-accounting", "dev-controller", "dev-cpu"], "verbs": ["get"]}]
    assert configmap["data"]["slurm_versions.py"] == Path(versions.__file__).read_text()
    assert json.loads(configmap["data"]["settings.json"]) == {
        "statefulsets": ["dev-accounting", "dev-controller", "dev-cpu"], "target": "26.05"}
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python3", "/etc/slurmk8s/upgrade-check/upgrade_check.py"]


def test_argo_cd_runs_the_check_before_the_sync_and_the_rest_after() -> None:
    bundle = render_file(KIND_DEV)
    phases = {h["metadata"]["name"] + "/" + h["kind"]: h["metadata"]["annotations"]["argocd.argoproj.io/hook"]
              for h in post_sync_hooks(bundle)}
    before = {k for k, v in phases.items() if v == "PreSync"}
    assert before == {f"dev-upgrade-check/{k}" for k in ("ServiceAccount", "Role", "RoleBinding", "ConfigMap")} | {
        f"{check_hooks(bundle)[-1]['metadata']['name']}/Job"}
    assert {v for k, v in phases.items() if k not in before} == {"PostSync"}
    tree = argocd_tree(bundle, "https://example.org/repo.git", "main", "clusters/dev")
    jobs = [text for path, text in tree.items() if "upgrade-check" in path and path.endswith(".yaml")]
    assert len(jobs) == 5 and all("argocd.argoproj.io/hook: PreSync" in t for t in jobs)
    helm = [text for path, text in helm_tree(bundle).items() if "upgrade-check" in path]
    assert len(helm) == 5 and all("helm.sh/hook: pre-install,pre-upgrade" in t for t in helm)


class Live:
    """The check's Api over a dict: StatefulSet name -> the Slurm release it runs."""

    def __init__(self, releases: dict[str, str]):
        self.releases = releases
        self.asked: list[str] = []

    def statefulset(self, name: str):
        self.asked.append(name)
        if name not in self.releases:
            return None
        return {"metadata": {"name": name, "annotations": {"slurmk8s.io/slurm-version": self.releases[name]}}}


def run_check(tmp_path: Path, monkeypatch, releases: dict[str, str], target: str = "26.05") -> tuple[int, Live, str]:
    configmap = check_hooks(render_file(KIND_DEV))[3]
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    settings = json.loads(configmap["data"]["settings.json"])
    (tmp_path / "settings.json").write_text(json.dumps({**settings, "target": target}))
    spec = importlib.util.spec_from_file_location(f"upgrade_check_{tmp_path.name}", tmp_path / "upgrade_check.py")
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for shipped in ("kubeapi", "slurm_versions"):
        monkeypatch.delitem(sys.modules, shipped, raising=False)
    spec.loader.exec_module(script)
    live = Live(releases)
    said: list[str] = []
    monkeypatch.setattr(script, "Api", lambda: live)
    monkeypatch.setattr(script, "log", said.append)
    monkeypatch.setattr(script, "TERMINATION_LOG", str(tmp_path / "termination-log"))
    code = script.main()
    return code, live, "\n".join(said)


@pytest.mark.parametrize("releases, target, refusal", [
    ({"dev-accounting": "24.05", "dev-controller": "24.05", "dev-cpu": "24.05"}, "26.05",
     "Slurm 24.05 -> 26.05 skips 3 release(s); Slurm 26.05 upgrades from at most 3 releases back: upgrade to 25.11 first"),
    ({"dev-accounting": "26.05", "dev-controller": "26.05", "dev-cpu": "26.05"}, "25.11",
     "Slurm 26.05 -> 25.11 is a downgrade, which Slurm does not support"),
    # a half-done upgrade: the oldest part may not skip either
    ({"dev-accounting": "25.11", "dev-controller": "25.11", "dev-cpu": "24.05"}, "26.05",
     "Slurm 24.05 -> 26.05 skips 3 release(s)"),
], ids=["skips-too-many", "downgrade", "oldest-part-skips"])
def test_a_step_slurm_does_not_support_fails_the_job_naming_it(tmp_path, monkeypatch, releases, target, refusal):
    code, live, said = run_check(tmp_path, monkeypatch, releases, target)
    assert code == 1
    assert said.startswith(f"spec.slurm.version: {refusal}")
    assert (tmp_path / "termination-log").read_text() == said
    assert sorted(live.asked) == ["dev-accounting", "dev-controller", "dev-cpu"]


@pytest.mark.parametrize("releases", [
    {},  # the first sync: nothing runs yet
    {"dev-accounting": "24.11", "dev-controller": "24.11", "dev-cpu": "24.11"},  # 24.11 -> 26.05: one step
    {"dev-accounting": "26.05", "dev-controller": "26.05", "dev-cpu": "26.05"},
], ids=["first-sync", "allowed-step", "same-release"])
def test_an_allowed_step_passes(tmp_path, monkeypatch, releases):
    code, _, said = run_check(tmp_path, monkeypatch, releases)
    assert code == 0, said
    assert not (tmp_path / "termination-log").exists()
