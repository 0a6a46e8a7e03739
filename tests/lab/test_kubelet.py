"""The kubelet's and containerd's rules the lab applies: users, groups, capabilities, volume modes.

Each expectation is what kubelet 1.34 and containerd 1.6 (kind's node here) do, read from
their source (the docstring of slurmk8s.lab.kubelet names the functions).
"""

from __future__ import annotations

import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.lab import kubelet
from slurmk8s.lab.kubelet import ContainerSecurity as C
from slurmk8s.lab.kubelet import PodSecurity as P
from slurmk8s.lab.plan import pods_of
from slurmk8s.render import render

PASSWD = ("root:x:0:0:root:/root:/bin/bash\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
          "slurm:x:401:401::/nonexistent:/usr/sbin/nologin\n"
          "mysql:x:999:999:MariaDB:/nonexistent:/bin/false\n")
GROUP = "root:x:0:\nslurm:x:401:\nmysql:x:999:\ndisk:x:6:mysql,slurm\nadm:x:4:slurm\n"


@pytest.mark.parametrize("fs_user, fs_group, want", [
    (None, None, (0o644, 0)),    # no fsUser, no fsGroup: the volume's defaultMode, root's
    (0, None, (0o600, 0)),       # every container runs as root: 0600 root (ResumeProgram as SlurmUser cannot read)
    (401, None, (0o600, 401)),   # every container runs as 401: 0600, owned by 401
    (None, 401, (0o600, 0)),     # fsGroup only: 0600 root, before the fsGroup pass
    (401, 401, (0o600, 401)),
], ids=["neither", "fs-user-root", "fs-user-401", "fs-group", "both"])
def test_token_mode_and_owner_follow_fs_user_and_fs_group(fs_user, fs_group, want):
    assert kubelet.token_file(kubelet.PROJECTED_DEFAULT_MODE, fs_user, fs_group) == want


def test_the_fs_group_pass_makes_the_token_group_readable_and_nothing_more():
    mode, _ = kubelet.token_file(kubelet.PROJECTED_DEFAULT_MODE, None, 401)
    assert kubelet.fs_group_mode(mode, is_dir=False, read_only=True) == 0o640


@pytest.mark.parametrize("mode, is_dir, read_only, want", [
    (0o644, False, False, 0o664),    # emptyDir file: group rw
    (0o400, False, True, 0o440),     # secret defaultMode 0400: group r
    (0o444, False, True, 0o444),
    (0o555, False, True, 0o555),     # the power scripts (defaultMode 0555)
    (0o777, True, False, 0o2777),    # an emptyDir: setgid
    (0o1777, True, True, 0o3777),    # a Memory volume's tmpfs root: sticky kept, setgid added
    (0o755, True, True, 0o2755),     # the atomic writer's data dir
    (0o700, True, False, 0o2770),
], ids=["rw-file", "ro-0400", "ro-0444", "ro-0555", "emptydir", "tmpfs-root", "data-dir", "private-dir"])
def test_fs_group_mode(mode, is_dir, read_only, want):
    assert kubelet.fs_group_mode(mode, is_dir, read_only) == want


@pytest.mark.parametrize("pod, containers, want", [
    (P(), [C(run_as_user=401), C(run_as_user=401)], 401),
    (P(), [C(run_as_user=0), C(run_as_user=401)], None),     # the controller: root init, 401 daemon
    (P(), [C(run_as_user=401), C()], None),                   # one sets none
    (P(run_as_user=401), [C(), C()], 401),                    # the pod's for all
    (P(run_as_user=0), [C(), C(run_as_user=0)], 0),
    (P(run_as_user=401), [C(), C(run_as_user=999)], None),
], ids=["same", "differ", "one-unset", "pod-level", "all-root", "override-differs"])
def test_fs_user_is_the_run_as_user_every_container_shares(pod, containers, want):
    assert kubelet.fs_user(pod, containers) == want


def test_default_capabilities_are_containerd_s_fourteen():
    assert kubelet.capability_set(C()) == kubelet.RUNTIME_DEFAULT_CAPS
    assert len(kubelet.RUNTIME_DEFAULT_CAPS) == 14 and "SYS_ADMIN" not in kubelet.RUNTIME_DEFAULT_CAPS


@pytest.mark.parametrize("sc, want", [
    (C(drop=("ALL",)), set()),
    (C(add=("CHOWN", "FOWNER", "DAC_OVERRIDE"), drop=("ALL",)), {"CHOWN", "FOWNER", "DAC_OVERRIDE"}),
    (C(add=("NET_BIND_SERVICE",), drop=("ALL",)), {"NET_BIND_SERVICE"}),
    (C(drop=("NET_RAW", "MKNOD")), kubelet.RUNTIME_DEFAULT_CAPS - {"NET_RAW", "MKNOD"}),
    (C(add=("IPC_LOCK",)), kubelet.RUNTIME_DEFAULT_CAPS | {"IPC_LOCK"}),
    (C(add=("cap_sys_nice",)), kubelet.RUNTIME_DEFAULT_CAPS | {"SYS_NICE"}),
    (C(add=("ALL",), drop=("CHOWN",)), set(kubelet.CAPABILITIES) - {"CHOWN"}),
    (C(privileged=True, add=("IPC_LOCK",)), set(kubelet.CAPABILITIES)),
    (C(privileged=True, drop=("ALL",)), set(kubelet.CAPABILITIES)),   # privileged wins over drop
    (C(add=("NOT_A_CAP",), drop=("ALL",)), set()),                      # runc ignores unknown names
], ids=["drop-all", "init-config", "sshd-bind", "drop-some", "add-one", "prefixed-lowercase", "all-but-one",
        "privileged", "privileged-drop-all", "unknown"])
def test_capability_set(sc, want):
    assert kubelet.capability_set(sc) == want


def test_privileged_gets_what_the_runtime_holds_not_every_name_the_kernel_knows():
    held = [c for c in kubelet.CAPABILITIES if c != "SYS_RESOURCE"]
    assert kubelet.capability_set(C(privileged=True), held) == set(held)
    assert "SYS_RESOURCE" not in kubelet.capability_set(C(add=("ALL",)), held)


def _who(pod=P(), sc=C(), image_user="", passwd=PASSWD, group=GROUP):
    return kubelet.identity(pod, sc, image_user, passwd, group)


def test_slurmctld_runs_as_401_with_the_fs_group_and_no_capabilities():
    who = _who(P(fs_group=401), C(run_as_user=401, run_as_group=401, run_as_non_root=True,
                                  allow_privilege_escalation=False, drop=("ALL",)))
    assert (who.uid, who.gid, who.groups, who.no_new_privs) == (401, 401, (4, 6, 401), True)
    assert who.bounding == frozenset() and who.effective == frozenset()


def test_the_fs_group_and_supplemental_groups_join_the_groups():
    who = _who(P(fs_group=2000, supplemental_groups=(3000, 401)), C(run_as_user=999, run_as_group=999))
    assert who.groups == (6, 401, 999, 2000, 3000)  # disk lists mysql; sorted and unique


def test_a_non_root_user_keeps_its_bounding_set_but_nothing_effective():
    who = _who(sc=C(run_as_user=999))
    assert who.bounding == kubelet.RUNTIME_DEFAULT_CAPS and who.effective == frozenset()


def test_root_has_its_bounding_set_effective():
    who = _who(sc=C(run_as_user=0, add=("NET_BIND_SERVICE", "SETUID"), drop=("ALL",)))
    assert who.effective == who.bounding == {"NET_BIND_SERVICE", "SETUID"}


@pytest.mark.parametrize("sc, image_user, want", [
    (C(), "", (0, 0)),                           # no user anywhere: root
    (C(run_as_user=401), "", (401, 401)),        # gid from the image's passwd
    (C(run_as_user=12345), "", (12345, 0)),      # a uid the image does not know: gid 0
    (C(run_as_user=401, run_as_group=7), "", (401, 7)),
    (C(), "999:999", (999, 999)),                # the image's USER (its group part is not passed on)
    (C(), "999:5", (999, 999)),
    (C(), "mysql", (999, 999)),                  # a name, looked up in the image
    (C(run_as_user=65534), "mysql", (65534, 65534)),
], ids=["root", "uid", "unknown-uid", "uid-gid", "image-uid", "image-group-ignored", "image-name", "override-image"])
def test_uid_and_gid(sc, image_user, want):
    who = _who(sc=sc, image_user=image_user)
    assert (who.uid, who.gid) == want


def test_container_overrides_pod():
    who = _who(P(run_as_user=401, run_as_group=401), C(run_as_user=999))
    assert (who.uid, who.gid) == (999, 401)


@pytest.mark.parametrize("pod, sc, image_user, message", [
    (P(run_as_non_root=True), C(run_as_user=0), "", "container's runAsUser breaks non-root policy"),
    (P(run_as_non_root=True), C(), "", "container has runAsNonRoot and image will run as root"),
    (P(), C(run_as_non_root=True), "mysql", "container has runAsNonRoot and image has non-numeric user (mysql)"),
], ids=["run-as-root", "image-root", "image-name"])
def test_run_as_non_root_refusals(pod, sc, image_user, message):
    with pytest.raises(kubelet.SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _who(pod, sc, image_user)


@pytest.mark.parametrize("pod, sc, image_user", [
    (P(run_as_non_root=True), C(run_as_user=999), ""),
    (P(run_as_non_root=True), C(), "999:999"),
    (P(run_as_non_root=True), C(run_as_non_root=False, run_as_user=0), ""),  # the container's says no
], ids=["uid", "image-uid", "container-overrides"])
def test_run_as_non_root_accepts(pod, sc, image_user):
    _who(pod, sc, image_user)


@pytest.mark.parametrize("sc, want", [
    (C(), False),
    (C(allow_privilege_escalation=True), False),
    (C(allow_privilege_escalation=False), True),
    (C(privileged=True), False),
], ids=["unset", "true", "false", "privileged"])
def test_no_new_privs_only_when_escalation_is_refused(sc, want):
    assert _who(sc=sc).no_new_privs is want


def test_identity_spec_names_capabilities_by_kernel_number():
    spec = _who(sc=C(add=("CHOWN", "NET_BIND_SERVICE"), drop=("ALL",))).to_spec()
    assert spec["caps"] == [0, 10] and spec["uid"] == 0 and spec["groups"] == [0]


@pytest.mark.parametrize("command, args, want", [
    ((), (), ("mariadbd", "--user=mysql")),
    (("sh", "-c", "x"), (), ("sh", "-c", "x")),          # a command drops the image's Cmd
    ((), ("--port=3307",), ("--port=3307",)),            # args replace the Cmd (no Entrypoint here)
], ids=["image", "command", "args"])
def test_container_argv(command, args, want):
    assert kubelet.container_argv(command, args, (), ("mariadbd", "--user=mysql")) == want
    assert kubelet.container_argv((), args, ("tini", "--"), ("run",))[:2] == ("tini", "--")


def test_home_comes_from_the_image_s_passwd():
    assert kubelet.home_of(0, PASSWD) == "/root"
    assert kubelet.home_of(401, PASSWD) == "/nonexistent"
    assert kubelet.home_of(4242, PASSWD) == "/"


def test_the_rendered_controller_gives_slurmctld_401_and_the_fs_group():
    bundle = render(read_profile("profiles/kind-dev.yaml"))
    ctl = next(p for p in pods_of(bundle) if p.component == "controller")
    daemon = next(c for c in ctl.containers if c.name == "slurmctld")
    who = kubelet.identity(ctl.security, daemon.security, "", PASSWD, "")
    assert (who.uid, who.gid, who.groups, who.effective, who.no_new_privs) == (401, 401, (401,), frozenset(), True)
    # init-config runs as root and slurmctld as 401: no fsUser, the token is 0600 root, then 0640 group 401
    owner = kubelet.fs_user(ctl.security, [c.security for c in ctl.all_containers])
    mode, uid = kubelet.token_file(kubelet.PROJECTED_DEFAULT_MODE, owner, ctl.security.fs_group)
    assert (kubelet.fs_group_mode(mode, False, True), uid, ctl.security.fs_group) == (0o640, 0, 401)
