"""Job defaults derived from the pools: memory per CPU/GPU, memlock with RDMA, NCCL via TaskProlog, GPU spread."""

from __future__ import annotations

import subprocess
from pathlib import Path

from slurmk8s import naming
from slurmk8s.profile import load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]


def bundle(path: str = "profiles/gpu-ib.yaml", edit=lambda text: text):
    return render(load_profile(edit((ROOT / path).read_text()).encode()))


def partition_lines(b) -> dict[str, str]:
    return {line.split()[0].split("=")[1]: line for line in b.files["slurm.conf"].splitlines()
            if line.startswith("PartitionName=")}


def test_memory_per_cpu_and_per_gpu_come_from_the_smallest_pool_share() -> None:
    # a100: 900Gi - 2048 MiB kept, over 4 GPUs; h100: 1800Gi - 2048 over 8: the a100 share is smaller
    assert partition_lines(bundle())["gpu"].endswith(f" DefMemPerGPU={(900 * 1024 - 2048) // 4}")
    assert partition_lines(bundle())["h100"].endswith(f" DefMemPerGPU={(1800 * 1024 - 2048) // 8}")
    # kind-dev: 1 CPU, 1Gi - 256 MiB kept
    assert partition_lines(bundle("profiles/kind-dev.yaml"))["debug"].endswith(" DefMemPerCPU=768")


def test_a_profile_value_wins() -> None:
    b = bundle(edit=lambda t: t.replace("config: {PriorityTier: 2}", "config: {PriorityTier: 2, DefMemPerCPU: 1000}"))
    assert "DefMemPerGPU" not in partition_lines(b)["h100"] and "DefMemPerCPU=1000" in partition_lines(b)["h100"]
    b = bundle(edit=lambda t: t.replace('    version: "26.05"\n', '    version: "26.05"\n    config: {TaskProlog: /opt/p.sh}\n'))
    assert "TaskProlog=/opt/p.sh" in b.files["slurm.conf"] and "task_prolog.sh" not in b.files


def test_rdma_profiles_propagate_no_memlock_limit_and_give_tasks_nccl() -> None:
    conf = bundle().files["slurm.conf"]
    assert "\nPropagateResourceLimitsExcept=MEMLOCK\n" in conf
    assert "\nTaskProlog=/etc/slurm/task_prolog.sh\n" in conf
    plain = bundle("profiles/kind-dev.yaml")
    assert "PropagateResourceLimits" not in plain.files["slurm.conf"] and "task_prolog.sh" not in plain.files


def test_the_task_prolog_exports_nccl_on_rdma_nodes_only() -> None:
    script = bundle().files["task_prolog.sh"]

    def exports(node: str) -> list[str]:
        return subprocess.run(["sh", "-c", script], env={"SLURMD_NODENAME": node}, capture_output=True, text=True,
                              check=True, timeout=10).stdout.splitlines()
    assert exports("h100-12") == ["export NCCL_IB_DISABLE=0", "export NCCL_SOCKET_IFNAME=eth0"]
    assert exports("a100-0") == exports("h100-12")
    assert exports("cpu-0") == []


def test_the_init_container_installs_the_task_prolog_executable() -> None:
    pod = bundle().find("StatefulSet", "research-h100")["spec"]["template"]["spec"]
    assert "install -m 0755 /mnt/slurm-config/task_prolog.sh /etc/slurm/task_prolog.sh" in \
        pod["initContainers"][0]["command"][-1]


def test_gpu_pods_of_a_cluster_never_share_a_kubernetes_node() -> None:
    b = bundle()
    for sts in ("research-h100", "research-a100"):
        terms = b.find("StatefulSet", sts)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms == [{"labelSelector": {
            "matchLabels": {"app.kubernetes.io/instance": "research", "app.kubernetes.io/component": "worker"},
            "matchExpressions": [{"key": "slurmk8s.io/pool", "operator": "In", "values": ["a100", "h100"]}]},
            "topologyKey": "kubernetes.io/hostname"}]
    off = bundle(edit=lambda t: t.replace("gpus: {count: 4, type: a100}", "gpus: {count: 4, type: a100, onePodPerNode: false}"))
    assert "podAntiAffinity" not in off.find("StatefulSet", "research-a100")["spec"]["template"]["spec"].get("affinity", {})
    terms = off.find("StatefulSet", "research-h100")["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert terms["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchExpressions"][0]["values"] == ["h100"]
    assert "affinity" not in bundle("profiles/kind-dev.yaml").find("StatefulSet", "dev-cpu")["spec"]["template"]["spec"] \
        or "podAntiAffinity" not in bundle("profiles/kind-dev.yaml").find("StatefulSet", "dev-cpu")["spec"]["template"]["spec"]["affinity"]


EXTRA = '''\
    extraFiles:
      plugstack.conf: "required /usr/lib/slurm/spank_x.so\\n"
      prolog.sh: |
        #!/bin/sh
        exit 0
    config: {Prolog: /etc/slurm/prolog.sh}
'''


def test_extra_slurm_files_reach_etc_slurm_scripts_executable() -> None:
    b = bundle("profiles/kind-dev.yaml", lambda t: t.replace('    version: "26.05"\n', '    version: "26.05"\n' + EXTRA))
    data = b.find("ConfigMap", "dev-slurm-config")["data"]
    assert data["plugstack.conf"] == "required /usr/lib/slurm/spank_x.so\n"
    assert data["prolog.sh"] == "#!/bin/sh\nexit 0\n"
    assert "\nProlog=/etc/slurm/prolog.sh\n" in data["slurm.conf"]
    script = b.find("StatefulSet", "dev-cpu")["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
    # configless slurmd: Slurm's files come from slurmctld (docs/day2.md), the profile's own are copied
    assert "cp /mnt/slurm-config/plugstack.conf /etc/slurm/plugstack.conf" in script
    assert "install -m 0755 /mnt/slurm-config/prolog.sh /etc/slurm/prolog.sh" in script


def test_an_extra_file_may_not_replace_a_generated_one() -> None:
    import pytest
    from slurmk8s.errors import ProfileError
    with pytest.raises(ProfileError) as info:
        bundle("profiles/kind-dev.yaml", lambda t: t.replace('    version: "26.05"\n',
                                                             '    version: "26.05"\n    extraFiles: {gres.conf: x}\n'))
    assert str(info.value).splitlines() == [
        "<profile>:11:18: spec.slurm.extraFiles.gres.conf: gres.conf is written by the generator; it cannot be replaced here"]


PODS = '''\
  pods:
    imagePullSecrets: [regcred]
    priorityClassName: slurm-daemons
    labels: {team: hpc}
    annotations: {example.org/scrape: "true"}
'''


def test_pod_settings_reach_every_workload_and_leave_our_labels_alone() -> None:
    b = bundle("profiles/gpu-ib.yaml", lambda t: t.replace("  restapi:\n", PODS + "  restapi:\n"))
    workloads = [o for o in b.objects + b.hooks if o["kind"] in naming.POD_TEMPLATE_KINDS]
    assert {o["metadata"]["name"] for o in workloads} >= {"research-controller", "research-mariadb", "research-h100",
                                                          "research-login", "research-restapi"}
    assert [o["kind"] for o in b.hooks if o["kind"] == "Job"] == ["Job"] * 3  # the upgrade check, the account tree, the rollout
    for o in workloads:
        template = o["spec"]["template"]
        assert template["spec"]["imagePullSecrets"] == [{"name": "regcred"}], o["metadata"]["name"]
        assert template["spec"]["priorityClassName"] == "slurm-daemons"
        assert template["metadata"]["labels"]["team"] == "hpc"
        assert template["metadata"]["labels"]["app.kubernetes.io/instance"] == "research"
        assert template["metadata"]["annotations"]["example.org/scrape"] == "true"
    assert "imagePullSecrets" not in str(bundle("profiles/gpu-ib.yaml").objects)


def test_a_label_under_our_prefix_is_refused() -> None:
    import pytest
    from slurmk8s.errors import ProfileError
    with pytest.raises(ProfileError) as info:
        bundle("profiles/kind-dev.yaml", lambda t: t + "  pods: {labels: {slurmk8s.io/pool: x}}\n")
    assert str(info.value).splitlines() == [
        "<profile>:31:19: spec.pods.labels.slurmk8s.io/pool: 'slurmk8s.io/pool' is the generator's (its selectors "
        "and tools read app.kubernetes.io/, slurmk8s.io/ keys)"]


def test_a_4_gpu_pool_hands_out_exactly_the_4_devices_its_pod_is_given() -> None:
    # gpu-ib's a100 pool takes 4 GPUs (an 8-GPU node type, say): gres.conf names nvidia0..3 and
    # nothing above, the node offers 4, and the pod asks Kubernetes for 4.
    b = bundle()
    gres = {line.split()[0]: line.split() for line in b.files["gres.conf"].splitlines() if line.startswith("NodeName=")}
    (line,) = [words for node, words in gres.items() if node.startswith("NodeName=a100-")]
    assert "AutoDetect=off" in b.files["gres.conf"].splitlines()
    assert [w for w in line if w.startswith("File=")] == ["File=/dev/nvidia[0-3]"]
    assert " Gres=gpu:a100:4 " in next(l for l in b.files["slurm.conf"].splitlines() if l.startswith("NodeName=a100-")) + " "
    limits = b.find("StatefulSet", "research-a100")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "4"
