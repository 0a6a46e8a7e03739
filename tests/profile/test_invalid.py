"""Invalid profiles: each reports exactly the expected `FILE:LINE:COL: path: message` lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.errors import ProfileError
from inprocess import run_cli
from profile_texts import BASE

GPU_POOL = """\
    - name: gpu
      replicas: 1
      cpus: 2
      memory: 2Gi
"""


SIDE_BY_SIDE = """\
  sideBySide:
    partition: shared
    mode: host
    shapes:
      - name: dgx
        nodes: [dgx-01, dgx-02]
        cpus: '0-63'
        numa: ['0-31', '32-63']
        memory: 64Gi
        gpus: [0, 1, 2, 3]
        system: {cpus: '0-3', memory: 4Gi}
        slurm: {cpus: '4-31', memory: 32Gi, gpus: [0, 1]}
"""


def sbs(old: str = "", new: str = "") -> str:
    """BASE plus a valid sideBySide section, with one exact substring of that section replaced."""
    assert old in SIDE_BY_SIDE
    return BASE + (SIDE_BY_SIDE.replace(old, new, 1) if old else SIDE_BY_SIDE)


SCHED = BASE + "  scheduling:\n"


def edit(old: str, new: str) -> str:
    """BASE with one exact substring replaced (fails loudly if the substring is gone)."""
    assert old in BASE
    return BASE.replace(old, new, 1)


POOL_FIELDS = ("cpus, features, gpus, healthChecks, image, keda, maxReplicas, memory, minReplicas, name, nodeSelector, "
               "rdma, replicas, tmpSize, tolerations")
DNS1035 = ("a DNS-1035 label (lowercase letters, digits and '-', starting with a letter "
           "and ending with a letter or digit)")
VERSIONS = "22.05, 23.02, 23.11, 24.05, 24.11, 25.05, 25.11, 26.05"

# (id, file content (None: no file), expected stderr lines)
CASES: list[tuple[str, str | bytes | None, list[str]]] = [
    ("keda-on-fixed-pool", edit("      memory: 2Gi\n", "      memory: 2Gi\n      keda: {serverAddress: 'http://p:9090', "
                                "query: q, threshold: '1'}\n"),
     ["bad.yaml:11:7: spec.pools[0].keda: KEDA needs an elastic pool (minReplicas < maxReplicas); this one has 1..1",
      "bad.yaml:11:7: spec.pools[0].keda: this KEDA trigger has no metric source: nothing in the cluster exports "
      "metrics; set spec.metrics.enabled: true (Slurm's own openmetrics, 25.11+)"]),
    ("keda-without-metrics", edit("      memory: 2Gi\n", "      memory: 2Gi\n      maxReplicas: 4\n      keda: "
                                  "{serverAddress: 'http://p:9090', query: q, threshold: '1'}\n"),
     ["bad.yaml:12:7: spec.pools[0].keda: this KEDA trigger has no metric source: nothing in the cluster exports "
      "metrics; set spec.metrics.enabled: true (Slurm's own openmetrics, 25.11+)"]),
    ("keda-unknown-metric", edit("      memory: 2Gi\n", "      memory: 2Gi\n      maxReplicas: 4\n      keda: "
                                 "{serverAddress: 'http://p:9090', query: 'sum(slurm_queue_pending)', threshold: '1'}\n")
     + "  metrics: {enabled: true}\n",
     ["bad.yaml:12:53: spec.pools[0].keda.query: slurm_queue_pending is not a metric slurmctld exports "
      "(docs/metrics.md lists them)"]),
    ("metrics-on-2411", edit("spec:\n", "spec:\n  slurm: {version: '24.11'}\n") + "  metrics: {enabled: true}\n",
     ['bad.yaml:12:22: spec.metrics.enabled: Slurm 24.11 has no metrics/openmetrics (it came in 25.11); use 25.11 '
      "or later, or run an exporter yourself (docs/metrics.md says which)"]),
    ("metrics-with-privatedata", edit("spec:\n", "spec:\n  slurm: {config: {PrivateData: jobs}}\n")
     + "  metrics: {enabled: true}\n",
     ["bad.yaml:6:20: spec.slurm.config.PrivateData: slurmctld turns its metrics off when PrivateData is set; "
      "drop it or spec.metrics"]),
    ("label-key-too-long", edit("      memory: 2Gi\n", "      memory: 2Gi\n      nodeSelector: {" + "k" * 320 + ": x}\n"),
     ["bad.yaml:11:22: spec.pools[0].nodeSelector." + "k" * 320 + ": key '" + "k" * 59 + "...(320 characters) is "
      "longer than 317 characters"]),
    ("pool-checks-without-health", edit("      memory: 2Gi\n", "      memory: 2Gi\n      healthChecks: "
                                        "[{name: nfs, command: 'test -d /nfs'}]\n"),
     ["bad.yaml:11:7: spec.pools[0].healthChecks: pool checks run only with spec.healthChecks.enabled: true"]),
    ("yaml-syntax", "a: [1, 2\n",
     ["bad.yaml:2:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"]),
    ("empty-file", "", ["bad.yaml:1:1: the file is empty: expected a ClusterProfile mapping"]),
    ("comments-only", "# nothing here\n", ["bad.yaml:1:1: the file is empty: expected a ClusterProfile mapping"]),
    ("list-not-mapping", "- name: cpu\n- name: gpu\n", ["bad.yaml:1:1: expected a ClusterProfile mapping, found a list"]),
    ("not-utf8", b"apiVersion: slurmk8s.io/v1alpha1\nkind: \xffClusterProfile\n",
     ["bad.yaml:2:7: not UTF-8 text: byte 0xff cannot be decoded"]),
    ("missing-file", None, ["bad.yaml: no such file"]),
    ("control-character", "apiVersion: x\n\x01kind: y\n", ["bad.yaml:2:1: YAML error: character U+0001 is not allowed in YAML"]),
    ("two-documents", BASE + "---\n" + BASE,
     ["bad.yaml:11:1: YAML syntax error: expected one YAML document, found more than one"]),
    ("recursive-alias", BASE + "  topology: &t {x: *t}\n",
     ["bad.yaml:11:13: spec.topology.x: a recursive alias (an anchor used inside itself)"]),
    ("unknown-field", edit("      cpus: 2\n", "      cpus: 2\n      gpu: 1\n"),
     [f"bad.yaml:10:7: spec.pools[0].gpu: unknown field (allowed: {POOL_FIELDS})"]),
    ("wrong-type", edit("cpus: 2", "cpus: two"), ["bad.yaml:9:13: spec.pools[0].cpus: expected an integer, found 'two'"]),
    ("float-for-integer", edit("cpus: 2", "cpus: 2.0"), ["bad.yaml:9:13: spec.pools[0].cpus: expected an integer, found 2.0"]),
    ("version-unquoted", BASE + "  slurm:\n    version: 22.05\n",
     ["bad.yaml:12:14: spec.slurm.version: expected a string, found 22.05 (quote it: YAML reads 22.05 as a number)"]),
    ("version-unknown", BASE + "  slurm:\n    version: '21.08'\n",
     [f"bad.yaml:12:14: spec.slurm.version: '21.08' is not one of: {VERSIONS}"]),
    ("wrong-kind", edit("kind: ClusterProfile", "kind: Cluster"),
     ["bad.yaml:2:7: kind: expected 'ClusterProfile', found 'Cluster'"]),
    ("missing-required", edit("      cpus: 2\n      memory: 2Gi\n", ""),
     ["bad.yaml:7:7: spec.pools[0]: missing required field 'cpus'",
      "bad.yaml:7:7: spec.pools[0]: missing required field 'memory'"]),
    ("replicas-negative", edit("replicas: 1", "replicas: -1"),
     ["bad.yaml:8:17: spec.pools[0].replicas: -1 is less than the minimum of 0"]),
    ("replicas-above-max", edit("replicas: 1", "replicas: 5\n      maxReplicas: 3"),
     ["bad.yaml:8:17: spec.pools[0].replicas: 5 is greater than maxReplicas 3"]),
    ("replicas-below-min", edit("replicas: 1", "replicas: 1\n      minReplicas: 2\n      maxReplicas: 3"),
     ["bad.yaml:8:17: spec.pools[0].replicas: 1 is less than minReplicas 2"]),
    ("min-above-max", edit("replicas: 1", "replicas: 1\n      minReplicas: 3\n      maxReplicas: 2"),
     ["bad.yaml:9:20: spec.pools[0].minReplicas: 3 is greater than maxReplicas 2"]),
    ("partition-unknown-pool", BASE + "  partitions:\n    - {name: main, pools: [cpu, gpu]}\n",
     ["bad.yaml:12:33: spec.partitions[0].pools[1]: unknown pool 'gpu' (pools: cpu)"]),
    ("pool-in-no-partition", BASE + GPU_POOL + "  partitions:\n    - {name: main, pools: [cpu]}\n",
     ["bad.yaml:11:13: spec.pools[1].name: pool 'gpu' is in no partition; add it to one so its nodes can run jobs"]),
    ("two-default-partitions",
     BASE + "  partitions:\n    - {name: a, pools: [cpu], default: true}\n    - {name: b, pools: [cpu], default: true}\n",
     ["bad.yaml:13:40: spec.partitions[1].default: only one partition may be the default (spec.partitions[0] already is)"]),
    ("duplicate-pool", BASE + GPU_POOL.replace("gpu", "cpu"),
     ["bad.yaml:11:13: spec.pools[1].name: duplicate pool name 'cpu' (also spec.pools[0])"]),
    ("reserved-pool-name", edit("name: cpu", "name: controller"),
     ["bad.yaml:7:13: spec.pools[0].name: 'controller' is reserved (it would collide with a component's objects)"]),
    ("statefulset-name-too-long", edit("name: demo", "name: " + "c" * 40).replace("name: cpu", "name: " + "p" * 12),
     [f"bad.yaml:7:13: spec.pools[0].name: StatefulSet name '{'c' * 40}-{'p' * 12}' would be 53 characters; "
      "the limit is 52 (shorten metadata.name or the pool name)"]),
    ("cluster-name-too-long", edit("name: demo", "name: " + "c" * 41),
     [f"bad.yaml:4:9: metadata.name: '{'c' * 41}' is 41 characters long; the maximum is 40"]),
    ("name-not-dns-label", edit("name: demo", "name: Demo_1"),
     [f"bad.yaml:4:9: metadata.name: expected {DNS1035}, found 'Demo_1'"]),
    ("name-starts-with-digit", edit("name: demo", "name: 1demo"),
     [f"bad.yaml:4:9: metadata.name: expected {DNS1035}, found '1demo'"]),
    ("name-trailing-newline", edit("name: demo", 'name: "demo\\n"'),
     [f"bad.yaml:4:9: metadata.name: expected {DNS1035}, found 'demo\\n'"]),
    ("owned-slurm-key", BASE + "  slurm:\n    config:\n      SlurmctldHost: elsewhere\n      MaxJobCount: 5000\n",
     ["bad.yaml:13:7: spec.slurm.config.SlurmctldHost: 'SlurmctldHost' is set by the generator and cannot be overridden here"]),
    ("owned-slurm-key-any-case", BASE + "  slurm:\n    config: {authtype: auth/none}\n",
     ["bad.yaml:12:14: spec.slurm.config.authtype: 'authtype' is set by the generator and cannot be overridden here"]),
    ("slurm-config-multiline", BASE + '  slurm:\n    config: {PrologFlags: "x\\nAuthType=auth/none"}\n',
     ["bad.yaml:12:27: spec.slurm.config.PrologFlags: 'x\\nAuthType=auth/none' contains a line break (U+000A); "
      "values are written into Slurm and Kubernetes files, where it would break the line"]),
    ("slurm-config-bad-key", BASE + "  slurm:\n    config: {Bad Key: 1}\n",
     ["bad.yaml:12:14: spec.slurm.config['Bad Key']: expected a key of letters and digits as a key, found 'Bad Key'"]),
    ("owned-partition-key", BASE + "  partitions:\n    - {name: a, pools: [cpu], config: {Nodes: 'x-[0-9]'}}\n",
     ["bad.yaml:12:40: spec.partitions[0].config.Nodes: 'Nodes' is set by the generator; use the partition's own fields"]),
    ("partition-config-two-words", BASE + "  partitions:\n    - {name: a, pools: [cpu], config: {AllowQos: 'a b'}}\n",
     ["bad.yaml:12:50: spec.partitions[0].config.AllowQos: 'a b' must be one word (it is written into the PartitionName line)"]),
    ("auth-slurm-on-22.05", BASE + "  slurm: {version: '22.05', auth: slurm, images: {registry: r.example/hpc}}\n",
     ["bad.yaml:11:35: spec.slurm.auth: auth 'slurm' needs Slurm 23.11 or newer; 22.05 has only munge"]),
    ("munge-with-default-images", BASE + "  slurm: {auth: munge}\n",
     ["bad.yaml:11:17: spec.slurm.auth: SlinkyProject's images carry no munged: with auth 'munge' set "
      "spec.slurm.images (registry/tag or per component) to images that do, such as those of "
      "`slurmk8s images build`"]),
    ("no-slinky-images-for-version", BASE + "  slurm: {version: '24.05'}\n",
     ["bad.yaml:11:20: spec.slurm.version: SlinkyProject publishes no images for Slurm 24.05; "
      "set spec.slurm.images.registry/tag to images you build (`slurmk8s images build` makes them for 22.05, 24.11 and 26.05)"]),
    ("embedded-and-external",
     BASE + "  accounting:\n    database:\n      embedded: {}\n      external: {host: db, passwordSecret: {name: s, key: k}}\n",
     ["bad.yaml:13:7: spec.accounting.database: choose one of 'embedded' or 'external', not both"]),
    ("accounting-disabled-with-database", BASE + "  accounting: {enabled: false, database: {embedded: {storage: 1Gi}}}\n",
     ["bad.yaml:11:32: spec.accounting.database: a database is configured but accounting.enabled is false"]),
    ("hugepages-not-a-multiple",
     edit("memory: 2Gi", "memory: 2Gi\n      rdma: {resource: rdma/hca, hugepages: {size: 1Gi, amount: 1536Mi}}"),
     ["bad.yaml:11:65: spec.pools[0].rdma.hugepages.amount: 1536Mi is not a multiple of the page size 1Gi"]),
    ("memory-too-small", edit("memory: 2Gi", "memory: 256Mi"),
     ["bad.yaml:10:15: spec.pools[0].memory: 256Mi is less than the minimum of 512Mi (slurmd needs room beside the jobs)"]),
    ("bad-quantity", edit("memory: 2Gi", "memory: 2GB"),
     ["bad.yaml:10:15: spec.pools[0].memory: expected a Kubernetes quantity such as 512Mi, 16Gi, 2G or "
      "2147483648 (bytes), found '2GB'"]),
    ("bad-max-time", BASE + "  partitions:\n    - {name: a, pools: [cpu], maxTime: 2 days}\n",
     ["bad.yaml:12:40: spec.partitions[0].maxTime: expected UNLIMITED, minutes, or [days-]hours:minutes:seconds "
      "such as 2-00:00:00, found '2 days'"]),
    ("duplicate-yaml-key", edit("      cpus: 2\n", "      cpus: 2\n      cpus: 4\n"),
     ["bad.yaml:10:7: spec.pools[0].cpus: duplicate key (first at line 9)"]),
    ("srun-port-range-order", BASE + "  slurm: {srunPortRange: 5000-4000}\n",
     ["bad.yaml:11:26: spec.slurm.srunPortRange: '5000-4000' must be LOW-HIGH with 1024 <= LOW <= HIGH <= 65535"]),
    ("srun-port-range-format", BASE + "  slurm: {srunPortRange: '60001:63000'}\n",
     ["bad.yaml:11:26: spec.slurm.srunPortRange: expected a port range LOW-HIGH such as 60001-63000, found '60001:63000'"]),
    ("no-pools-field", BASE[: BASE.index("  pools:")] + "  login: {replicas: 1}\n",
     ["bad.yaml:6:3: spec: missing required field 'pools'"]),
    ("empty-pools", BASE[: BASE.index("  pools:")] + "  pools: []\n",
     ["bad.yaml:6:10: spec.pools: expected at least 1 item(s), found 0"]),
    ("spec-is-null", BASE[: BASE.index("  pools:")],
     ["bad.yaml:5:6: spec: expected a mapping, found nothing (null)"]),
    ("bad-timestamp", BASE + "  topology: {x: 2001-99-99}\n",
     ["bad.yaml:11:17: spec.topology.x: cannot read value: month must be in 1..12"]),
    ("every-error-at-once",
     edit("name: demo", "name: Demo").replace("replicas: 1", "replicas: -1").replace("cpus: 2\n", "cpus: 2\n      bogus: 1\n"),
     [f"bad.yaml:4:9: metadata.name: expected {DNS1035}, found 'Demo'",
      "bad.yaml:8:17: spec.pools[0].replicas: -1 is less than the minimum of 0",
      f"bad.yaml:10:7: spec.pools[0].bogus: unknown field (allowed: {POOL_FIELDS})"]),
    ("every-cross-field-error-at-once",
     BASE.replace("memory: 2Gi", "memory: 256Mi") + "  slurm: {config: {ClusterName: x}}\n"
     "  partitions:\n    - {name: main, pools: [cpu, nope]}\n",
     ["bad.yaml:10:15: spec.pools[0].memory: 256Mi is less than the minimum of 512Mi (slurmd needs room beside the jobs)",
      "bad.yaml:11:20: spec.slurm.config.ClusterName: 'ClusterName' is set by the generator and cannot be overridden here",
      "bad.yaml:13:33: spec.partitions[0].pools[1]: unknown pool 'nope' (pools: cpu)"]),
    # spec.scheduling
    ("sched-user-in-no-account", SCHED + "    accounts:\n      - {name: a, users: [ann]}\n    users:\n      - {name: bob}\n",
     ["bad.yaml:15:16: spec.scheduling.users[0].name: user 'bob' is in no account; list it under an account's users"]),
    ("sched-qos-not-defined", SCHED + "    accounts:\n      - {name: a, qos: [normal, fast], defaultQos: slow}\n",
     ["bad.yaml:13:33: spec.scheduling.accounts[0].qos[1]: QoS 'fast' is not defined (QoS: normal)",
      "bad.yaml:13:52: spec.scheduling.accounts[0].defaultQos: QoS 'slow' is not defined (QoS: normal)"]),
    ("sched-preempt-qos-without-preemptor", SCHED + "    preemption: {type: qos}\n    qos:\n      - {name: low}\n",
     ["bad.yaml:12:24: spec.scheduling.preemption.type: preemption by QoS needs a QoS that may preempt another "
      "(set preempt on one of spec.scheduling.qos)"]),
    ("sched-tree-without-accounting",
     BASE + "  accounting: {enabled: false}\n  scheduling:\n    accounts: [{name: a}]\n    qos: [{name: low}]\n",
     ["bad.yaml:13:5: spec.scheduling.accounts: accounts live in slurmdbd: they need accounting.enabled true",
      "bad.yaml:14:5: spec.scheduling.qos: qos live in slurmdbd: they need accounting.enabled true"]),
    ("sched-duplicate-names", SCHED + "    accounts:\n      - {name: a}\n      - {name: a}\n    qos:\n      - {name: low}\n      - {name: low}\n",
     ["bad.yaml:14:16: spec.scheduling.accounts[1].name: duplicate account name 'a' (also spec.scheduling.accounts[0])",
      "bad.yaml:17:16: spec.scheduling.qos[1].name: duplicate QoS name 'low' (also spec.scheduling.qos[0])"]),
    ("sched-account-cycle-and-unknown-parent",
     SCHED + "    accounts:\n      - {name: a, parent: b}\n      - {name: b, parent: a}\n      - {name: c, parent: nope}\n",
     ["bad.yaml:13:27: spec.scheduling.accounts[0].parent: accounts form a cycle: a -> b -> a",
      "bad.yaml:15:27: spec.scheduling.accounts[2].parent: unknown account 'nope' (accounts: a, b, c)"]),
    ("sched-preempt-self-and-undefined", SCHED + "    qos:\n      - {name: high, preempt: [high, scavenger]}\n",
     ["bad.yaml:13:32: spec.scheduling.qos[0].preempt[0]: a QoS cannot preempt itself",
      "bad.yaml:13:38: spec.scheduling.qos[0].preempt[1]: QoS 'scavenger' is not defined (QoS: high, normal)"]),
    ("sched-default-account-not-member",
     SCHED + "    accounts:\n      - {name: a, users: [ann]}\n      - {name: b}\n    users:\n      - {name: ann, defaultAccount: b}\n",
     ["bad.yaml:16:37: spec.scheduling.users[0].defaultAccount: user 'ann' is not in account 'b' (its accounts: a)"]),
    ("sched-gpu-limit-without-gpus", SCHED + "    qos:\n      - {name: q, limits: {grpTRES: {gpu: 8, cpu: 64}}}\n",
     ["bad.yaml:13:43: spec.scheduling.qos[0].limits.grpTRES.gpu: a GPU limit needs a pool with GPUs (no pool has gpus)"]),
    ("sched-root-account", SCHED + "    accounts:\n      - {name: root}\n",
     ["bad.yaml:13:16: spec.scheduling.accounts[0].name: 'root' is Slurm's own top account; put accounts under it"]),
    ("sched-owned-priority-key", BASE + "  slurm:\n    config: {PriorityWeightAge: 10}\n",
     ["bad.yaml:12:14: spec.slurm.config.PriorityWeightAge: 'PriorityWeightAge' is set by the generator and cannot be overridden here"]),
    ("sched-bad-time-and-tres", SCHED + "    qos:\n      - name: x\n        limits: {maxWall: forever, grpTRES: {mem: 4}}\n",
     ["bad.yaml:14:27: spec.scheduling.qos[0].limits.maxWall: expected minutes, or days-hours[:minutes[:seconds]] "
      "or hours:minutes:seconds such as 7-0 or 2:00:00, found 'forever'",
      "bad.yaml:14:46: spec.scheduling.qos[0].limits.grpTRES.mem: unknown field (allowed: cpu, gpu, node)"]),
    # spec.sideBySide: SIDE_BY_SIDE starts at line 11; its shape at line 15, slurm at line 22.
    ("sbs-slurm-and-system-cpus-overlap", sbs("system: {cpus: '0-3', memory: 4Gi}", "system: {cpus: '0-9', memory: 4Gi}"),
     ["bad.yaml:21:24: spec.sideBySide.shapes[0].system.cpus: shape 'dgx': CPUs 4-9 are both Slurm's and the system reserve's"]),
    ("sbs-slurm-and-kubernetes-cpus-overlap", sbs() + "        kubernetes: {cpus: '30-47'}\n",
     ["bad.yaml:23:28: spec.sideBySide.shapes[0].kubernetes.cpus: shape 'dgx': CPUs 30-31 are both Slurm's and Kubernetes'"]),
    ("sbs-gpus-overlap", sbs() + "        kubernetes: {gpus: [1, 2]}\n",
     ["bad.yaml:23:28: spec.sideBySide.shapes[0].kubernetes.gpus: shape 'dgx': GPUs 1 are both Slurm's and Kubernetes'"]),
    ("sbs-memory-exceeds-node", sbs("memory: 32Gi, gpus", "memory: 60Gi, gpus"),
     ["bad.yaml:22:39: spec.sideBySide.shapes[0].slurm.memory: shape 'dgx': Slurm 60Gi + system 4Gi = 64Gi "
      "leave Kubernetes nothing of the node's 64Gi"]),
    ("sbs-memory-with-kubernetes-exceeds", sbs() + "        kubernetes: {memory: 40Gi}\n",
     ["bad.yaml:22:39: spec.sideBySide.shapes[0].slurm.memory: shape 'dgx': Slurm 32Gi + system 4Gi + Kubernetes 40Gi "
      "= 76Gi exceed the node's 64Gi"]),
    ("sbs-cpus-not-on-node", sbs("cpus: '4-31'", "cpus: '4-31,70'"),
     ["bad.yaml:22:23: spec.sideBySide.shapes[0].slurm.cpus: shape 'dgx': CPUs 70 are not on the node (its CPUs are 0-63)"]),
    ("sbs-gpu-not-on-node", sbs("gpus: [0, 1]}", "gpus: [0, 9]}"),
     ["bad.yaml:22:51: spec.sideBySide.shapes[0].slurm.gpus: shape 'dgx': GPUs 9 are not on the node (its GPUs are 0,1,2,3)"]),
    ("sbs-no-cpu-left-for-kubernetes", sbs("system: {cpus: '0-3'", "system: {cpus: '0-3,32-63'"),
     ["bad.yaml:22:23: spec.sideBySide.shapes[0].slurm.cpus: shape 'dgx': Slurm and the system reserve take every CPU; "
      "Kubernetes needs at least one"]),
    ("sbs-numa-misses-cpus", sbs("numa: ['0-31', '32-63']", "numa: ['0-31', '32-47']"),
     ["bad.yaml:18:15: spec.sideBySide.shapes[0].numa: shape 'dgx': CPUs 48-63 are in no NUMA node"]),
    ("sbs-host-mode-without-nodes", sbs("nodes: [dgx-01, dgx-02]", "nodeSelector: {shared: 'true'}"),
     ["bad.yaml:15:9: spec.sideBySide.shapes[0]: shape 'dgx': list the shared nodes in 'nodes' (each is a Slurm NodeName; "
      "'nodeSelector' only narrows where they run)"]),
    ("sbs-node-in-two-shapes", sbs() + "      - {name: two, nodes: [dgx-02], cpus: '0-7', memory: 8Gi, "
     "slurm: {cpus: '1-3', memory: 2Gi}, system: {cpus: '0', memory: 1Gi}}\n",
     ["bad.yaml:23:29: spec.sideBySide.shapes[1].nodes[0]: shape 'two': node 'dgx-02' is also in spec.sideBySide.shapes[0]"]),
    ("sbs-partition-name-taken", sbs("partition: shared", "partition: main"),
     ["bad.yaml:12:16: spec.sideBySide.partition: partition 'main' is also in spec.partitions; "
      "the shared nodes need a partition of their own"]),
    ("sbs-bad-cpulist", sbs("cpus: '0-63'", "cpus: '0..63'"),
     ["bad.yaml:17:15: spec.sideBySide.shapes[0].cpus: expected a CPU list such as 0-3,8-11 (CPU ids below 10000), found '0..63'"]),
    ("sbs-pod-mode-gpus", sbs("mode: host", "mode: pod"),
     ["bad.yaml:22:51: spec.sideBySide.shapes[0].slurm.gpus: shape 'dgx': GPUs for Slurm in pod mode are not supported "
      "yet (the device plugin picks the devices, so gres.conf cannot name them); use host mode"]),
]


# spec.topology (profile/topology.py): a cpu pool of 2 (tree) or 4 (blocks) nodes.
TOPOLOGY = """\
  topology:
    plugin: tree
    fromLabels: [example.com/spine, example.com/rack]
    domains:
      - name: s1
        nodeLabels: {example.com/spine: s1}
        children:
          - {name: r1, nodeLabels: {example.com/rack: r1}, slots: {cpu: 1}}
          - {name: r2, nodeLabels: {example.com/rack: r2}, slots: {cpu: 1}}
"""
BASE2 = BASE.replace("replicas: 1", "replicas: 1\n      maxReplicas: 2")


def topo(old: str = "", new: str = "", version: str = "") -> str:
    """BASE (cpu pool of 2 nodes) plus a valid tree topology, with one exact substring replaced."""
    assert old in TOPOLOGY
    slurm = f"  slurm: {{version: '{version}', images: {{registry: r.example/hpc}}}}\n" if version else ""
    return BASE2 + slurm + (TOPOLOGY.replace(old, new, 1) if old else TOPOLOGY)


BLOCKS = """\
  topology:
    plugin: block
    domains:
      - {name: b1, nodeLabels: {example.com/block: b1}, slots: {cpu: 3}}
      - {name: b2, nodeLabels: {example.com/block: b2}, slots: {cpu: 1}}
"""
BASE4 = BASE.replace("replicas: 1", "replicas: 1\n      maxReplicas: 4")


def blocks(version: str, extra: str = "") -> str:
    """BASE (cpu pool of 4 nodes) on a Slurm version, with two unequal blocks."""
    return BASE4 + f"  slurm: {{version: '{version}', images: {{registry: r.example/hpc}}}}\n" + BLOCKS + extra


FLAT = ("""      - name: s1
        nodeLabels: {example.com/spine: s1}
        children:
          - {name: r1""", "      - {name: r1")
CASES += [
    ("topology-block-before-23.11",
     topo("plugin: tree", "plugin: block", version="23.02")
        .replace("[example.com/spine, example.com/rack]", "[example.com/rack]").replace(*FLAT).replace("          - {name: r2", "      - {name: r2"),
     ['bad.yaml:14:13: spec.topology.plugin: topology/block needs Slurm 23.11 or newer; 23.02 has only tree']),
    ("topology-unequal-blocks-23.11",
     blocks("23.11"),
     ['bad.yaml:15:5: spec.topology.domains: blocks of unequal sizes (3, 1 nodes) need BlockSizes, which Slurm 23.11 lacks (24.05+); make the blocks equal']),
    ("topology-blocksizes-23.11",
     blocks("23.11", "    blockSizes: [1]\n"),
     ['bad.yaml:18:5: spec.topology.blockSizes: BlockSizes needs Slurm 24.05 or newer; 23.11 has none']),
    ("topology-blocksizes-not-power-of-two",
     blocks("24.11", "    blockSizes: [1, 3]\n"),
     ["bad.yaml:18:5: spec.topology.blockSizes: 3 must be a power-of-two multiple of 1 (Slurm's rule)"]),
    ("topology-tree-dynamic-nodes-22.05",
     topo(version="22.05").replace("hpc}}\n", "hpc}, config: {MaxNodeCount: 64}}\n"),
     ['bad.yaml:12:73: spec.slurm.config.MaxNodeCount: dynamic nodes (MaxNodeCount) with topology/tree make every job fail on Slurm 22.05; drop one of them']),
    ("topology-slots-short",
     topo("slots: {cpu: 1}}\n          - {name: r2", "slots: {cpu: 0}}\n          - {name: r2"),
     ["bad.yaml:15:5: spec.topology.domains: pool 'cpu' has maxReplicas 2 but 1 slot(s) in the leaf domains; every Slurm node must sit in exactly one leaf",
      "bad.yaml:19:20: spec.topology.domains[0].children[0].name: leaf domain 'r1' holds no slots (give it slots of a pool)"]),
    ("topology-unknown-pool",
     topo("r2}, slots: {cpu: 1}", "r2}, slots: {cpu: 1, gpu: 1}"),
     ["bad.yaml:20:76: spec.topology.domains[0].children[1].slots.gpu: unknown pool 'gpu' (pools: cpu)"]),
    ("topology-tier-label-missing",
     topo("{example.com/rack: r2}", "{example.com/spine: s9}"),
     ["bad.yaml:20:20: spec.topology.domains[0].children[1].name: domain 'r2' needs nodeLabels['example.com/rack'] (tier 2 of fromLabels)"]),
    ("topology-duplicate-domain",
     topo("name: r2", "name: r1"),
     ["bad.yaml:20:20: spec.topology.domains[0].children[1].name: duplicate domain name 'r1' (also spec.topology.domains[0].children[0])"]),
    ("topology-statefulset-name-too-long",
     topo("name: r2, nodeLabels: {example.com/rack: r2}", f"name: {'r' * 40}, nodeLabels: {{example.com/rack: {'r' * 40}}}")
        .replace("name: demo", "name: " + "d" * 20),
     ["bad.yaml:20:20: spec.topology.domains[0].children[1].name: StatefulSet name 'dddddddddddddddddddd-cpu-rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr' would be 65 characters; the limit is 52 (shorten the domain, pool or cluster name)"]),
    ("topology-leaf-unpinned",
     topo().replace("    fromLabels: [example.com/spine, example.com/rack]\n", "")
        .replace("        nodeLabels: {example.com/spine: s1}\n", "").replace("nodeLabels: {example.com/rack: r2}, ", ""),
     ["bad.yaml:18:20: spec.topology.domains[0].children[1].name: leaf domain 'r2' has no nodeLabels (nor has any switch above it): nothing would pin its pods to the domain"]),
    ("topology-leaves-same-labels",
     topo("{example.com/rack: r2}", "{example.com/rack: r1}"),
     ["bad.yaml:20:20: spec.topology.domains[0].children[1].name: leaf domain 'r2' requires the same node labels as 'r1': its pods could land in the other domain"]),
    ("topology-missing-plugin",
     BASE2 + "  topology:\n    fromLabels: gke\n    domains: []\n",
     ["bad.yaml:13:5: spec.topology: missing required field 'plugin'",
      'bad.yaml:14:14: spec.topology.domains: expected at least 1 item(s), found 0']),
]


def test_topology_cases_are_one_edit_from_valid(tmp_path: Path) -> None:
    """The unedited topology sections are valid, so each topology case tests exactly its edit."""
    assert len(read_profile(write_case(tmp_path, topo(version="22.05"))).topology.leaves()) == 2
    assert read_profile(write_case(tmp_path, blocks("24.11"))).topology.plugin == "block"


def write_case(directory: Path, content: str | bytes | None) -> Path:
    """Write one case as bad.yaml in directory (or leave it absent) and return its path."""
    path = directory / "bad.yaml"
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("content, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_profile_reports_exact_lines(content: str | bytes | None, expected: list[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write_case(tmp_path, content)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError) as info:
        read_profile("bad.yaml")
    assert str(info.value).splitlines() == expected
    assert info.value.exit_code == 2


def test_table_is_big_enough() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


def test_base_profile_is_valid(tmp_path: Path) -> None:
    """Every case is one edit away from a valid profile, so each case tests exactly its edit."""
    assert read_profile(write_case(tmp_path, BASE)).name == "demo"
    assert read_profile(write_case(tmp_path, BASE + GPU_POOL)).pools[1].name == "gpu"
    assert read_profile(write_case(tmp_path, sbs())).side_by_side.shapes[0].slurm.cpus == tuple(range(4, 32))


CLI_CASES = ["yaml-syntax", "not-utf8", "missing-file", "recursive-alias", "every-error-at-once"]


@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_validate_prints_only_the_lines(case: str, tmp_path: Path) -> None:
    _, content, expected = next(c for c in CASES if c[0] == case)
    write_case(tmp_path, content)
    run = run_cli(["validate", "bad.yaml"], cwd=tmp_path, timeout=60)  # cli.main in this process
    assert (run.returncode, run.stdout, run.stderr.splitlines()) == (2, "", expected)
