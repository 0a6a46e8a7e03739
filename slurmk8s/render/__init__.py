"""profile -> Bundle: pure and deterministic (no I/O, no clock, no randomness, no kubernetes)."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render import hostfiles
from slurmk8s.render.apirules import refuse_api_violations
from slurmk8s.render.bundle import Bundle, RequiredSecret
from slurmk8s.render.k8s import (
    accounting, accounts, clusterwide, controller, health, identity, keda, login, metrics, podextras, podreplacement,
    dbbackup, power, restapi, security, sidebyside, tokens, upgradecheck, volumes, workers,
)
from slurmk8s.render.k8s.accounts import manages_accounts, render_accounts_file
from slurmk8s.render.k8s.common import auth_key_name, config_hash, named_by_content, service_account
from slurmk8s.render.restarts import CLIENT, CONTROLLER, SLURMD, restart_settings, slurmd_start_files
from slurmk8s.render.slurmfiles import render_slurm_files, render_slurmdbd_conf

__all__ = ["Bundle", "RequiredSecret", "render"]


def required_secrets(profile: Profile) -> tuple[RequiredSecret, ...]:
    """The Secrets the bundle refers to and `up` must create (never regenerated)."""
    c = profile.name
    secrets = [RequiredSecret(naming.auth_secret(c), auth_key_name(profile), auth_key_name(profile), naming.CONTROLLER)]
    if profile.accounting.enabled and profile.accounting.external is None:
        secrets.append(RequiredSecret(naming.db_password_secret(c), "password", "password", naming.DATABASE))
    if profile.restapi_enabled:
        secrets.append(RequiredSecret(naming.jwt_secret(c), "jwt_hs256.key", "jwt", naming.RESTAPI))
        # Created empty: the tokens Job fills them (render/k8s/tokens.py).
        secrets += [RequiredSecret(naming.token_secret(c, t.user), "token", "empty", naming.TOKENS)
                    for t in profile.restapi_tokens]
    if profile.login.replicas:
        secrets.append(RequiredSecret(naming.ssh_host_keys_secret(c), login.HOST_KEY, "ssh-host-ed25519", naming.LOGIN))
    return tuple(secrets)


def render(profile: Profile) -> Bundle:
    """Every Kubernetes object and Slurm file of a cluster, in apply order."""
    files = podreplacement.with_busy_marking(profile, render_slurm_files(profile))
    dbd_conf = render_slurmdbd_conf(profile)
    slurm_hash = config_hash(files, profile.auth)
    # Login and slurmd pods follow the identity ConfigMap without a restart (render/k8s/identity.py). slurmctld,
    # slurmdbd and slurmrestd read the users at start only: a change of who exists (not of keys or homes)
    # restarts them, which running jobs survive. Each pod template hashes only what needs a restart of its pod
    # (render/restarts.py); the rest reaches the running daemons with `scontrol reconfigure` (`up` runs it).
    # None where the users were: a profile without users keeps the hashes it had.
    identity_map = identity.build_configmap_identity(profile)
    known_ids = identity.snapshot_ids(profile)
    conf, version = files["slurm.conf"], profile.version
    start_files = slurmd_start_files(files)  # cgroup.conf, gres.conf without node indices, scripts
    client_hash = config_hash(restart_settings(conf, CLIENT, version), profile.auth, None)
    slurmd_hash = config_hash(restart_settings(conf, SLURMD, version), start_files, profile.auth, None)
    controller_hash = config_hash(restart_settings(conf, CONTROLLER, version), profile.auth, known_ids)
    snapshot_client_hash = config_hash(client_hash, known_ids) if known_ids else client_hash
    acc = profile.accounting
    embedded_db = acc.enabled and acc.external is None
    components = [naming.CONTROLLER, naming.WORKER]
    if acc.enabled:
        components.append(naming.ACCOUNTING)
    if embedded_db:
        components.append(naming.DATABASE)
    if profile.login.replicas:
        components.append(naming.LOGIN)
    if profile.restapi_enabled:
        components.append(naming.RESTAPI)

    objects: list[dict] = [clusterwide.build_namespace(profile)]
    objects += [service_account(profile, c) for c in naming.COMPONENTS if c in components]
    elastic = bool(power.elastic_pools(profile))
    if elastic:
        objects += [power.build_role_power(profile), power.build_rolebinding_power(profile)]
    objects.append(clusterwide.build_configmap_slurm(profile, files))
    if identity_map:
        objects.append(identity_map)
    if elastic:
        objects.append(power.build_configmap_power(profile))
    if acc.enabled:
        assert dbd_conf is not None  # render_slurmdbd_conf is None only when accounting is disabled
        objects.append(accounting.build_configmap_slurmdbd(profile, dbd_conf))
    if profile.login.replicas:
        objects.append(login.build_configmap_login(profile))
    if health.health_on(profile):
        objects.append(health.build_configmap_health(profile))
    objects += volumes.build_pvcs_volumes(profile)
    shared_claim = controller.build_pvc_controller_shared(profile)
    if shared_claim:
        objects.append(shared_claim)
    if embedded_db:
        objects.append(accounting.build_service_database(profile))
    if acc.enabled:
        objects.append(accounting.build_service_accounting(profile))
    objects.append(controller.build_service_controller(profile))
    objects.append(workers.build_service_nodes(profile))
    if profile.login.replicas:
        objects += [login.build_service_login_pods(profile), login.build_service_login(profile)]
    if profile.restapi_enabled:
        objects.append(restapi.build_service_restapi(profile))
    if profile.network_policy:
        objects.append(clusterwide.build_networkpolicy_slurm(profile))
        if embedded_db:
            objects.append(clusterwide.build_networkpolicy_database(profile))
        if profile.login.replicas:
            objects.append(clusterwide.build_networkpolicy_login(profile))
        if profile.restapi_enabled:
            objects.append(clusterwide.build_networkpolicy_restapi(profile))
    objects += metrics.build_metrics_objects(profile)  # Service, policy, monitor, dashboard (spec.metrics)
    objects += podreplacement.build_busy_policy(profile)  # in force before the token it confines is used
    objects += podreplacement.build_busy_objects(profile)
    objects += health.build_node_reader(profile)
    objects += [pdb for p in profile.pools for pdb in podreplacement.build_pdbs_pool(profile, p)]
    if embedded_db:
        objects.append(accounting.build_statefulset_database(profile))
    if acc.enabled:
        objects.append(accounting.build_statefulset_accounting(profile, config_hash(snapshot_client_hash, dbd_conf)))
    # The power scripts are a mounted ConfigMap run afresh each time: no restart for them.
    objects.append(controller.build_statefulset_controller(profile, controller_hash))
    objects += [health.with_health_check(profile, sts)
                for p in profile.pools for sts in workers.build_statefulsets_pool(profile, p, slurmd_hash)]
    objects += sidebyside.build_daemonsets_shared(profile, slurmd_hash)
    if profile.login.replicas:
        objects.append(login.build_statefulset_login(profile, config_hash(client_hash, login.build_configmap_login(profile)["data"])))
    if profile.restapi_enabled:
        objects.append(restapi.build_deployment_restapi(profile, snapshot_client_hash))
    objects += [so for p in profile.pools if p.keda for so in keda.build_scaledobjects_pool(profile, p)]
    objects += tokens.build_tokens_objects(profile)
    objects += dbbackup.build_db_backup_objects(profile)

    objects = [security.with_scan_annotations(podextras.with_pod_settings(profile, podreplacement.with_rollout_fields(profile, o)))
               for o in objects]
    hooks = [security.with_scan_annotations(podextras.with_pod_settings(profile, accounts.build_job_accounts(profile, slurm_hash)))] \
        if manages_accounts(profile) else []
    hooks += [security.with_scan_annotations(podextras.with_pod_settings(profile, h))
              for h in upgradecheck.build_hooks_upgrade_check(profile)]
    if profile.pools:
        templates = [o["spec"]["template"] for o in objects if o["kind"] == "StatefulSet"
                     and o["metadata"]["labels"].get(naming.LABEL_COMPONENT) == naming.WORKER]
        hooks += [security.with_scan_annotations(podextras.with_pod_settings(profile, h))
                  for h in podreplacement.build_hooks_rollout(profile, templates, files)]
    hooks = [named_by_content(h) for h in hooks]
    refuse_api_violations(profile, objects + hooks)  # also run by `validate`, which renders
    out_files = dict(files)
    if dbd_conf:
        out_files["slurmdbd.conf"] = dbd_conf
    out_files.update(hostfiles.render_host_files(profile))  # hosts/<shape>/... (side-by-side)
    accounts_file = render_accounts_file(profile)  # for review; `up` (or the GitOps Job) applies the tree
    if accounts_file:
        out_files["accounts.sh"] = accounts_file
    return Bundle(profile.name, profile.namespace, profile.version, tuple(objects),
                  dict(sorted(out_files.items())), required_secrets(profile), profile.cluster_domain, tuple(hooks))
