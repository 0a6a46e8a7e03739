"""Cluster commands that behave like kubectl (issue 16): other clusters' objects are never taken over,
exit codes say what happened, transient API errors are retried, nothing hangs past --timeout,
kubeconfig is resolved kubectl's way, and every failure is one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import slurmk8s
from conftest import KIND_DEV, object_count
from inprocess import run_cli

CODE = str(Path(slurmk8s.__file__).resolve().parents[1])  # subprocesses run the code under test
APPS = "/apis/apps/v1/namespaces/slurm"


def cli_env(env_extra: dict | None = None) -> dict[str, str]:
    """The environment of a user with no kubeconfig of their own (the code under test on PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update({"HOME": "/nonexistent", "PYTHONPATH": CODE}, **(env_extra or {}))
    return env


def slurmk8s_run(*args: str, env_extra: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`slurmk8s ARGS` through the console script's entry point, in this process (tests/inprocess.py)."""
    return run_cli(args, env=cli_env(env_extra), timeout=timeout)


def slurmk8s_process(*args: str, env_extra: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`slurmk8s ARGS` as a new interpreter: for what only a whole process shows (it exits when done)."""
    return subprocess.run([sys.executable, "-m", "slurmk8s.cli", *args], capture_output=True, text=True,
                          env=cli_env(env_extra), timeout=timeout)


def one_line(run: subprocess.CompletedProcess, code: int) -> str:
    assert run.returncode == code, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def invoke(*args: str):
    """The typer app in standalone mode, as the console script runs it: exit codes of typer.Exit are kept."""
    from slurmk8s.cli import app
    return CliRunner().invoke(app, list(args))


def cluster(edited_profile, name: str, pool: str) -> str:
    def change(doc):
        doc["metadata"]["name"] = name
        doc["spec"]["pools"][0]["name"] = pool
        doc["spec"]["partitions"][0]["pools"] = [pool]
    return edited_profile(KIND_DEV, change)


# ---------------------------------------------------------------- names that alias across clusters

@pytest.mark.parametrize("pool_a, refused", [
    ("gpu-cpu", "PodDisruptionBudget/team-gpu-cpu in namespace slurm belongs to cluster team, not team-gpu "
                "(and 2 more: PodDisruptionBudget/team-gpu-cpu-busy, StatefulSet/team-gpu-cpu)"),
    ("gpu-controller", "StatefulSet/team-gpu-controller in namespace slurm belongs to cluster team, not team-gpu")],
    ids=["pool-vs-pool", "pool-vs-slurmctld"])
def test_up_refuses_objects_of_another_cluster_and_down_leaves_them(stub, kubeconfig, edited_profile, pool_a, refused):
    """Cluster team (pool gpu-cpu) and cluster team-gpu (pool cpu) both make StatefulSet team-gpu-cpu;
    a pool gpu-controller of team has the name of team-gpu's slurmctld StatefulSet."""
    team = cluster(edited_profile, "team", pool_a)
    team_gpu = cluster(edited_profile, "team-gpu", "cpu")
    assert slurmk8s_run("up", team, "--kubeconfig", kubeconfig, "--no-wait").returncode == 0
    sts = f"team-{pool_a}"
    theirs = stub.get(f"{APPS}/statefulsets", sts)
    stub.reset_log()
    line = one_line(slurmk8s_run("up", team_gpu, "--kubeconfig", kubeconfig, "--no-wait"), 1)
    assert line == (f"{refused}; applying would take it over: rename the pool (or the cluster), or put the clusters "
                    "in different namespaces")
    assert [r for r in stub.requests if r.method != "GET"] == []  # refused before any write
    assert one_line(slurmk8s_run("diff", team_gpu, "--kubeconfig", kubeconfig), 3) == line  # an error, not "changes"
    down = slurmk8s_run("down", team_gpu, "--kubeconfig", kubeconfig)
    assert down.returncode == 0, down.stderr
    assert f"StatefulSet/{sts} (belongs to cluster team)" in down.stdout
    assert stub.get(f"{APPS}/statefulsets", sts) == theirs
    assert slurmk8s_run("status", team, "--kubeconfig", kubeconfig).returncode == 0


def test_down_deletes_exactly_the_object_it_listed(stub, kubeconfig, up):
    """A delete names the uid it listed: an object recreated under that name meanwhile is not deleted."""
    up(KIND_DEV)
    from slurmk8s.kube.client import Access, connect
    from slurmk8s.kube.teardown import Teardown
    from slurmk8s.actions.render import render_file
    td = Teardown(connect(Access(kubeconfig)), render_file(KIND_DEV))
    listed = next(o for o in td.workloads_and_plumbing() if o["metadata"]["name"] == "dev-cpu")
    stub.seed(f"{APPS}/statefulsets", {**stub.get(f"{APPS}/statefulsets", "dev-cpu"), "metadata": {
        **stub.get(f"{APPS}/statefulsets", "dev-cpu")["metadata"]}})  # same name, new uid
    from slurmk8s.errors import ClusterError
    with pytest.raises(ClusterError, match="delete StatefulSet/dev-cpu: HTTP 409 Conflict: Precondition failed"):
        td.delete([listed])
    assert stub.get(f"{APPS}/statefulsets", "dev-cpu") is not None


# ---------------------------------------------------------------- exit codes and -o json|yaml

def test_diff_exits_1_when_up_would_change_something(stub, kubeconfig, up):
    changed = slurmk8s_run("diff", KIND_DEV, "--kubeconfig", kubeconfig)
    assert (changed.returncode, changed.stderr) == (1, "")
    assert changed.stdout.splitlines()[-1].startswith("would change: ")
    assert invoke("diff", KIND_DEV, "--kubeconfig", kubeconfig).exit_code == 1  # the app run by a console script
    up(KIND_DEV)
    same = slurmk8s_run("diff", KIND_DEV, "--kubeconfig", kubeconfig)
    assert (same.returncode, same.stderr) == (0, "")
    assert same.stdout.splitlines()[-1].startswith("no changes: ")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_diff_output_is_one_document(stub, kubeconfig, fmt):
    result = invoke("diff", KIND_DEV, "--kubeconfig", kubeconfig, "-o", fmt)
    assert result.exit_code == 1
    doc = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    n = object_count(KIND_DEV)
    assert (doc["cluster"], doc["namespace"], doc["changed"]) == ("dev", "slurm", True)
    assert doc["context"] == {"name": "stub", "file": kubeconfig, "server": stub.url}  # fields, not a sentence
    assert doc["counts"]["created"] == n + 3  # objects and the three Secrets
    sts = next(c for c in doc["changes"] if c["ref"] == "StatefulSet/dev-cpu")
    assert (sts["action"], sts["live"], sts["applied"]["spec"]["replicas"]) == ("created", None, 2)
    secret = next(c for c in doc["changes"] if c["kind"] == "Secret")
    assert set(secret) == {"ref", "kind", "name", "action", "stage"}  # never any material
    assert result.stderr.startswith("cluster dev in namespace slurm (context stub of ")  # the header stays off stdout


def test_status_exits_1_for_a_missing_or_degraded_cluster(stub, kubeconfig, up):
    n = object_count(KIND_DEV)
    missing = slurmk8s_run("status", KIND_DEV, "--kubeconfig", kubeconfig)
    assert one_line(missing, 1) == f"cluster dev does not exist: all {n + 3} objects are missing"
    up(KIND_DEV)
    healthy = slurmk8s_run("status", KIND_DEV, "--kubeconfig", kubeconfig)
    assert (healthy.returncode, healthy.stderr) == (0, "")
    sts = stub.store[("", "", f"{APPS}/statefulsets")]["dev-cpu"]
    sts["status"]["readyReplicas"] = 1
    degraded = slurmk8s_run("status", KIND_DEV, "--kubeconfig", kubeconfig, "-o", "json")
    assert degraded.returncode == 1
    doc = json.loads(degraded.stdout)
    problem = "StatefulSet/dev-cpu 1 of 0..4 running (2 asked), Slurm-managed"
    assert (doc["healthy"], doc["problems"]) == (False, [problem])
    assert degraded.stderr.splitlines() == [f"cluster dev in namespace slurm (context stub of {kubeconfig}, {stub.url})",
                                            f"cluster dev is not healthy: {problem}"]


def test_status_of_an_elastic_pool_resized_by_slurm_is_healthy(stub, kubeconfig, up):
    """Power saving scaled the pool to 0: desired is the live spec.replicas, not the profile's."""
    up(KIND_DEV)
    sts = stub.store[("", "", f"{APPS}/statefulsets")]["dev-cpu"]
    sts["spec"]["replicas"] = 0
    sts["status"].update(readyReplicas=0, updatedReplicas=0, availableReplicas=0)
    result = invoke("status", KIND_DEV, "--kubeconfig", kubeconfig, "-o", "yaml")
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert {"ref": "StatefulSet/dev-cpu", "kind": "StatefulSet", "name": "dev-cpu",
            "state": "0 of 0..4 running, Slurm-managed"} in doc["objects"]


def test_every_cluster_command_names_its_context(stub, kubeconfig, up):
    for args in (["up", "--no-wait"], ["diff"], ["status"], ["down", "--no-wait"]):
        run = slurmk8s_run(args[0], KIND_DEV, "--kubeconfig", kubeconfig, *args[1:])
        first = (run.stdout or run.stderr).splitlines()[0]
        assert first == f"cluster dev in namespace slurm (context stub of {kubeconfig}, {stub.url})", (args, first)


# ---------------------------------------------------------------- retries and timeouts

def test_429_is_retried_after_the_time_the_server_asks(stub, up):
    stub.fail(429, when=lambda r: r.method == "PATCH" and r.path.endswith("/statefulsets/dev-cpu"), message="slow down",
              reason="TooManyRequests", headers={"Retry-After": "1"}, times=2)
    plan, _ = up(KIND_DEV)
    attempts = stub.calls("PATCH", "/statefulsets/dev-cpu")
    assert [r.status for r in attempts] == [429, 429, 201]
    assert attempts[1].started - attempts[0].ended >= 0.95 and attempts[2].started - attempts[1].ended >= 0.95
    assert any(c.ref == "StatefulSet/dev-cpu" and c.action == "created" for c in plan.changes)


def test_503_in_the_middle_of_the_wait_is_retried(stub, up):
    stub.fail(503, when=lambda r: r.method == "GET" and r.path.endswith("/pods"), message="etcd leader changed",
              reason="ServiceUnavailable", times=2)
    _, lines = up(KIND_DEV, exec_fn=lambda command: "cpu-0|idle|none\ncpu-1|idle|none\n", timeout=60)
    assert "cluster dev is ready" in lines
    assert [r.status for r in stub.calls("GET", "/pods")][:3] == [503, 503, 200]


def test_the_wait_polls_through_failures_that_outlast_a_request(stub, kubeconfig):
    """Past one request's own retries, a temporary failure is one more reason to poll, until the deadline."""
    from slurmk8s.actions.render import render_file
    from slurmk8s.kube.client import Access, connect
    from slurmk8s.kube.wait import Waiter
    bundle = render_file(KIND_DEV)
    from slurmk8s.actions.secrets import secret_factory
    from slurmk8s.kube.apply import apply_bundle
    apply_bundle(connect(Access(kubeconfig)), bundle, secret_factory(bundle))
    stub.fail(503, when=lambda r: r.method == "GET" and "/statefulsets" in r.path, message="etcd leader changed",
              reason="ServiceUnavailable", times=2)
    lines: list[str] = []
    kube = connect(Access(kubeconfig), timeout=0.2)  # too short for even one backoff: the request gives up
    Waiter(kube, bundle, None, timeout=60, interval=0.01, progress=lines.append).wait()
    assert lines[0].startswith("api: list statefulsets: HTTP 503 ServiceUnavailable: etcd leader changed (gave up "
                               "after 1 attempt(s)") and lines[0].endswith("; polling again")
    assert lines[-1].startswith("pods ready: ")


def test_a_retry_after_beyond_the_timeout_fails_at_once(stub, kubeconfig):
    stub.fail(429, when=lambda r: r.method == "GET", message="slow down", reason="TooManyRequests",
              headers={"Retry-After": "300"})
    started = time.monotonic()
    line = one_line(slurmk8s_run("status", KIND_DEV, "--kubeconfig", kubeconfig, "--timeout", "20s"), 1)
    assert time.monotonic() - started < 15
    assert ": HTTP 429 TooManyRequests: slow down (gave up after 1 attempt(s) in 0 s; the server asked to retry " \
           "after 300 s, beyond --timeout)" in line


@pytest.fixture
def blackhole(tmp_path):
    """A kubeconfig for a server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "hole",
              "clusters": [{"name": "hole", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "hole", "context": {"cluster": "hole", "user": "u"}}]}
    path = tmp_path / "blackhole"
    path.write_text(yaml.safe_dump(config))
    yield str(path)
    stop.set()
    thread.join()
    for s in held + [listener]:
        s.close()


@pytest.mark.parametrize("command", [["up", "--no-wait"], ["diff"], ["status"], ["down", "--no-wait"]],
                         ids=lambda c: c[0])
def test_a_server_that_never_answers_is_given_up_on_at_the_timeout(blackhole, command):
    """It blocked up/down/diff for 120 s whatever --timeout said. `up` runs as a whole process: a request
    left blocked in a thread must not hold the interpreter's exit either."""
    run = slurmk8s_process if command[0] == "up" else slurmk8s_run
    started = time.monotonic()
    line = one_line(run(command[0], KIND_DEV, "--kubeconfig", blackhole, "--timeout", "1", *command[1:],
                                 timeout=60), 3 if command[0] == "diff" else 1)
    assert time.monotonic() - started < 20
    assert "timed out" in line


@pytest.mark.parametrize("value, problem", [
    ("nan", "'nan' must be a positive, finite duration such as 90s or 5m"),
    ("-1", "'-1' must be a positive, finite duration such as 90s or 5m"),
    ("0s", "'0s' must be a positive, finite duration such as 90s or 5m"),
    ("5 minutes", "'5 minutes' is not a duration; use e.g. 90s, 5m, 1h30m or seconds"),
], ids=["nan", "negative", "zero", "words"])
def test_timeout_refuses_what_is_not_a_duration(value, problem):
    run = slurmk8s_run("up", KIND_DEV, "--timeout", value)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert problem in run.stderr and "--timeout" in run.stderr


def test_timeout_accepts_durations():
    from slurmk8s.cli_cluster import parse_duration
    assert [parse_duration(v) for v in ("5m", "90s", "1h30m", "500ms", "2.5", 7)] == [300, 90, 5400, 0.5, 2.5, 7]


# ---------------------------------------------------------------- kubeconfig, kubectl's way

def test_kubeconfig_list_takes_the_first_current_context(stub, tmp_path):
    """kubectl: the first file that sets current-context wins; the Python client took the last."""
    first = stub.write_kubeconfig(tmp_path / "a", token="token-a")
    data = yaml.safe_load(first.read_text())
    data["current-context"] = "other"
    first.write_text(yaml.safe_dump(data))
    second = stub.write_kubeconfig(tmp_path / "b", token="token-b")
    run = slurmk8s_run("up", KIND_DEV, "--no-wait", env_extra={"KUBECONFIG": f"{first}:{tmp_path / 'missing'}:{second}"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == (f"cluster dev in namespace slurm (context other of "
                                          f"{first}:{tmp_path / 'missing'}:{second}, {stub.url})")
    assert {r.authorization for r in stub.requests} == {"Bearer other-token"}


@pytest.mark.parametrize("content, problem", [
    ("{{{ not yaml", "not YAML at line 1: "),
    ("- a\n- b\n", "not a kubeconfig (expected a mapping, found a list)"),
    (b"\xff\xfe", "not a kubeconfig (not UTF-8 text)"),
    (None, "is a directory, not a kubeconfig file"),
    ("current-context: 5\ncontexts: 7\n", "malformed kubeconfig (TypeError: 'int' object is not iterable)"),
], ids=["not-yaml", "a-list", "binary", "a-directory", "wrong-shape"])
def test_a_broken_kubeconfig_is_one_line(tmp_path, content, problem):
    path = tmp_path / "kc"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    line = one_line(slurmk8s_run("status", KIND_DEV, "--kubeconfig", str(path)), 1)
    assert problem in line and (str(path) in line)


# ---------------------------------------------------------------- malformed replies

def test_a_conflict_with_malformed_details_is_one_line(stub, kubeconfig):
    stub.reply(409, {"kind": "Status", "reason": "Conflict", "message": "conflict", "details": ["x"]},
               when=lambda r: r.method == "PATCH")
    assert one_line(slurmk8s_run("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait"), 1) == \
        "apply Namespace/slurm: HTTP 409 Conflict: conflict"
    stub.failures.clear()
    stub.reply(409, {"kind": "Status", "reason": "Conflict", "message": "conflict", "details": {"causes": ["a", 1]}},
               when=lambda r: r.method == "PATCH")
    assert one_line(slurmk8s_run("up", KIND_DEV, "--kubeconfig", kubeconfig, "--no-wait"), 1) == \
        "apply Namespace/slurm: HTTP 409 Conflict: conflict"


@pytest.mark.parametrize("body", [{"items": [{"kind": "Pod"}]}, {"items": "abc"}, [1, 2]],
                         ids=["item-without-metadata", "items-not-a-list", "a-list"])
def test_a_list_reply_without_object_names_is_one_line(stub, kubeconfig, body):
    stub.reply(200, body, when=lambda r: r.method == "GET" and r.path.endswith("/statefulsets"))
    line = one_line(slurmk8s_run("status", KIND_DEV, "--kubeconfig", kubeconfig), 1)
    assert "malformed reply from the Kubernetes API" in line or "unexpected reply" in line
