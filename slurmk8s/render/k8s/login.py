"""Login pods: sshd with the Slurm clients and config, keys from the profile, a Service of the chosen type."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.identity import AUTHORIZED_KEYS_DIR, LIVE_USERS, live_command, reload_env, reloader_sidecar
from slurmk8s.render.k8s.volumes import LOGIN as ON_LOGIN, home_roots, shared_volumes
from slurmk8s.render.k8s.common import (
    CONFIG_LIVE, Obj, headless_service, init_config_container, meta, mounts_config, pod_spec, sack_client_mounts,
    sack_volumes, sackd_sidecar, statefulset, volume_config,
)

HOST_KEY = "ssh_host_ed25519_key"
HOST_KEY_SOURCE = "/mnt/ssh-host-keys"
SSHD_CONFIG = """\
# sshd for the login pods of a slurmk8s cluster: keys only, no forwarding.
Port 22
PermitRootLogin {root_login}
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile /etc/ssh/authorized_keys/%u
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
# srun and sbatch need none of these; each would make the login pod a relay into the pod network.
AllowTcpForwarding no
AllowStreamLocalForwarding no
AllowAgentForwarding no
X11Forwarding no
Subsystem sftp internal-sftp
"""


def render_sshd_config(profile: Profile) -> str:
    """sshd_config; root logs in (with spec.login.authorizedKeys) only when spec.identity declares no users."""
    # Declared users log in as themselves. Root on login can become SlurmUser and read slurm.key, so forge any
    # Slurm identity: no key opens it then. Without declared users root is the only account.
    users = profile.identity is not None and bool(profile.identity.users)
    return SSHD_CONFIG.format(root_login="no" if users else "prohibit-password")


# What OpenSSH's privilege separation needs, and no more (one sshd binary with privsep and linux audit: OpenSSH 9.2
# in Debian 12, 9.6 in Ubuntu 24.04, the images `images build` and Slinky ship):
# SETUID, SETGID  the pre-auth child becomes the sshd user, the session the logged-in user (with initgroups);
#                 authorized keys are read with the user's uid (temporarily_use_uid)
# SYS_CHROOT      the pre-auth child chroots to /run/sshd
# CHOWN           a session's pty is given to the logged-in user
# KILL            the root monitor signals children that run as other users (LoginGraceTime, session end)
# AUDIT_WRITE     the login record to the kernel audit log; without it the write fails and sshd ends the session
# NET_BIND_SERVICE port 22
# DAC_OVERRIDE is not among them: every file sshd opens as root is root's (host key, root's keys, /run/sshd),
# and users' key files are read as their owner.
SSHD_CAPABILITIES = ["CHOWN", "SETUID", "SETGID", "SYS_CHROOT", "AUDIT_WRITE", "KILL", "NET_BIND_SERVICE"]


def build_configmap_login(profile: Profile) -> Obj:
    """sshd_config and root's authorized keys."""
    keys = "".join(f"{k}\n" for k in profile.login.authorized_keys)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": meta(profile, naming.login_config_map(profile.name), naming.LOGIN),
            "data": {"authorized_keys": keys, "sshd_config": render_sshd_config(profile)}}


def build_service_login(profile: Profile) -> Obj:
    """ssh to the login pods; the headless twin below gives each pod a DNS name."""
    svc: Obj = {"type": profile.login.service_type,
                "selector": naming.selector_labels(profile.name, naming.LOGIN),
                "ports": [{"name": "ssh", "port": profile.login.service_port, "targetPort": 22, "protocol": "TCP"}]}
    login = profile.login
    if login.external_traffic_policy is not None:
        svc["externalTrafficPolicy"] = login.external_traffic_policy
    if login.load_balancer_ip is not None:
        svc["loadBalancerIP"] = login.load_balancer_ip
    if login.load_balancer_source_ranges:
        svc["loadBalancerSourceRanges"] = list(login.load_balancer_source_ranges)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": meta(profile, naming.component_name(profile.name, naming.LOGIN), naming.LOGIN,
                             annotations=dict(login.service_annotations)),
            "spec": svc}


def build_service_login_pods(profile: Profile) -> Obj:
    """Headless Service that gives each login pod a DNS name (srun callbacks reach it)."""
    return headless_service(profile, naming.login_pods_service(profile.name), naming.LOGIN, [("ssh", 22)],
                            naming.selector_labels(profile.name, naming.LOGIN))


def build_statefulset_login(profile: Profile, config_hash: str) -> Obj:
    """sshd in the foreground with the cluster's one host key (a create-once Secret)."""
    name = naming.component_name(profile.name, naming.LOGIN)
    image = profile.images.login
    volumes = volume_config(profile, CONFIG_LIVE) + [
        {"name": "login-config", "configMap": {"name": naming.login_config_map(profile.name), "defaultMode": 0o444}},
        {"name": "ssh", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "ssh-host-keys", "secret": {"secretName": naming.ssh_host_keys_secret(profile.name), "defaultMode": 0o400,
                                             "items": [{"key": HOST_KEY, "path": HOST_KEY}]}},
    ]
    script = [
        # The kubelet makes emptyDirs 0777, and sshd refuses keys under a world-writable /etc/ssh
        # ("bad ownership or modes for directory /etc/ssh", found on kind).
        "chmod 0755 /etc/ssh",
        "mkdir -m 0755 -p /etc/ssh/authorized_keys",
        "install -m 0600 /mnt/login-config/authorized_keys /etc/ssh/authorized_keys/root",
        "install -m 0644 /mnt/login-config/sshd_config /etc/ssh/sshd_config",
        # One host key for every replica and restart, from the create-once Secret: the Service's
        # address keeps its identity. sshd wants it private to root (0600, not the kubelet's symlink).
        f"install -m 0600 {HOST_KEY_SOURCE}/{HOST_KEY} /etc/ssh/{HOST_KEY}",
    ]
    profile_volumes, profile_mounts = shared_volumes(profile, ON_LOGIN)
    # The users' keys and homes are identity-reload's (and init-config's first pass): no user reaches the template.
    homes = home_roots(profile, ON_LOGIN)
    identity_env = reload_env(profile, AUTHORIZED_KEYS_DIR, homes)
    volumes += profile_volumes
    # The pod's /etc/ssh is an emptyDir, so the image's own ssh config is replaced wholesale.
    ssh_mount: Obj = {"name": "ssh", "mountPath": "/etc/ssh"}
    sshd: Obj = {
        "name": "sshd",
        "image": image,
        "imagePullPolicy": profile.images.pull_policy,
        "command": live_command(profile, ["/bin/sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config"]),
        "ports": [{"name": "ssh", "containerPort": 22, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": 22}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 22}, "periodSeconds": 30, "failureThreshold": 6},
        "resources": profile.daemon_resources.login.as_kubernetes(),
        # No privilege escalation: sshd's own setuid() needs CAP_SETUID, not setuid binaries, and with
        # no_new_privs a user's session cannot gain privileges through su, passwd or newgrp either.
        "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"], "add": SSHD_CAPABILITIES}},
        # Live config: users' commands see a partition change without a new pod.
        "volumeMounts": mounts_config(profile, init=False, config=CONFIG_LIVE, users=LIVE_USERS) + [dict(ssh_mount)] + profile_mounts,
    }
    if profile.auth == "slurm":
        # Clients on a node without slurmd get auth/slurm tokens from sackd's socket in /run/slurm.
        volumes += sack_volumes(profile)
        sshd["volumeMounts"] += sack_client_mounts(profile)
    pod = pod_spec(profile, naming.LOGIN, [sshd],
                   [init_config_container(profile, image, script,
                                          [{"name": "login-config", "mountPath": "/mnt/login-config", "readOnly": True},
                                           {"name": "ssh-host-keys", "mountPath": HOST_KEY_SOURCE, "readOnly": True},
                                           ssh_mount] + profile_mounts, identity_env, config=CONFIG_LIVE)]
                   + reloader_sidecar(profile, image, identity_env,
                                      [dict(ssh_mount)] + [m for m in profile_mounts if m["mountPath"] in homes])
                   + sackd_sidecar(profile, CONFIG_LIVE),
                   volumes)
    return statefulset(profile, name, naming.LOGIN, profile.login.replicas, naming.login_pods_service(profile.name), pod,
                       {naming.ANNOTATION_CONFIG_HASH: config_hash})
