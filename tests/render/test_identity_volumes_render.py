"""Declared users and profile volumes in the rendered pods; no change of users reaches a pod template
(tests/render/test_identity_reload.py runs the merge itself)."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from slurmk8s import naming
from slurmk8s.profile import load_profile
from slurmk8s.render import render

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


LIVE_PODS = ("demo-cpu", "demo-login")  # root daemons: they link /etc/passwd to the reloaded files


def test_every_slurm_container_sees_the_merged_files_read_only() -> None:
    pods = pod_templates(objects())
    assert set(pods) >= {"demo-controller", "demo-cpu", "demo-login", "demo-accounting", "demo-restapi"}
    snapshot = {"/etc/group": {"name": "identity-files", "mountPath": "/etc/group", "subPath": "group", "readOnly": True},
                "/etc/passwd": {"name": "identity-files", "mountPath": "/etc/passwd", "subPath": "passwd",
                                "readOnly": True}}
    live = {"/run/slurmk8s-identity": {"name": "identity-files", "mountPath": "/run/slurmk8s-identity", "readOnly": True}}
    for name, pod in pods.items():
        if name == "demo-mariadb":
            continue
        for c in pod["containers"] + pod["initContainers"][1:]:
            if c["name"] == "identity-reload":
                continue
            got = {m["mountPath"]: m for m in c["volumeMounts"] if m["name"] == "identity-files"}
            follows = name in LIVE_PODS and c["name"] != "sackd"  # login's sackd runs as SlurmUser: no links
            assert got == (live if follows else snapshot), (name, c["name"])
            if follows:
                assert c["command"][2].startswith("ln -sfn /run/slurmk8s-identity/passwd /etc/passwd && "
                                                  "ln -sfn /run/slurmk8s-identity/group /etc/group && exec "), c["name"]
        init = pod["initContainers"][0]
        assert "\nsh /mnt/identity/reload.sh once\n" in init["command"][-1], name


def test_live_pods_run_the_reloader_on_the_configmap_without_subpath() -> None:
    pods = pod_templates(objects())
    for name in LIVE_PODS:
        sidecar = next(c for c in pods[name]["initContainers"] if c["name"] == "identity-reload")
        assert sidecar["restartPolicy"] == "Always"
        assert sidecar["command"] == ["/bin/sh", "/mnt/identity/reload.sh", "watch"]
        mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
        assert mounts["/mnt/identity"] == {"name": "identity", "mountPath": "/mnt/identity", "readOnly": True}
        assert mounts["/mnt/identity-files"] == {"name": "identity-files", "mountPath": "/mnt/identity-files"}
        assert not [m for m in sidecar["volumeMounts"] if "subPath" in m], name
        assert {"name": "IDENTITY_HOMES", "value": "/home"} in sidecar["env"]
    login = next(c for c in pods["demo-login"]["initContainers"] if c["name"] == "identity-reload")
    assert {"name": "IDENTITY_KEYS", "value": "/etc/ssh/authorized_keys"} in login["env"]
    assert {"name": "ssh", "mountPath": "/etc/ssh"} in login["volumeMounts"]
    for name in ("demo-controller", "demo-accounting", "demo-restapi"):
        assert not [c for c in pods[name]["initContainers"] if c["name"] == "identity-reload"], name


def test_the_configmap_carries_the_reloader() -> None:
    from slurmk8s.render.k8s.identity import render_reload_script
    assert find(objects(), "ConfigMap", "demo-identity")["data"]["reload.sh"] == render_reload_script()


def pod_template_objects(text: str) -> dict[str, dict]:
    """Every workload's and hook Job's name -> its whole pod template (metadata with the hashes, spec)."""
    bundle = render(load_profile(text.encode()))
    return {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"] for o in list(bundle.objects) + list(bundle.hooks)
            if "template" in o.get("spec", {})}


CHANGES = {
    "a user added": [("      - {name: max, uid: 2002, gid: 3000, shell: /bin/sh}\n",
                      "      - {name: max, uid: 2002, gid: 3000, shell: /bin/sh}\n      - {name: bob, uid: 2003}\n")],
    "a user removed": [("      - {name: max, uid: 2002, gid: 3000, shell: /bin/sh}\n", ""),
                       ("members: [ada, max]", "members: [ada]")],
    "a uid changed": [("uid: 2002", "uid: 2004")],
    "an ssh key added": [(f'sshKeys: ["{KEY}"]', f'sshKeys: ["{KEY}", "{KEY.replace("ada@", "ada2@")}"]')],
    "an ssh key removed": [(f', sshKeys: ["{KEY}"]', "")],
    "a group changed": [("members: [ada, max]", "members: [ada]")],
}


# The pods that read the users only at start (they run as their own user: no reloaded /etc/passwd).
AT_START = {"StatefulSet/demo-controller", "StatefulSet/demo-accounting", "Deployment/demo-restapi"}
WHO_EXISTS = {"a user added", "a user removed", "a uid changed", "a group changed"}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_an_identity_change_leaves_every_live_pod_template_byte_identical(change: str) -> None:
    """Keys change no template; a change of who exists only the config hash of the daemons that read users at start."""
    edited = PROFILE
    for old, new in CHANGES[change]:
        assert old in edited, old
        edited = edited.replace(old, new)
    before, after = pod_template_objects(PROFILE), pod_template_objects(edited)
    assert set(before) >= {"StatefulSet/demo-controller", "StatefulSet/demo-cpu", "StatefulSet/demo-login",
                           "StatefulSet/demo-accounting", "Deployment/demo-restapi"}
    assert before.keys() == after.keys()  # a hook Job renamed would be a new pod
    hash_only = lambda t: {**t, "metadata": {**t["metadata"], "annotations": {
        k: v for k, v in t["metadata"]["annotations"].items() if k != "slurmk8s.io/config-hash"}}}
    for name in before:
        if change in WHO_EXISTS and name in AT_START:
            assert before[name] != after[name] and hash_only(before[name]) == hash_only(after[name]), name
        else:
            assert yaml.safe_dump(before[name], sort_keys=True) == yaml.safe_dump(after[name], sort_keys=True), name
    old_cm = find(objects(PROFILE), "ConfigMap", "demo-identity")["data"]
    new_cm = find(objects(edited), "ConfigMap", "demo-identity")["data"]
    assert old_cm != new_cm  # the change is there: in the ConfigMap only


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


def test_homes_are_made_in_the_pods_that_mount_home() -> None:
    pods = pod_templates(objects())
    for name in ("demo-login", "demo-cpu"):
        init = pods[name]["initContainers"][0]
        assert {"name": "IDENTITY_HOMES", "value": "/home"} in init["env"], name
        assert {"name": "vol-home", "mountPath": "/home"} in init["volumeMounts"], name
        assert "/home/ada" not in yaml.safe_dump(pods[name]), name  # no user in the template


@pytest.mark.parametrize("version", ["1.29.0", "1.34.0"])
def test_the_new_objects_validate_strictly(version: str) -> None:
    for obj in objects():
        if obj["metadata"]["name"] in ("demo-identity", "demo-home", "demo-login", "demo-cpu"):
            kubernetes_validate.validate(obj, version, strict=True)


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


@pytest.mark.parametrize("section, lines", [
    ("controller", "  login: {replicas: 1}\n  controller:\n    resources: {requests: {memory: 4Gi}}\n"),
    ("login", "  login:\n    replicas: 1\n    resources: {requests: {memory: 4Gi}}\n"),
])
def test_a_request_above_its_limit_is_one_located_line(section: str, lines: str) -> None:
    from slurmk8s.errors import ProfileError
    with pytest.raises(ProfileError) as info:
        load_profile(PROFILE.replace("  login: {replicas: 1}\n", lines).encode())
    assert str(info.value).splitlines() == [
        f"<profile>:7:36: spec.{section}.resources.requests.memory: the memory request 4Gi is above the limit 2Gi"]


def test_login_resources_size_the_sshd_container_where_users_work() -> None:
    def sshd(text: str) -> dict:
        return next(c for c in pod_templates(objects(text))["demo-login"]["containers"] if c["name"] == "sshd")["resources"]
    assert sshd(PROFILE) == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    text = PROFILE.replace("  login: {replicas: 1}\n",
                           "  login:\n    replicas: 1\n    resources: {requests: {cpu: '2', memory: 4Gi}, limits: {memory: 32Gi}}\n")
    assert sshd(text) == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "32Gi"}}
