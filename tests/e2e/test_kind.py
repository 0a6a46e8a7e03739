"""End to end on a real Kubernetes: kind on podman (kind-configs/dev.yaml, 1 control plane and
3 labelled workers), with the Slurm images built here.

The tests of one profile run in file order against one deployment: up, jobs, ssh, a burst
through the real ResumeProgram, a second up, down. Then the topology profile and the REST API
profile take the same cluster in turn. `python -m pytest tests/e2e -v` (docs/kind-e2e.md).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import (
    NAMESPACE, REPO, Cluster, job_state, kind_cluster, local_profile, new_ssh_key, port_forward, run, sinfo_states,
    wait_for_job, wait_until,
)

pytestmark = pytest.mark.e2e

DEV_LOGIN, LOGIN_CONTAINER = "dev-login-0", "sshd"


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    with kind_cluster("slurmk8s-e2e", REPO / "kind-configs" / "dev.yaml") as c:
        yield c


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory) -> Path:
    return new_ssh_key(tmp_path_factory.mktemp("ssh"))


@pytest.fixture(scope="module")
def dev_profile(tmp_path_factory, ssh_key: Path) -> Path:
    def authorize(profile: dict) -> None:
        profile["spec"]["login"]["authorizedKeys"] = [ssh_key.with_suffix(".pub").read_text().strip()]
    return local_profile(REPO / "profiles" / "kind-dev.yaml", tmp_path_factory.mktemp("dev") / "kind-dev.yaml",
                         authorize)


@pytest.fixture(scope="class")
def dev(cluster: Cluster, dev_profile: Path) -> Cluster:
    """kind-dev applied once for the tests that follow."""
    up = cluster.slurmk8s("up", str(dev_profile), "--timeout", "900")
    assert "cluster dev is ready" in up.stdout
    return cluster


def login(cluster: Cluster, *command: str, check: bool = True) -> str:
    return cluster.exec(DEV_LOGIN, LOGIN_CONTAINER, *command, check=check).stdout


class TestKindDev:
    """profiles/kind-dev.yaml: one deployment through every step, in order, ending with down."""

    def test_up_registers_every_running_node(self, dev: Cluster) -> None:
        states = sinfo_states(dev, DEV_LOGIN, LOGIN_CONTAINER)
        # 2 of 0..4 run: those two idle and registered, the other two powered down (CLOUD, no pod)
        assert states == {"cpu-0": "idle", "cpu-1": "idle", "cpu-2": "idle~", "cpu-3": "idle~"}
        pods = dev.jsonpath("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/instance=dev,slurmk8s.io/pool=cpu",
                            path="{.items[*].metadata.name}").split()
        assert sorted(pods) == ["dev-cpu-0", "dev-cpu-1"]


    def test_batch_job_over_two_nodes_completes(self, dev: Cluster) -> None:
        job = login(dev, "sbatch", "--parsable", "-N2", "-w", "cpu-[0-1]", "--wrap", "srun hostname").strip()
        assert job.isdigit(), job
        assert wait_for_job(dev, DEV_LOGIN, LOGIN_CONTAINER, job, timeout=300) == "COMPLETED"
        steps = login(dev, "sacct", "-j", job, "-n", "-P", "-o", "JobName,NodeList,State")
        assert "hostname|cpu-[0-1]|COMPLETED" in steps


    def test_ssh_into_the_login_service_with_the_profiles_key(self, dev: Cluster, ssh_key: Path) -> None:
        with port_forward(dev, "svc/dev-login", 22) as port:
            result = run("ssh", "-i", str(ssh_key), "-p", str(port), "-o", "BatchMode=yes",
                         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                         "-o", "ConnectTimeout=20", "root@127.0.0.1", "sinfo -h -o '%P %D %t'", timeout=60)
        assert "debug* 2 idle" in result.stdout


    def test_a_bigger_job_resumes_the_elastic_pool_through_the_api(self, dev: Cluster) -> None:
        """3 nodes wanted, 2 running: slurmctld's ResumeProgram scales the StatefulSet with the pod's
        own service-account token and RBAC, the new pod registers, the job completes."""
        job = login(dev, "sbatch", "--parsable", "-N3", "--wrap", "srun hostname").strip()
        assert wait_for_job(dev, DEV_LOGIN, LOGIN_CONTAINER, job, timeout=600) == "COMPLETED"
        assert login(dev, "sacct", "-j", job, "-X", "-n", "-P", "-o", "NodeList").strip() == "cpu-[0-2]"
        replicas = dev.jsonpath("-n", NAMESPACE, "get", "statefulset", "dev-cpu", path="{.spec.replicas}")
        assert replicas == "3"
        listed = login(dev, "sacct", "-n", "-X", "-P", "-o", "JobID,State")
        assert f"{job}|COMPLETED" in listed.split()


    def test_a_second_up_changes_nothing(self, dev: Cluster, dev_profile: Path) -> None:
        again = dev.slurmk8s("up", str(dev_profile), "--timeout", "300")
        assert any(line.startswith("no changes:") for line in again.stdout.splitlines()), again.stdout


    def test_a_running_job_survives_an_eviction_attempt_and_a_pod_spec_rollout(self, dev: Cluster, dev_profile: Path,
                                                                             tmp_path: Path) -> None:
        """A 90 s job on cpu-0: its pod is marked busy, `kubectl drain` cannot evict it, and `up` after a pod-spec
        change drains cpu-0, waits for the job to COMPLETE, and only then replaces the pod."""
        job = login(dev, "sbatch", "--parsable", "-w", "cpu-0", "--wrap", "sleep 90").strip()
        wait_until(lambda: job_state(dev, DEV_LOGIN, LOGIN_CONTAINER, job) == "RUNNING" or None, 120, f"job {job} to run")
        wait_until(lambda: dev.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0",
                                        path="{.metadata.labels.slurmk8s\\.io/busy}") == "true" or None,
                   60, "dev-cpu-0 to be marked busy")
        uid = dev.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0", path="{.metadata.uid}")
        node = dev.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0", path="{.spec.nodeName}")
        drain = dev.kubectl("drain", node, "--pod-selector=statefulset.kubernetes.io/pod-name=dev-cpu-0",
                            "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s", check=False)
        dev.kubectl("uncordon", node)
        assert drain.returncode != 0 and "disruption budget" in drain.stderr, drain.stderr
        assert job_state(dev, DEV_LOGIN, LOGIN_CONTAINER, job) == "RUNNING"

        def pod_spec_change(profile: dict) -> None:
            profile["spec"]["pools"][0]["nodeSelector"] = {"kubernetes.io/os": "linux"}
        changed = local_profile(dev_profile, tmp_path / "kind-dev.yaml", pod_spec_change)
        up = dev.slurmk8s("up", str(changed), "--timeout", "900")
        assert "rollout: done" in up.stderr + up.stdout, up.stderr
        assert job_state(dev, DEV_LOGIN, LOGIN_CONTAINER, job) == "COMPLETED"
        ended = login(dev, "sacct", "-j", job, "-X", "-n", "-P", "-o", "End").strip()
        assert dev.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0", path="{.metadata.uid}") != uid
        created = dev.jsonpath("-n", NAMESPACE, "get", "pod", "dev-cpu-0", path="{.metadata.creationTimestamp}")
        assert created.replace("Z", "") >= ended, (created, ended)  # replaced only after the job ended (both UTC)
        states = sinfo_states(dev, DEV_LOGIN, LOGIN_CONTAINER)
        assert not states["cpu-0"].startswith("drain"), states  # resumed (power saving may have suspended it since)

    def test_down_keeps_claims_and_secrets_and_delete_data_leaves_nothing(self, dev: Cluster, dev_profile: Path) -> None:
        dev.slurmk8s("down", str(dev_profile))
        selector = "app.kubernetes.io/instance=dev"

        def left(kinds: str) -> list[str]:
            return dev.kubectl("-n", NAMESPACE, "get", kinds, "-l", selector, "-o", "name").stdout.split()

        wait_until(lambda: left("pods") == [] or None, 300, "the dev pods to go")
        # only the ApplySet parent stays: it lists the claims and Secrets that stay (kube/applyset.py)
        assert left("statefulsets,services,configmaps") == ["configmap/dev-applyset"]
        kept = left("pvc,secrets")
        assert {"persistentvolumeclaim/statesave-dev-controller-0", "persistentvolumeclaim/data-dev-mariadb-0",
                "secret/dev-auth-key", "secret/dev-db-password"} <= set(kept), kept

        dev.slurmk8s("down", str(dev_profile), "--delete-data", "--yes")
        wait_until(lambda: left("pvc,secrets,pods") == [] or None, 300, "the dev claims and secrets to go")
        everything = dev.kubectl("-n", NAMESPACE, "get", "all,pvc,secrets,configmaps,roles,rolebindings,"
                                 "serviceaccounts,networkpolicies,poddisruptionbudgets", "-o", "name").stdout.split()
        assert [name for name in everything if name.split("/", 1)[1].startswith("dev-")] == []


# ---------------------------------------------------------------- topology, on the same cluster

TOPO_LOGIN = "topo-login-0"


@pytest.fixture(scope="class")
def topo(cluster: Cluster, tmp_path_factory) -> tuple[Cluster, Path]:
    """profiles/kind-topology.yaml applied after kind-dev is gone (the workers have 2 CPUs each)."""
    profile = local_profile(REPO / "profiles" / "kind-topology.yaml", tmp_path_factory.mktemp("topo") / "topo.yaml")
    up = cluster.slurmk8s("up", str(profile), "--timeout", "900")
    assert "cluster topo is ready" in up.stdout
    yield cluster, profile
    cluster.slurmk8s("down", str(profile), "--delete-data", "--yes", check=False)


class TestKindTopology:
    """profiles/kind-topology.yaml on the labelled workers."""

    def test_discover_reads_the_sub_blocks_of_the_kind_workers(self, cluster: Cluster) -> None:
        discovered = cluster.slurmk8s("topology", "discover", "--labels", "gke", "--pool", "cpu").stdout
        for leaf in ("subblock-a1", "subblock-a2", "subblock-b1"):
            assert f"name: {leaf}" in discovered, discovered


    def test_each_leaf_runs_on_the_nodes_of_its_domain(self, topo) -> None:
        cluster, _ = topo
        rows = cluster.jsonpath("-n", NAMESPACE, "get", "pods", "-l",
                                "app.kubernetes.io/instance=topo,app.kubernetes.io/component=worker",
                                path='{range .items[*]}{.metadata.labels.slurmk8s\\.io/topology-domain} '
                                     '{.spec.nodeName}{"\\n"}{end}')
        placed = [line.split() for line in rows.strip().splitlines()]
        assert sorted(leaf for leaf, _ in placed) == ["subblock-a1", "subblock-a1", "subblock-a2", "subblock-b1"]
        for leaf, node in placed:
            label = cluster.jsonpath("get", "node", node,
                                     path="{.metadata.labels.cloud\\.google\\.com/gce-topology-subblock}").strip()
            assert label == leaf, (leaf, node, label)


    def test_slurm_topology_equals_the_rendered_file(self, topo) -> None:
        """`scontrol show topology` lists exactly the switches and nodes of the rendered topology.yaml."""
        cluster, profile = topo
        rendered = run(sys.executable, "-m", "slurmk8s.cli", "render", str(profile), "-o", "-", env=None).stdout
        switches = {}
        for doc in yaml.safe_load_all(rendered):
            if doc and doc.get("kind") == "ConfigMap" and "topology.yaml" in doc.get("data", {}):
                for sw in yaml.safe_load(doc["data"]["topology.yaml"])[0]["tree"]["switches"]:
                    switches[sw["switch"]] = sw.get("nodes") or sw.get("children")
        assert switches, "no topology.yaml in the rendered ConfigMap"
        shown = cluster.exec(TOPO_LOGIN, LOGIN_CONTAINER, "scontrol", "show", "topology").stdout
        live = {}
        for line in shown.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "SwitchName" in fields:
                live[fields["SwitchName"]] = fields.get("Switches") or fields.get("Nodes")  # inner switches list both
        assert live == switches


    def test_a_one_switch_job_stays_inside_one_leaf(self, topo) -> None:
        cluster, _ = topo
        out = cluster.exec(TOPO_LOGIN, LOGIN_CONTAINER, "srun", "-N2", "--switches=1", "hostname", timeout=300).stdout
        assert sorted(out.split()) == ["topo-cpu-subblock-a1-0", "topo-cpu-subblock-a1-1"]  # the only 2-node leaf


# ---------------------------------------------------------------- slurmrestd, on the same cluster

def gpu_less_research(profile: dict) -> None:
    """gpu-ib without what kind lacks: GPUs, RDMA, Multus, KEDA, the prometheus-operator's CRDs, an RWX class,
    a LoadBalancer (its metrics Service stays)."""
    spec = profile["spec"]
    spec["controller"] = {"replicas": 1, "storage": {"size": "1Gi"}}
    spec.pop("volumes", None)  # its /home claim asks for an RWX class kind lacks
    spec["accounting"]["database"]["embedded"] = {"storage": "1Gi", "backup": {"storage": "1Gi", "keep": 2}}
    spec["login"] = {"replicas": 1}
    spec["metrics"]["monitor"] = "none"
    for pool in spec["pools"]:
        for key in ("gpus", "rdma", "keda", "nodeSelector", "tolerations", "healthChecks"):
            pool.pop(key, None)
        pool.update(cpus=1, memory="1Gi", replicas=1, minReplicas=1 if pool["name"] == "a100" else 0, maxReplicas=2)
        pool["features"] = [f for f in pool.get("features", []) if f != "ib"]
    for qos in spec["scheduling"]["qos"]:  # no GPUs, so no GPU limits (validate refuses them)
        for tres in qos.get("limits", {}).values():
            if isinstance(tres, dict):
                tres.pop("gpu", None)
        qos["limits"] = {k: v for k, v in qos.get("limits", {}).items() if v}


@pytest.fixture(scope="class")
def research_profile(tmp_path_factory) -> Path:
    return local_profile(REPO / "profiles" / "gpu-ib.yaml", tmp_path_factory.mktemp("research") / "research.yaml",
                         gpu_less_research)


@pytest.fixture(scope="class")
def research(cluster: Cluster, research_profile: Path) -> Cluster:
    profile = research_profile
    up = cluster.slurmk8s("up", str(profile), "--timeout", "900")
    assert "cluster research is ready" in up.stdout
    yield cluster
    cluster.slurmk8s("down", str(profile), "--delete-data", "--yes", check=False)


REST_PING = """
import json, re, sys, urllib.error, urllib.request
base, token = "http://research-restapi:6820", sys.argv[1]
user = sys.argv[2] if len(sys.argv) > 2 else "root"
headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token}
def get(path):
    with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=30) as r:
        return json.load(r)
try:
    paths = get("/openapi/v3")["paths"]
    ping = sorted(p for p in paths if re.fullmatch(r"/slurm/v0\\.0\\.\\d+/ping/", p))[-1]
    print(json.dumps(get(ping)))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code}))
"""


METRICS_SCRAPE = """
import sys, urllib.request
with urllib.request.urlopen("http://research-metrics:6817" + sys.argv[1], timeout=30) as r:
    print(r.status)
    print(r.read().decode())
"""


class TestRestApi:
    """A GPU-less copy of profiles/gpu-ib.yaml with slurmrestd (and Slurm's own metrics)."""

    def test_the_metrics_service_answers_inside_the_cluster(self, research: Cluster) -> None:
        """slurmctld's OpenMetrics through the rendered ClusterIP Service, from the login pod."""
        for path in ("/metrics/partitions", "/metrics/nodes", "/metrics/jobs", "/metrics/scheduler"):
            out = research.kubectl("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--",
                                   "python3", "-c", METRICS_SCRAPE, path).stdout
            assert out.startswith("200\n"), (path, out[:300])
            assert "# TYPE slurm_" in out, (path, out[:300])
        partitions = research.kubectl("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--",
                                      "python3", "-c", METRICS_SCRAPE, "/metrics/partitions").stdout
        assert 'slurm_partition_jobs_pending{partition="h100"}' in partitions, partitions[:2000]

    def test_slurmdbd_serves_the_cluster_with_the_jwt_key(self, research: Cluster) -> None:
        clusters = research.kubectl("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--",
                                    "sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster").stdout
        assert clusters.split() == ["research"]


    def test_slurmrestd_answers_a_jwt_authenticated_ping(self, research: Cluster) -> None:
        def login_hpc(*command: str) -> str:
            return research.kubectl("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--",
                                    *command).stdout
        token = login_hpc("scontrol", "token", "username=root", "lifespan=600").strip()
        assert token.startswith("SLURM_JWT="), token
        reply = json.loads(login_hpc("python3", "-c", REST_PING, token.split("=", 1)[1]))
        assert reply.get("errors") == [], reply
        assert [(p["hostname"], p["responding"]) for p in reply["pings"]] == [("research-controller-0", True)], reply

    def test_slurmk8s_token_mints_a_token_of_that_user_alone(self, research: Cluster, research_profile: Path) -> None:
        """`slurmk8s token` asks slurmctld; slurmrestd takes the token as ada and refuses it for anyone else."""
        out = research.slurmk8s("token", str(research_profile), "ada", "--lifespan", "10m").stdout
        assert out.startswith("SLURM_JWT=") and out.count("\n") == 1, out
        token = out.strip().split("=", 1)[1]
        as_ada = json.loads(self.login(research, "python3", "-c", REST_PING, token, "ada"))
        assert as_ada.get("errors") == [] and as_ada["pings"][0]["responding"], as_ada
        # As another user slurmrestd still answers, and slurmctld refuses the RPC (seen on 26.05: a ping of
        # responding false, status "Protocol authentication error").
        as_max = json.loads(self.login(research, "python3", "-c", REST_PING, token, "max"))
        assert not as_max["pings"][0]["responding"], as_max
        assert "authentication" in as_max["pings"][0]["status"].lower(), as_max

    def test_the_token_secret_is_filled_on_apply_and_refilled_by_the_cronjob(self, research: Cluster) -> None:
        """spec.restapi.tokens: the Job named by its content fills research-token-ada; a run of the CronJob
        replaces the token with a fresh one that slurmrestd takes as ada."""
        def secret() -> dict[str, str]:
            found = json.loads(research.kubectl("-n", "hpc", "get", "secret", "research-token-ada", "-o", "json").stdout)
            return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}
        first = wait_until(lambda: (s := secret()).get("token") and s, 600, "the tokens Job to fill research-token-ada")
        assert first["user"] == "ada" and first["expires"].endswith("Z")
        schedule = research.jsonpath("-n", "hpc", "get", "cronjob", "research-tokens", path="{.spec.schedule}")
        assert schedule == "*/30 * * * *"  # ada's lifespan is 2 h: a refresh every 30 min
        research.kubectl("-n", "hpc", "create", "job", "--from=cronjob/research-tokens", "research-tokens-by-hand")
        research.kubectl("-n", "hpc", "wait", "--for=condition=complete", "job/research-tokens-by-hand", "--timeout=300s",
                         timeout=330)
        second = secret()
        assert second["token"] != first["token"] and second["expires"] >= first["expires"]
        reply = json.loads(self.login(research, "python3", "-c", REST_PING, second["token"], "ada"))
        assert reply.get("errors") == [] and reply["pings"][0]["responding"], reply

    def test_a_dump_restores_the_accounting_database_after_it_is_dropped(self, research: Cluster) -> None:
        """spec.accounting.database.embedded.backup, and docs/day2.md's restore, step by step (last in the class:
        it stops slurmdbd for a while)."""
        job = self.login(research, "runuser", "-u", "ada", "--", "sbatch", "--parsable", "-A", "physics",
                         "--chdir=/tmp", "-o", "/dev/null", "--wrap", "true").strip().split(";")[0]
        sacct = ("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--",
                 "sacct", "-j", job, "-X", "-n", "-P", "-o", "User,State")

        def recorded() -> bool:  # sacct fails while slurmdbd is away: not yet
            return research.kubectl(*sacct, check=False).stdout.strip() == "ada|COMPLETED"
        wait_until(recorded, 300, f"job {job} in sacct")
        ns = ("-n", "hpc")
        research.kubectl(*ns, "create", "job", "--from=cronjob/research-db-backup", "db-backup-by-hand")
        research.kubectl(*ns, "wait", "--for=condition=complete", "job/db-backup-by-hand", "--timeout=300s", timeout=330)
        assert "db-backup: wrote slurm_acct_db-" in research.kubectl(*ns, "logs", "job/db-backup-by-hand").stdout
        password = base64.b64decode(research.jsonpath(*ns, "get", "secret", "research-db-password",
                                                      path="{.data.password}")).decode()
        sql = ("exec", "research-mariadb-0", "-c", "mariadb", "--", "mariadb", "--no-defaults", "--protocol=tcp",
               "-h127.0.0.1", "-uslurm", f"-p{password}", "-N", "-e")
        research.kubectl(*ns, "scale", "statefulset", "research-accounting", "--replicas=0")
        research.kubectl(*ns, "wait", "--for=delete", "pod/research-accounting-0", "--timeout=120s", timeout=150)
        research.kubectl(*ns, *sql, "DROP DATABASE slurm_acct_db")
        assert "slurm_acct_db" not in research.kubectl(*ns, *sql, "SHOW DATABASES").stdout.split()
        research.kubectl(*ns, "create", "job", "--from=cronjob/research-db-restore", "db-restore-by-hand")
        research.kubectl(*ns, "wait", "--for=condition=complete", "job/db-restore-by-hand", "--timeout=300s", timeout=330)
        research.kubectl(*ns, "scale", "statefulset", "research-accounting", "--replicas=1")
        research.kubectl(*ns, "rollout", "status", "statefulset/research-accounting", "--timeout=300s", timeout=330)
        wait_until(recorded, 300, f"job {job} in sacct again")
        accounts = self.login(research, "sacctmgr", "-n", "-P", "show", "account", "format=Account").split()
        assert {"physics", "lattice", "ml"} <= set(accounts), accounts

    @staticmethod
    def login(research: Cluster, *command: str) -> str:
        return research.kubectl("-n", "hpc", "exec", "research-login-0", "-c", LOGIN_CONTAINER, "--", *command).stdout
