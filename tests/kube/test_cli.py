"""The cluster commands as a user runs them: exit codes, one-line errors, kubectl's config rules.

Most run the console script's entry point in this process (tests/inprocess.py); a whole interpreter is
started where the process is the point: one up/status/down round, a full stdout or stderr (/dev/full),
and what `--help` and `render` import."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from conftest import KIND_DEV, object_count
from inprocess import run_cli


def user_env(env_extra: dict | None = None, home: str = "/nonexistent") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = home
    env.update(env_extra or {})
    return env


def slurmk8s(*args: str, env_extra: dict | None = None, home: str = "/nonexistent") -> subprocess.CompletedProcess:
    """`slurmk8s ARGS` through cli.main in this process."""
    return run_cli(args, env=user_env(env_extra, home), timeout=60)


def slurmk8s_process(*args: str, env_extra: dict | None = None,
                     home: str = "/nonexistent") -> subprocess.CompletedProcess:
    """`slurmk8s ARGS` as a new interpreter, as the console script starts it."""
    return subprocess.run([sys.executable, "-m", "slurmk8s.cli", *args], capture_output=True, text=True,
                          env=user_env(env_extra, home), timeout=60)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(("status", "message", "expected"), [
    (401, "Unauthorized", "list statefulsets in slurm: the Kubernetes API at http://127.0.0.1:{port} rejected our "
                          "credentials (401 Unauthorized); they may have expired: log in again or choose another --context"),
    (403, 'namespaces is forbidden: User "alice" cannot list resource "namespaces" at the cluster scope',
     'list statefulsets in slurm: forbidden (403): namespaces is forbidden: User "alice" cannot list resource '
     '"namespaces" at the cluster scope'),
], ids=["401-expired", "403-forbidden"])
def test_auth_failures_are_one_line_and_exit_1(stub, kubeconfig, status, message, expected):
    stub.fail(status, message=message)
    result = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait")
    port = stub.url.rsplit(":", 1)[1]
    assert one_line_error(result) == expected.format(port=port)


def test_verbose_shows_the_api_answer(stub, kubeconfig):
    stub.fail(403, message="forbidden by policy", reason="Forbidden")
    result = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait", "--verbose")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "forbidden (403): forbidden by policy" in result.stderr
    assert '"reason": "Forbidden"' in result.stderr  # the raw Status body
    assert " -> 403 (" in result.stderr  # the request log


def test_conflict_is_one_line_and_exit_1(stub, kubeconfig):
    assert slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait").returncode == 0
    stub.conflicts[("statefulsets", "dev-cpu")] = "helm"
    line = one_line_error(slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait"))
    assert line == ('apply StatefulSet/dev-cpu: conflict with "helm" using apps/v1: .spec.replicas; another tool owns '
                    'these fields (--force-conflicts takes them over)')


def test_unreachable_api_is_one_line_and_quick(tmp_path, stub):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stub._server.server_address = ("127.0.0.1", port)
    kubeconfig = stub.write_kubeconfig(tmp_path / "dead")
    started = time.monotonic()
    line = one_line_error(slurmk8s("status", KIND_DEV, "--kubeconfig", str(kubeconfig)))
    assert time.monotonic() - started < 15
    assert line.endswith(f"cannot reach the Kubernetes API at http://127.0.0.1:{port} (context stub of "
                         f"{kubeconfig}): connection refused")


def test_no_cluster_configured_at_all(tmp_path):
    line = one_line_error(slurmk8s("status", KIND_DEV, home=str(tmp_path)))
    assert line == ("no Kubernetes cluster configured: no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster "
                    "service account")


def test_kubeconfig_env_and_context_are_honoured(stub, kubeconfig):
    assert slurmk8s("secrets", "create", KIND_DEV, "--context", "other",
                    env_extra={"KUBECONFIG": kubeconfig}).returncode == 0
    assert {r.authorization for r in stub.requests} == {"Bearer other-token"}
    line = one_line_error(slurmk8s("status", KIND_DEV, "--context", "nope", env_extra={"KUBECONFIG": kubeconfig}))
    assert line.startswith("cannot load Kubernetes credentials:") and "nope" in line


def test_up_twice_then_status_then_down(stub, kubeconfig):
    """The whole round as separate processes, as a user runs it (the other tests run in this process)."""
    slurmk8s = slurmk8s_process
    first = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait")
    second = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait")
    n = object_count(KIND_DEV)
    assert first.returncode == 0 and f"{n} created, 0 configured" in first.stdout
    assert second.stdout.splitlines()[-1] == f"no changes: {n} objects unchanged, 3 of 3 secrets kept"
    status = slurmk8s("status", KIND_DEV, "--kubeconfig", kubeconfig)
    assert status.returncode == 0, status.stderr
    assert re.search(r"^StatefulSet/dev-cpu +2 of 0\.\.4 running, Slurm-managed$", status.stdout, re.M)
    assert re.search(r"^Secret/dev-auth-key +present$", status.stdout, re.M)
    # the stub serves no websocket exec: status still answers, and says why sinfo is missing
    assert "sinfo:\nunavailable: exec 'sinfo' in pod slurm/dev-controller-0: Handshake status 404 Not Found" in status.stdout
    no_yes = slurmk8s("down", KIND_DEV, "--kubeconfig", kubeconfig, "--delete-data")
    assert no_yes.returncode == 2 and "add --yes" in no_yes.stderr
    gone = slurmk8s("down", KIND_DEV, "--kubeconfig", kubeconfig)
    assert gone.returncode == 0 and f"deleted {n - 1} object(s) of cluster dev" in gone.stdout


def test_help_and_render_never_import_the_kubernetes_client():
    probe = (
        "import sys\n"
        "from slurmk8s.cli import main\n"
        "for argv in (['slurmk8s', '--help'], ['slurmk8s', 'up', '--help'], ['slurmk8s', 'render', sys.argv[1], '-o', '-']):\n"
        "    sys.argv = argv\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('LOADED' if any(m == 'kubernetes' or m.startswith('kubernetes.') for m in sys.modules) else 'CLEAN',"
        " file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe, KIND_DEV], capture_output=True, text=True, timeout=60)
    assert "kind: StatefulSet" in result.stdout  # render really ran
    assert result.stderr.strip().splitlines()[-1] == "CLEAN"


def closed_port_kubeconfig(tmp_path, stub) -> tuple[str, int]:
    """A kubeconfig for 127.0.0.1 on a port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stub._server.server_address = ("127.0.0.1", port)
    return str(stub.write_kubeconfig(tmp_path / "dead")), port


@pytest.mark.parametrize("output", ["text", "json"])
def test_diff_exits_3_when_the_api_is_unreachable_not_1_as_for_changes(tmp_path, stub, output):
    """kubectl diff's convention: 0 no changes, 1 changes, >1 an error; a CI drift check must not fire on an outage."""
    kubeconfig, port = closed_port_kubeconfig(tmp_path, stub)
    result = slurmk8s("diff", KIND_DEV, "--kubeconfig", kubeconfig, "-o", output)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(f"cannot reach the Kubernetes API at http://127.0.0.1:{port} "
                                                           f"(context stub of {kubeconfig}): connection refused")


def test_diff_exits_2_on_a_bad_profile_and_a_bad_flag(tmp_path, kubeconfig):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: slurmk8s.io/v1alpha1\nkind: ClusterProfile\nmetadata: {name: Bad_Name}\n")
    assert slurmk8s("diff", str(bad), "--kubeconfig", kubeconfig).returncode == 2
    assert slurmk8s("diff", KIND_DEV, "--kubeconfig", kubeconfig, "-o", "wide").returncode == 2


@pytest.mark.parametrize("args, code", [
    (["validate", KIND_DEV], 1), (["fence", KIND_DEV], 1), (["--help"], 1), (["--version"], 1), (["render", "-h"], 1),
    (["--show-completion", "zsh"], 1), (["status"], 1), (["diff"], 3), (["diff", "-o", "json"], 3), (["up", "--no-wait"], 1),
    (["down", "--dry-run"], 1), (["secrets", "create"], 1), (["accounts", "apply"], 1),
], ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_a_full_stdout_ends_in_one_line_and_an_exit_code(stub, kubeconfig, args, code):
    """`validate > /dev/full` and friends ended in an OSError traceback (N15); now one path reports every write."""
    cluster_args = ["--kubeconfig", kubeconfig] if args[0] in ("status", "diff", "up", "down", "secrets", "accounts") else []
    if args[0] in ("status", "diff", "up", "down"):
        args = [args[0], KIND_DEV, *args[1:]]
    elif args[0] in ("secrets", "accounts"):
        args = [*args, KIND_DEV]
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    for unbuffered in ("1", ""):  # written at once, or only at the flush before exit
        with open("/dev/full", "w") as full:
            result = subprocess.run([sys.executable, "-m", "slurmk8s.cli", *args, *cluster_args], stdout=full,
                                    stderr=subprocess.PIPE, text=True, timeout=60,
                                    env={**env, "HOME": "/nonexistent", "PYTHONUNBUFFERED": unbuffered})
        assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
        what = "the diff to" if args[0] == "diff" else "to"
        assert result.stderr.splitlines()[-1] == f"cannot write {what} standard output: No space left on device", \
            result.stderr
        assert result.returncode == code, result.stderr


def test_a_full_stderr_still_gives_the_exit_code(tmp_path):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "validate", str(tmp_path / "none.yaml")],
                                stdout=subprocess.PIPE, stderr=full, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")


def test_namespace_flag_renders_what_the_profile_would_with_that_namespace(edited_profile):
    """Every derived use (objects, RBAC subjects, NetworkPolicy peers, DNS names in slurm.conf) follows -n."""
    from slurmk8s.actions.render import render_file
    edited = edited_profile(KIND_DEV, lambda doc: doc["metadata"].update(namespace="team-b"))
    assert render_file(KIND_DEV, "team-b").objects == render_file(edited).objects
    assert render_file(KIND_DEV, "team-b").objects != render_file(KIND_DEV).objects


def test_namespace_flag_puts_every_object_and_reference_in_that_namespace(stub, kubeconfig):
    """-n overrides metadata.namespace as helm's -n does: objects, RBAC subjects, NetworkPolicy peers and the
    ApplySet all move; status, diff and down then find them there, and the profile's namespace stays empty."""
    n = object_count(KIND_DEV)
    up = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait", "-n", "team-b")
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines()[0].startswith("cluster dev in namespace team-b (")
    collections = [c for (_, _, c), objs in stub.store.items() if objs]
    namespaced = [c for c in collections if "/namespaces/" in c]
    assert namespaced and all("/namespaces/team-b/" in c for c in namespaced), collections
    stored = [o for (_, _, c), objs in stub.store.items() for o in objs.values()]
    assert {o["metadata"]["name"] for o in stored if o.get("kind") == "Namespace"} == {"team-b"}
    for o in stored:
        assert o["metadata"].get("namespace") in (None, "team-b"), o["metadata"]
        for subject in o.get("subjects") or []:
            assert subject.get("namespace") in (None, "team-b"), (o["metadata"]["name"], subject)
    text = "\n".join(str(o) for o in stored)
    assert "'namespace': 'slurm'" not in text and ".slurm.svc" not in text  # no reference left in the profile's
    assert slurmk8s("diff", KIND_DEV, "--kubeconfig", kubeconfig, "-n", "team-b").returncode == 0  # nothing to change
    assert slurmk8s("diff", KIND_DEV, "--kubeconfig", kubeconfig).returncode == 1  # slurm is still empty
    status = slurmk8s("status", KIND_DEV, "--kubeconfig", kubeconfig, "-n", "team-b", "-o", "json")
    assert '"namespace": "team-b"' in status.stdout
    gone = slurmk8s("down", KIND_DEV, "--kubeconfig", kubeconfig, "-n", "team-b")
    assert gone.returncode == 0 and f"deleted {n - 1} object(s) of cluster dev" in gone.stdout, gone.stderr


@pytest.mark.parametrize("command", [["up"], ["diff"], ["status"], ["down"], ["rollout"], ["scale", "cpu", "2"],
                                     ["secrets", "create"], ["accounts", "apply"]], ids=" ".join)
@pytest.mark.parametrize("value", ["Team_B", "-team", "a" * 64, ""])
def test_a_bad_namespace_is_a_usage_error(command, value):
    args = [*command[:2], KIND_DEV] if command[0] in ("secrets", "accounts") else [command[0], KIND_DEV, *command[1:]]
    result = slurmk8s(*args, "-n", value)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "is not a namespace name" in result.stderr


@pytest.mark.parametrize("status", [403, 404])
def test_a_refused_pod_exec_ends_the_wait_at_once_with_the_rbac_hint(stub, kubeconfig, status):
    """A 403 or 404 on exec was retried until --timeout (600 s by default): no retry fixes RBAC."""
    if status == 403:
        stub.fail(403, when=lambda r: r.path.split("?")[0].endswith("/exec"), message="pods/exec is forbidden")
    started = time.monotonic()
    result = slurmk8s("up", KIND_DEV, "--kubeconfig", kubeconfig, "--timeout", "300")  # the stub serves no exec: 404
    assert time.monotonic() - started < 45
    line = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert line.startswith(f"exec 'sinfo --noheader --Node --format=%N|%T|%E' in pod slurm/dev-controller-0: "
                           f"Handshake status {status} ")
    assert line.endswith("the credentials need RBAC permission to create pods/exec in namespace slurm "
                         "(check: kubectl auth can-i create pods/exec -n slurm)")


@pytest.mark.parametrize("terminal", [False, True], ids=["log", "terminal"])
def test_rollout_waiting_on_a_drained_node_shows_what_and_since_when(stub, up, kubeconfig, edited_profile, terminal):
    """A drain that waits on a job said one line and then nothing for up to drainTimeout (an hour)."""
    import io

    from slurmk8s.actions.rollout import roll_pools, waiting_reporter
    from slurmk8s.profile.files import read_profile
    from slurmk8s.progress import CLEAR_LINE, Progress
    from slurmk8s.render import render
    from stubcluster import stub_cluster
    from test_rollout import FakeSlurm, changed_pool_spec

    up(KIND_DEV)
    edited = edited_profile(KIND_DEV, changed_pool_spec)
    up(edited, rollout=False)
    slurm = FakeSlurm(stub, jobs={"cpu-0": ("17", 200)})
    out = io.StringIO()
    start = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    say, sleep = waiting_reporter(Progress(out, terminal=terminal, heartbeat=60, now=lambda: start + slurm.now),
                                  sleep=slurm.sleep)
    profile = read_profile(edited)
    roll_pools(stub_cluster(kubeconfig, slurm), render(profile), profile, ready_timeout=60, interval=5, say=say,
               clock=lambda: slurm.now, sleep=sleep)
    waiting = "rollout: drained cpu-0; waiting for their jobs to end"
    if terminal:
        since = time.strftime("%H:%M:%S", time.localtime(start))
        frames = out.getvalue().split(CLEAR_LINE)
        assert f"{waiting} (since {since}, 1m05s)" in frames and f"{waiting} (since {since}, 3m15s)" in frames
        assert out.getvalue().endswith("rollout: done, 2 pod(s) replaced\n")
    else:
        lines = out.getvalue().splitlines()
        assert lines[:3] == ["2027-01-15T08:00:00Z rollout: 2 slurmd pod(s) to replace, 1 at a time",
                             f"2027-01-15T08:00:00Z {waiting}",
                             f"2027-01-15T08:01:00Z {waiting} (waiting 1m00s)"]
        assert f"2027-01-15T08:03:00Z {waiting} (waiting 3m00s)" in lines
        assert CLEAR_LINE not in out.getvalue()
