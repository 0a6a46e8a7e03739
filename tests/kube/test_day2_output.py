"""diff and up say which pods a change restarts and why; up applies the rest in place (scontrol reconfigure)."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.actions.reconfigure import ANNOTATION_CONFIG_SEEN, SEEN_DIGEST, files_digest
from slurmk8s.actions.render import render_file

from conftest import KIND_DEV

SINFO = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]
IN_PLACE_MAXTIME = "in place (scontrol reconfigure, no pod restarts): PartitionName=debug"
MUNGE_IMAGES = {"registry": "registry.example.org/hpc", "tag": "26.05-munge"}


def diff_lines(kubeconfig, profile: str) -> list[str]:
    from slurmk8s.actions.diff import run_diff
    from slurmk8s.kube.kubecluster import KubeCluster
    lines: list[str] = []
    run_diff(profile, KubeCluster(kubeconfig), echo=lines.append)
    return lines


def test_diff_says_a_maxtime_edit_is_applied_in_place_and_restarts_nothing(up, kubeconfig, edited_profile):
    up(KIND_DEV)
    lines = diff_lines(kubeconfig, edited_profile(KIND_DEV, lambda p: p["spec"]["partitions"][0].update(maxTime="02:00:00")))
    assert IN_PLACE_MAXTIME in lines
    assert not [line for line in lines if line.startswith("restarts:")]


def test_diff_names_the_pods_an_auth_type_edit_restarts_and_why(up, kubeconfig, edited_profile):
    base = edited_profile(KIND_DEV, lambda p: p["spec"]["slurm"].update(images=MUNGE_IMAGES))
    up(base)
    lines = diff_lines(kubeconfig, edited_profile(KIND_DEV, lambda p: p["spec"]["slurm"].update(
        images=MUNGE_IMAGES, auth="munge")))
    restarts = {line.split(" (")[0]: line for line in lines if line.startswith("restarts:")}
    assert "AuthType changed" in restarts["restarts: dev-controller-0"]
    assert "AuthType changed" in restarts["restarts: dev-cpu-0, dev-cpu-1"]
    assert "AuthType changed" in restarts["restarts: dev-login-0"]


def test_diff_names_a_pod_spec_change_as_the_reason(up, kubeconfig, edited_profile):
    up(KIND_DEV)
    lines = diff_lines(kubeconfig, edited_profile(KIND_DEV, lambda p: p["spec"]["pools"][0].update(
        tolerations=[{"operator": "Exists"}])))
    assert [line for line in lines if line.startswith("restarts:")] == [
        "restarts: dev-cpu-0, dev-cpu-1 (tolerations changed)"]
    assert not [line for line in lines if line.startswith("in place")]


def test_up_says_it_before_applying_then_reconfigures_slurm_in_place(stub, up, edited_profile):
    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, lambda p: p["spec"]["partitions"][0].update(maxTime="02:00:00"))
    bundle = render_file(edited)
    want = files_digest(bundle.find("ConfigMap", naming.config_map("dev"))["data"])
    asked: list[list[str]] = []
    digests = iter(["0" * 64 + "  -\n", want + "  -\n"])  # the kubelet refreshes the volume on the second look

    def run(command):
        asked.append(command)
        if command == SINFO:
            return "cpu-0|idle|none\ncpu-1|idle|none\n"
        if command == SEEN_DIGEST:
            return next(digests)
        if command[0] == "sinfo":  # `up` looking for drains of its own to resume: none
            return ""
        assert command == ["scontrol", "reconfigure"]
        return ""
    templates = {n: stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", n)["spec"]["template"]
                 for n in ("dev-cpu", "dev-controller", "dev-login")}
    _, lines = up(edited, exec_fn=run)
    assert lines.index(IN_PLACE_MAXTIME) < lines.index("  ConfigMap/dev-slurm-config configured")
    assert not [line for line in lines if line.startswith("restarts:")]
    assert asked[-3:] == [SEEN_DIGEST, SEEN_DIGEST, ["scontrol", "reconfigure"]]
    assert any(line.startswith("reconfigured in place:") for line in lines)
    pod = stub.get("/api/v1/namespaces/slurm/pods", "dev-controller-0")
    assert pod["metadata"]["annotations"][ANNOTATION_CONFIG_SEEN] == want[:16]
    assert {n: stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", n)["spec"]["template"]
            for n in templates} == templates


def test_up_without_a_slurm_change_runs_no_reconfigure(up):
    up(KIND_DEV)
    asked: list[list[str]] = []
    _, lines = up(KIND_DEV, exec_fn=lambda c: asked.append(c) or ("cpu-0|idle|none\ncpu-1|idle|none\n" if c == SINFO else ""))
    assert asked[0] == SINFO and [c for c in asked if c[0] != "sinfo"] == []
    assert not [line for line in lines if line.startswith(("restarts:", "in place", "reconfigured"))]


def test_reconfigure_gives_up_with_one_clear_error_when_the_controller_never_sees_the_files():
    import pytest
    from slurmk8s.actions.reconfigure import reconfigure_in_place
    from slurmk8s.errors import ClusterError
    nudged, ran = [], []
    with pytest.raises(ClusterError) as caught:
        reconfigure_in_place({"slurm.conf": "ClusterName=dev\n"}, ["dev-controller-0", "dev-controller-1"],
                             lambda pod, value: nudged.append(pod), lambda c: ran.append(c) or "0" * 64 + "  -\n",
                             timeout=0.2, poll=0.01, say=lambda line: None)
    assert str(caught.value).startswith("the controller did not see the new Slurm config within 0 s")
    assert nudged == ["dev-controller-0", "dev-controller-1"]
    assert ran and ["scontrol", "reconfigure"] not in ran


def test_reconfigure_stops_at_once_when_exec_is_refused():
    """A 403 from pods/exec will not heal: the first refusal ends the wait with the RBAC hint, instead of
    asking again until the timeout (issue 24, item 24)."""
    import time

    import pytest
    from slurmk8s.actions.reconfigure import reconfigure_in_place
    from slurmk8s.errors import ExecRefused
    asked = []

    def refused(command):
        asked.append(command)
        raise ExecRefused("exec in dev-controller-0: Forbidden: kubectl auth can-i create pods/exec -n slurm")
    started = time.monotonic()
    with pytest.raises(ExecRefused, match="can-i create pods/exec"):
        reconfigure_in_place({"slurm.conf": "ClusterName=dev\n"}, ["dev-controller-0"], lambda pod, value: None,
                             refused, timeout=60, poll=0.01, say=lambda line: None)
    assert len(asked) == 1 and time.monotonic() - started < 30


ADA = {"name": "ada", "uid": 2001, "sshKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY ada"]}
BOB = {"name": "bob", "uid": 2002, "sshKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY bob"]}
IN_PLACE_KEYS = "in place (login and slurmd pods reload them within 100 s, no restart): ssh keys of ada changed"
IN_PLACE_USERS = ("in place (login and slurmd pods reload them within 100 s, no restart): "
                  "user bob added, group bob added, ssh keys of bob added")
AT_START = "configuration or declared users (names, ids, groups) this pod reads only at start changed"


def test_diff_and_up_apply_a_change_of_keys_in_place_and_replace_no_pod(stub, up, kubeconfig, edited_profile):
    up(edited_profile(KIND_DEV, lambda p: p["spec"].update(identity={"users": [ADA]})))
    templates = {n: stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", n)["spec"]["template"]
                 for n in ("dev-cpu", "dev-controller", "dev-login", "dev-accounting")}
    ada = {**ADA, "sshKeys": ADA["sshKeys"] + [ADA["sshKeys"][0] + "-laptop"]}
    edited = edited_profile(KIND_DEV, lambda p: p["spec"].update(identity={"users": [ada]}))
    lines = diff_lines(kubeconfig, edited)
    assert IN_PLACE_KEYS in lines
    assert not [line for line in lines if line.startswith(("restarts:", "in place (scontrol"))], lines
    _, applied = up(edited)
    assert IN_PLACE_KEYS in applied
    assert "  ConfigMap/dev-identity configured" in applied
    assert not [line for line in applied if line.startswith("restarts:")]
    assert {n: stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", n)["spec"]["template"]
            for n in templates} == templates


def test_a_new_user_restarts_only_the_daemons_that_read_users_at_start(stub, up, kubeconfig, edited_profile):
    """slurmctld and slurmdbd resolve a job's user and cannot reload /etc/passwd (they run as their own user):
    they restart, which running jobs survive; login keeps its sessions and no slurmd is drained."""
    up(edited_profile(KIND_DEV, lambda p: p["spec"].update(identity={"users": [ADA]})))
    get = lambda n: stub.get("/apis/apps/v1/namespaces/slurm/statefulsets", n)["spec"]["template"]
    kept = {n: get(n) for n in ("dev-cpu", "dev-login")}
    replaced = {n: get(n) for n in ("dev-controller", "dev-accounting")}
    edited = edited_profile(KIND_DEV, lambda p: p["spec"].update(identity={"users": [ADA, BOB]}))
    lines = diff_lines(kubeconfig, edited)
    assert IN_PLACE_USERS in lines
    assert sorted(line for line in lines if line.startswith("restarts:")) == [
        f"restarts: dev-accounting-0 ({AT_START})", f"restarts: dev-controller-0 ({AT_START})"], lines
    up(edited)
    assert {n: get(n) for n in kept} == kept
    assert all(get(n) != template for n, template in replaced.items())
