"""validate agrees with render and with the API server (issue 24, items 11-14).

Each case was accepted by `validate` before: a duplicate mountPath the API server answers with 422 in
the middle of `up`, an object name `render` refused without a file position, a slurm.conf value that
smuggled in more keys, a home that walked out of its volume, labels and Secrets that are not the
profile's to set. Each is now one located line, from `validate` and `render` alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile.files import read_profile
from slurmk8s.render import render
from inprocess import run_cli
from profile_texts import BASE

LOGIN = "  login: {replicas: 1}\n"
HOME = "    - {name: home, mountPath: /home, nfs: {server: nfs.example, path: /export/home}}\n"
ADA = "  identity:\n    users:\n      - {name: ada, uid: 2001}\n"
EXTERNAL_DB = """\
  accounting:
    database:
      external:
        host: db.example
        passwordSecret: {name: NAME, key: password}
"""


def volume(path: str, extra: str = "") -> str:
    """spec.volumes with one NFS volume x at path."""
    return f"  volumes:\n    - {{name: x, mountPath: {path}, nfs: {{server: nfs.example, path: /x}}{extra}}}\n"


def users(*entries: str) -> str:
    return "  identity:\n    users:\n" + "".join(f"      - {{name: u{i}, uid: {2001 + i}, {e}}}\n"
                                               for i, e in enumerate(entries))


def slurm_config(value: str, key: str = "SlurmctldDebug") -> str:
    return BASE + f"  slurm:\n    config:\n      {key}: {value}\n"


def pod_label(key: str) -> str:
    return BASE + f"  pods:\n    labels: {{{key}: x}}\n"


MOUNT_CLASH = ("the API server refuses two mounts at one path: mount this volume elsewhere")

# (id, profile text, the expected lines of `validate` and `render`)
CASES: list[tuple[str, str, list[str]]] = [
    # item 11: the generator's own mounts, found by rendering (render/apirules.py), not by a list of paths
    ("mount-login-config", BASE + LOGIN + volume("/mnt/login-config"),
     ["bad.yaml:13:28: spec.volumes[0].mountPath: /mnt/login-config is where StatefulSet/demo-login already mounts "
      f"'login-config' (container init-config); {MOUNT_CLASH}"]),
    ("mount-ssh-host-keys", BASE + LOGIN + volume("/mnt/ssh-host-keys/"),
     ["bad.yaml:13:28: spec.volumes[0].mountPath: /mnt/ssh-host-keys is where StatefulSet/demo-login already mounts "
      f"'ssh-host-keys' (container init-config); {MOUNT_CLASH}"]),
    ("mount-health", BASE + "  healthChecks: {enabled: true}\n" + volume("/opt/slurmk8s/health"),
     ["bad.yaml:13:28: spec.volumes[0].mountPath: /opt/slurmk8s/health is where StatefulSet/demo-cpu already mounts "
      f"'health' (container slurmd); {MOUNT_CLASH}"]),
    ("mount-identity", BASE + ADA + volume("/mnt/identity") + HOME,
     ["bad.yaml:15:28: spec.volumes[0].mountPath: /mnt/identity is where StatefulSet/demo-cpu already mounts "
      f"'identity' (container init-config); {MOUNT_CLASH}"]),
    ("mount-identity-files", BASE + ADA + volume("/mnt/identity-files") + HOME,
     ["bad.yaml:15:28: spec.volumes[0].mountPath: /mnt/identity-files is where StatefulSet/demo-cpu already mounts "
      f"'identity-files' (container init-config); {MOUNT_CLASH}"]),
    ("pool-names-clash-with-busy-budget", BASE + "    - {name: cpu-busy, replicas: 1, cpus: 1, memory: 1Gi}\n",
     ["bad.yaml:11:14: spec.pools[1].name: pool 'cpu-busy' would make PodDisruptionBudget/demo-cpu-busy, which pool "
      "'cpu' makes too; rename one of them"]),
    ("claim-of-controller-template", BASE + "  volumes:\n    - {name: s, mountPath: /s, claimName: statesave-demo-controller-0}\n",
     ["bad.yaml:12:43: spec.volumes[0].claimName: 'statesave-demo-controller-0' is a claim of the cluster's own "
      "StatefulSet/demo-controller; a volume may not mount the cluster's storage"]),
    # item 12: a single-value slurm.conf key takes one word
    ("slurm-config-smuggles-keys", slurm_config("'info SlurmUser=root AuthType=auth/none'"),
     ["bad.yaml:13:23: spec.slurm.config.SlurmctldDebug: 'info SlurmUser=root AuthType=auth/none' must be one word: in "
      "slurm.conf what follows a space would be read as more keys, and what follows a '#' as a comment"]),
    ("slurm-config-comment", slurm_config("'info#x'"),
     ["bad.yaml:13:23: spec.slurm.config.SlurmctldDebug: 'info#x' must not contain '#': in slurm.conf what follows a "
      "space would be read as more keys, and what follows a '#' as a comment"]),
    ("slurm-config-include", slurm_config("'jobs Include=/home/ada/x.conf'", "PrivateData"),
     ["bad.yaml:13:20: spec.slurm.config.PrivateData: 'jobs Include=/home/ada/x.conf' must be one word: in "
      "slurm.conf what follows a space would be read as more keys, and what follows a '#' as a comment"]),
    ("partition-config-comment",
     BASE + "  partitions:\n    - {name: main, pools: [cpu], config: {AllowQos: 'a#b'}}\n",
     ["bad.yaml:12:53: spec.partitions[0].config.AllowQos: 'a#b' must not contain '#' (it is written into the "
      "PartitionName line)"]),
    # item 13: homes and shells are plain paths; a home lies under a volume that makes homes
    ("home-dot-dot", BASE + users("home: /home/../etc/slurm/x") + HOME.replace("    -", "  volumes:\n    -"),
     ["bad.yaml:13:37: spec.identity.users[0].home: '/home/../etc/slurm/x' is not a plain absolute path (no '.' or "
      "'..' components, no '//')"]),
    ("home-dot", BASE + users("home: /home/./u0"),
     ["bad.yaml:13:37: spec.identity.users[0].home: '/home/./u0' is not a plain absolute path (no '.' or '..' "
      "components, no '//')"]),
    ("home-double-slash", BASE + users("home: /home//u0"),
     ["bad.yaml:13:37: spec.identity.users[0].home: '/home//u0' is not a plain absolute path (no '.' or '..' "
      "components, no '//')"]),
    ("shell-dot-dot", BASE + users("shell: /bin/../tmp/sh"),
     ["bad.yaml:13:38: spec.identity.users[0].shell: '/bin/../tmp/sh' is not a plain absolute path (no '.' or '..' "
      "components, no '//')"]),
    ("home-outside-home-volume",
     BASE + users("home: /var/spool/slurmd/u0", "home: /home") + HOME.replace("    -", "  volumes:\n    -"),
     ["bad.yaml:13:37: spec.identity.users[0].home: home /var/spool/slurmd/u0 is under no volume that makes homes "
      "(/home); it would never be made: put it under one, or declare a volume for it",
      "bad.yaml:14:37: spec.identity.users[1].home: home /home is where a home volume is mounted, shared by everyone "
      "and owned by root; give the user a directory under it"]),
    ("default-home-outside-home-volume",
     BASE + users("shell: /bin/sh") + "  volumes:\n    - {name: h, mountPath: /users, createHomes: true, "
                                      "nfs: {server: nfs.example, path: /h}}\n",
     ["bad.yaml:13:16: spec.identity.users[0].name: home /home/u0 is under no volume that makes homes (/users); it "
      "would never be made: put it under one, or declare a volume for it"]),
    # item 14: what is not the profile's to set
    ("label-controller-revision-hash", pod_label("controller-revision-hash"),
     ["bad.yaml:12:14: spec.pods.labels.controller-revision-hash: 'controller-revision-hash' is set on each pod by "
      "its workload controller, which would overwrite it (and rollout reads it); leave it out"]),
    ("label-pod-template-hash", pod_label("pod-template-hash"),
     ["bad.yaml:12:14: spec.pods.labels.pod-template-hash: 'pod-template-hash' is set on each pod by its workload "
      "controller, which would overwrite it (and rollout reads it); leave it out"]),
    ("label-statefulset-pod-name", pod_label("statefulset.kubernetes.io/pod-name"),
     ["bad.yaml:12:14: spec.pods.labels.statefulset.kubernetes.io/pod-name: 'statefulset.kubernetes.io/pod-name' has "
      "a prefix in kubernetes.io, which Kubernetes reserves for its own components (they set these labels "
      "themselves); leave it out"]),
    ("label-kubernetes-io", pod_label("kubernetes.io/arch"),
     ["bad.yaml:12:14: spec.pods.labels.kubernetes.io/arch: 'kubernetes.io/arch' has a prefix in kubernetes.io, which "
      "Kubernetes reserves for its own components (they set these labels themselves); leave it out"]),
    ("label-k8s-io", pod_label("node.k8s.io/x"),
     ["bad.yaml:12:14: spec.pods.labels.node.k8s.io/x: 'node.k8s.io/x' has a prefix in k8s.io, which Kubernetes "
      "reserves for its own components (they set these labels themselves); leave it out"]),
    ("volume-controller-statesave-claim",
     BASE + "  volumes:\n    - {name: s, mountPath: /s, claimName: demo-controller-statesave}\n",
     ["bad.yaml:12:43: spec.volumes[0].claimName: 'demo-controller-statesave' is slurmctld's state "
      "(StateSaveLocation); a volume may not mount the cluster's own storage"]),
    ("volume-claim-named-like-statesave",
     BASE + "  volumes:\n    - {name: controller-statesave, mountPath: /s, claim: {size: 1Gi}}\n",
     ["bad.yaml:12:14: spec.volumes[0].name: this volume's claim would be 'demo-controller-statesave', the name of "
      "slurmctld's state claim; choose another name"]),
    ("volume-auth-key-secret",
     BASE + "  volumes:\n    - {name: s, mountPath: /s, secret: {secretName: demo-auth-key}}\n",
     ["bad.yaml:12:53: spec.volumes[0].secret.secretName: 'demo-auth-key' is the cluster's own Secret (the auth key, "
      "made by `up`); a volume may not mount it"]),
    ("volume-host-key-secret",
     BASE + "  volumes:\n    - {name: s, mountPath: /s, secret: {secretName: demo-ssh-host-keys}}\n",
     ["bad.yaml:12:53: spec.volumes[0].secret.secretName: 'demo-ssh-host-keys' is the cluster's own Secret (the login "
      "host key, made by `up`); a volume may not mount it"]),
    ("volume-db-password-secret",
     BASE + "  volumes:\n    - {name: s, mountPath: /s, secret: {secretName: demo-db-password}}\n",
     ["bad.yaml:12:53: spec.volumes[0].secret.secretName: 'demo-db-password' is the cluster's own Secret (the "
      "database password, made by `up`); a volume may not mount it"]),
    ("volume-jwt-secret",
     BASE + "  volumes:\n    - {name: s, mountPath: /s, secret: {secretName: demo-jwt-key}}\n",
     ["bad.yaml:12:53: spec.volumes[0].secret.secretName: 'demo-jwt-key' is the cluster's own Secret (slurmrestd's "
      "JWT key, made by `up`); a volume may not mount it"]),
    ("password-secret-auth-key", BASE + EXTERNAL_DB.replace("NAME", "demo-auth-key"),
     ["bad.yaml:15:32: spec.accounting.database.external.passwordSecret.name: 'demo-auth-key' is the cluster's own "
      "Secret (the auth key, made by `up`); name the Secret that holds the database password"]),
    ("min-free-disk-milli", BASE + "  healthChecks: {enabled: true, minFreeDisk: 1m}\n",
     ["bad.yaml:11:46: spec.healthChecks.minFreeDisk: '1m' is less than 1Mi, which the check rounds down to 0 and so "
      "never fails; give at least 1Mi (or 0 to say so)"]),
    ("min-free-disk-kibibytes", BASE + "  healthChecks: {enabled: true, minFreeDisk: 1023Ki}\n",
     ["bad.yaml:11:46: spec.healthChecks.minFreeDisk: '1023Ki' is less than 1Mi, which the check rounds down to 0 "
      "and so never fails; give at least 1Mi (or 0 to say so)"]),
]

# One edit short of each case: these stay valid.
VALID = [
    ("mount-login-config-on-pools-only", BASE + LOGIN + volume("/mnt/login-config", ", mountOn: [pools]")),
    ("slurm-config-equals-in-one-word", slurm_config("ports=12000-12999", "MpiParams")),
    ("slurm-config-line-key-with-spaces", slurm_config("'cpu-0 State=DOWN Reason=maintenance'", "DownNodes")),
    ("partition-config-equals", BASE + "  partitions:\n    - {name: main, pools: [cpu], "
                                       "config: {TRESBillingWeights: 'CPU=1.0,Mem=0.25G'}}\n"),
    ("home-under-home-volume", BASE + users("home: /home/lab/u0") + HOME.replace("    -", "  volumes:\n    -")),
    ("identity-without-home-volume", BASE + users("home: /srv/u0")),
    ("label-of-the-site", pod_label("example.com/team")),
    ("password-secret-of-the-site", BASE + EXTERNAL_DB.replace("NAME", "demo-db-password")),
    ("min-free-disk-zero", BASE + "  healthChecks: {enabled: true, minFreeDisk: 0}\n"),
    ("min-free-disk-one-mebibyte", BASE + "  healthChecks: {enabled: true, minFreeDisk: 1Mi}\n"),
]


def validate_lines(directory: Path, text: str) -> list[str]:
    """What `validate` reports for text, as bad.yaml in directory: it loads the profile, then renders it."""
    path = directory / "bad.yaml"
    path.write_text(text)
    try:
        render(read_profile("bad.yaml"))
    except ProfileError as e:
        assert e.exit_code == 2
        return str(e).splitlines()
    return []


@pytest.mark.parametrize("text, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_with_one_located_line(text: str, expected: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert validate_lines(tmp_path, text) == expected


@pytest.mark.parametrize("text", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_one_edit_short_stays_valid(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert validate_lines(tmp_path, text) == []


@pytest.mark.parametrize("case", ["mount-login-config", "pool-names-clash-with-busy-budget"])
def test_cli_validate_and_render_print_the_same_line(case: str, tmp_path: Path) -> None:
    """The render-side cases: `validate` exits 2 with render's line, which now has a file position."""
    _, text, expected = next(c for c in CASES if c[0] == case)
    (tmp_path / "bad.yaml").write_text(text)
    for argv in (["validate", "bad.yaml"], ["render", "bad.yaml", "-o", "out"]):
        run = run_cli(argv, cwd=tmp_path, timeout=60)  # cli.main in this process
        assert (run.returncode, run.stdout, run.stderr.splitlines()) == (2, "", expected), argv
    assert not (tmp_path / "out").exists()
