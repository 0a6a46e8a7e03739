"""Declared users and profile volumes in the rendered pods; the init container's merge run for real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import kubernetes_validate
import pytest

from slurmk8s import naming
from slurmk8s.profile import load_profile
from slurmk8s.render import render
from slurmk8s.render.k8s.identity import identity_script

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEXAMPLEKEYEXAMPLEKEYEXAMPLEKEYEXAMPLEKEY ada@example.org"

PROFILE = f"""\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {{name: demo}}
spec:
  login: {{replicas: 1}}
  restapi: {{enabled: true}}
  identity:
    users:
      - {{name: ada, uid: 2001, sshKeys: ["{KEY}"], accounts: [physics]}}
      - {{name: max, uid: 2002, gid: 3000, shell: /bin/sh}}
    groups:
      - {{name: hpc, gid: 3000, members: [ada, max]}}
  volumes:
    - {{name: home, mountPath: /home, claim: {{size: 5Gi, storageClassName: nfs-rwx}}}}
    - {{name: scratch, mountPath: /scratch, nfs: {{server: nfs.example, path: /export/scratch}}, mountOn: [pools]}}
    - {{name: tools, mountPath: /opt/site, configMap: {{name: site-tools}}, mountOn: [login]}}
  pools:
    - {{name: cpu, replicas: 1, cpus: 2, memory: 2Gi}}
  scheduling:
    accounts:
      - {{name: physics}}
"""


def objects(text: str = PROFILE) -> list[dict]:
    return list(render(load_profile(text.encode())).objects)


def pod_templates(objs: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objs
            if o["kind"] in naming.WORKLOAD_KINDS}


def find(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_identity_configmap_holds_passwd_group_and_keys() -> None:
    data = find(objects(), "ConfigMap", "demo-identity")["data"]
    assert data["passwd"] == "ada:x:2001:2001::/home/ada:/bin/bash\nmax:x:2002:3000::/home/max:/bin/sh\n"
    assert data["group"] == "ada:x:2001:\nhpc:x:3000:ada,max\n"
    assert data["ssh-ada"] == KEY + "\n"
    assert "ssh-max" not in data


def test_every_slurm_container_sees_the_merged_files_read_only() -> None:
    pods = pod_templates(objects())
    assert set(pods) >= {"demo-controller", "demo-cpu", "demo-login", "demo-accounting", "demo-restapi"}
    for name, pod in pods.items():
        if name == "demo-mariadb":
            continue
        for c in pod["containers"]:
            got = {m["mountPath"]: m for m in c["volumeMounts"] if m["name"] == "identity-files"}
            assert got == {"/etc/group": {"name": "identity-files", "mountPath": "/etc/group", "subPath": "group",
                                          "readOnly": True},
                           "/etc/passwd": {"name": "identity-files", "mountPath": "/etc/passwd", "subPath": "passwd",
                                           "readOnly": True}}, (name, c["name"])
        init = pod["initContainers"][0]
        assert "cat /mnt/identity/passwd >> /mnt/identity-files/passwd" in init["command"][-1], name


def test_login_installs_each_users_keys_owned_by_the_user() -> None:
    init = pod_templates(objects())["demo-login"]["initContainers"][0]["command"][-1]
    assert "install -m 0600 -o 2001 -g 2001 /mnt/identity/ssh-ada /etc/ssh/authorized_keys/ada" in init
    assert "authorized_keys/max" not in init  # no keys, no file


def test_a_change_of_users_rolls_every_slurm_pod() -> None:
    def hashes(text: str) -> dict[str, str]:
        return {n: p for n, p in ((o["metadata"]["name"],
                                   o["spec"]["template"]["metadata"].get("annotations", {}).get("slurmk8s.io/config-hash"))
                                  for o in objects(text) if o["kind"] in ("StatefulSet", "Deployment")) if p}
    before, after = hashes(PROFILE), hashes(PROFILE.replace("uid: 2002", "uid: 2003"))
    assert set(before) >= {"demo-controller", "demo-cpu", "demo-login"}
    assert all(before[n] != after[n] for n in before), (before, after)


def test_no_identity_renders_nothing_of_it() -> None:
    plain = PROFILE.split("  identity:")[0] + "  pools:" + PROFILE.split("  pools:")[1].split("  scheduling:")[0]
    objs = objects(plain)
    assert not [o for o in objs if o["metadata"]["name"] == "demo-identity"]
    for pod in pod_templates(objs).values():
        assert not [v for v in pod["volumes"] if v["name"].startswith("identity")]


def test_volumes_mount_where_the_profile_says() -> None:
    objs = objects()
    pods = pod_templates(objs)
    claim = find(objs, "PersistentVolumeClaim", "demo-home")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Gi"}},
                             "storageClassName": "nfs-rwx"}

    def mounts(pod: str, container: str) -> dict[str, str]:
        c = next(c for c in pods[pod]["containers"] if c["name"] == container)
        return {m["mountPath"]: m["name"] for m in c["volumeMounts"] if m["name"].startswith("vol-")}
    assert mounts("demo-login", "sshd") == {"/home": "vol-home", "/opt/site": "vol-tools"}
    assert {"name": "vol-tools", "configMap": {"name": "site-tools", "defaultMode": 0o444}} in pods["demo-login"]["volumes"]
    assert mounts("demo-cpu", "slurmd") == {"/home": "vol-home", "/scratch": "vol-scratch"}
    assert mounts("demo-controller", "slurmctld") == {}
    vols = {v["name"]: v for v in pods["demo-cpu"]["volumes"]}
    assert vols["vol-home"]["persistentVolumeClaim"] == {"claimName": "demo-home", "readOnly": False}
    assert vols["vol-scratch"]["nfs"] == {"server": "nfs.example", "path": "/export/scratch", "readOnly": False}


def test_homes_are_made_by_the_init_containers_that_mount_home() -> None:
    pods = pod_templates(objects())
    line = "[ -d /home/ada ] || install -d -m 0700 -o 2001 -g 2001 /home/ada"
    for name in ("demo-login", "demo-cpu"):
        init = pods[name]["initContainers"][0]
        assert line in init["command"][-1], name
        assert {"name": "vol-home", "mountPath": "/home"} in init["volumeMounts"], name


@pytest.mark.parametrize("version", ["1.29.0", "1.34.0"])
def test_the_new_objects_validate_strictly(version: str) -> None:
    for obj in objects():
        if obj["metadata"]["name"] in ("demo-identity", "demo-home", "demo-login", "demo-cpu"):
            kubernetes_validate.validate(obj, version, strict=True)


IMAGE_PASSWD = "root:x:0:0:root:/root:/bin/bash\nslurm:x:401:401::/var/lib/slurm:/bin/false\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\nold:x:2001:2001::/home/old:/bin/sh\n"
IMAGE_GROUP = "root:x:0:\nslurm:x:401:\nubuntu:x:1000:\nada:x:1500:\n"


def test_the_init_merge_keeps_the_image_and_lets_the_profile_win(tmp_path: Path) -> None:
    """The init container's shell, run with sh and awk against an image's files."""
    profile = load_profile(PROFILE.encode())
    src, out, etc = tmp_path / "src", tmp_path / "out", tmp_path / "etc"
    for d in (src, out, etc):
        d.mkdir()
    cm = find(list(render(profile).objects), "ConfigMap", "demo-identity")["data"]
    (src / "passwd").write_text(cm["passwd"])
    (src / "group").write_text(cm["group"])
    (etc / "passwd").write_text(IMAGE_PASSWD)
    (etc / "group").write_text(IMAGE_GROUP)
    script = "\n".join(identity_script(profile)).replace("/mnt/identity-files", str(out)) \
        .replace("/mnt/identity", str(src)).replace("/etc/", f"{etc}/")
    run = subprocess.run(["sh", "-ec", script], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert (out / "passwd").read_text() == (
        "root:x:0:0:root:/root:/bin/bash\nslurm:x:401:401::/var/lib/slurm:/bin/false\n"
        "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n" + cm["passwd"])  # 'old' had ada's uid
    assert (out / "group").read_text() == "root:x:0:\nslurm:x:401:\nubuntu:x:1000:\n" + cm["group"]  # 'ada' renamed
    assert f"replaces the image entry old of {etc}/passwd" in run.stderr
    assert oct((out / "passwd").stat().st_mode & 0o777) == "0o644"


def test_login_replicas_share_one_host_key_from_a_create_once_secret() -> None:
    bundle = render(load_profile(PROFILE.replace("login: {replicas: 1}", "login: {replicas: 2}").encode()))
    assert [(s.name, s.key, s.kind) for s in bundle.secrets if s.component == "login"] == \
        [("demo-ssh-host-keys", "ssh_host_ed25519_key", "ssh-host-ed25519")]
    pod = bundle.find("StatefulSet", "demo-login")["spec"]["template"]["spec"]
    assert {"name": "ssh-host-keys", "secret": {"secretName": "demo-ssh-host-keys", "defaultMode": 0o400, "items": [
        {"key": "ssh_host_ed25519_key", "path": "ssh_host_ed25519_key"}]}} in pod["volumes"]
    script = pod["initContainers"][0]["command"][-1]
    assert "install -m 0600 /mnt/ssh-host-keys/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key" in script
    assert "ssh-keygen -A" not in script  # no per-pod keys
    assert "HostKey /etc/ssh/ssh_host_ed25519_key\n" in bundle.find("ConfigMap", "demo-login-config")["data"]["sshd_config"]
    assert not [o for o in bundle.objects if o["kind"] == "Secret"]  # never rendered


def test_daemon_resources_come_from_the_profile() -> None:
    text = PROFILE.replace("  login: {replicas: 1}\n", "  login: {replicas: 1}\n  controller:\n    replicas: 2\n"
                           "    resources: {requests: {cpu: '1', memory: 1Gi}, limits: {cpu: '4', memory: 8Gi}}\n"
                           "  accounting:\n    resources: {limits: {memory: 2Gi}}\n"
                           "    database: {embedded: {resources: {requests: {cpu: 100m}}}}\n")
    objs = objects(text)
    pods = pod_templates(objs)

    def resources(pod: str, container: str) -> dict:
        return next(c for c in pods[pod]["containers"] if c["name"] == container)["resources"]
    assert resources("demo-controller", "slurmctld") == {"requests": {"cpu": "1", "memory": "1Gi"},
                                                         "limits": {"cpu": "4", "memory": "8Gi"}}
    assert resources("demo-accounting", "slurmdbd") == {"requests": {"cpu": "250m", "memory": "256Mi"},
                                                        "limits": {"cpu": "1", "memory": "2Gi"}}
    assert resources("demo-mariadb", "mariadb")["requests"] == {"cpu": "100m", "memory": "512Mi"}
    # two controllers: kept apart by hostname
    term = pods["demo-controller"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"
    assert "affinity" not in pod_templates(objects())["demo-controller"]  # one controller: nothing to spread


def test_a_request_above_its_limit_is_one_located_line() -> None:
    from slurmk8s.errors import ProfileError
    text = PROFILE.replace("  login: {replicas: 1}\n",
                           "  login: {replicas: 1}\n  controller:\n    resources: {requests: {memory: 4Gi}}\n")
    with pytest.raises(ProfileError) as info:
        load_profile(text.encode())
    assert str(info.value).splitlines() == [
        "<profile>:7:36: spec.controller.resources.requests.memory: the memory request 4Gi is above the limit 2Gi"]
