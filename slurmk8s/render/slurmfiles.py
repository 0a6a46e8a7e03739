"""Slurm text files (slurm.conf, gres.conf, cgroup.conf, slurmdbd.conf) from the profile.

Templates only lay out what these functions precompute (StrictUndefined).
"""

from __future__ import annotations

import jinja2

from slurmk8s import naming, versions
from slurmk8s.errors import ProfileError
from slurmk8s.profile.located import field_error
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.profile.slurm import MERGED_SLURM_KEYS, option_name, profile_options
from slurmk8s.render.fence import (
    shared_node_names, shared_nodes_have_gpus, shared_partition, shared_slurm_nodes, slurmd_mem_spec_mib,
    task_plugin_param,
)
from slurmk8s.render.jobdefaults import TASK_PROLOG_FILE, global_job_settings, partition_memory_defaults, task_prolog
from slurmk8s.render.topology import pool_segments, topology_data, topology_file_name, topology_plugin

POWER_DIR = "/etc/slurm/power"  # the power ConfigMap, mounted in the controller
HEALTH_DIR = "/opt/slurmk8s/health"  # each pool pod mounts its pool's HealthCheckProgram here (render/k8s/health.py)
HEALTH_PROGRAM = f"{HEALTH_DIR}/check"
JWT_KEY_PATH = "/etc/slurm/jwt_hs256.key"
SLURM_KEY_PATH = "/etc/slurm/slurm.key"


# One Environment per process: it keeps each template it compiles.
ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("slurmk8s.render", "templates"),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    autoescape=False,
)


def _render(template: str, **data: object) -> str:
    return ENV.get_template(template).render(**data)


def gres_of(pool: Pool) -> str | None:
    """A node's Gres= value: gpu[:type]:count."""
    if not pool.gpus:
        return None
    kind = f"gpu:{pool.gpus.type}" if pool.gpus.type else "gpu"
    return f"{kind}:{pool.gpus.count}"


def gpu_device_files(count: int) -> str:
    """gres.conf File= for count GPUs."""
    return "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"


def auth_lines(profile: Profile) -> list[str]:
    """Extra auth lines shared by slurm.conf and slurmdbd.conf."""
    lines = []
    if profile.restapi_enabled:
        lines += ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={JWT_KEY_PATH}"]
    return lines


def slurmctld_parameters(profile: Profile) -> list[str]:
    """SlurmctldParameters the cluster needs."""
    # slurmd pods fetch their config from slurmctld (render/k8s/slurmd.py).
    params = ["enable_configless"]
    if versions.dialect(profile.version).needs_cloud_reg_addrs:
        params.append("cloud_reg_addrs")
    if any(p.elastic for p in profile.pools):
        # A suspended node is idle again at once, so a new job may resume it.
        params.append("idle_on_node_suspend")
    return params


def merged_options(profile: Profile, key: str, generated: list[str]) -> list[str]:
    """The options of list-valued key (profile/slurm.py MERGED_SLURM_KEYS): the generator's, then those
    spec.slurm.config adds that the generator does not already write."""
    names = {option_name(o): o for o in generated}
    out = list(generated)
    for option in profile_options(profile, key):
        name = option_name(option)
        if name not in names:
            out.append(option)
            names[name] = option
        elif names[name].lower() != option.lower():  # the generator's value is one the cluster needs
            spelled = next(k for k, _ in profile.slurm_config if k.lower() == key.lower())
            raise ProfileError(profile.source, [field_error(
                profile.locator, ("spec", "slurm", "config", spelled),
                f"option '{option}': the generator writes {key} option '{names[name]}'; leave it out")])
    return out


def power_settings(profile: Profile) -> dict[str, object] | None:
    """Power-saving settings when a pool is elastic; the nodes that never suspend are excluded."""
    if not any(p.elastic for p in profile.pools):
        return None
    always_on = [naming.slurm_node_range(p.name, p.min_replicas if p.elastic else p.max_replicas)
                 for p in profile.pools if (p.min_replicas if p.elastic else p.max_replicas)]
    # Shared nodes are CLOUD nodes too, but no pool's StatefulSet can resume them.
    always_on += shared_node_names(profile)
    ps = profile.power_saving
    return {"dir": POWER_DIR, "suspend_time": ps.suspend_time, "suspend_timeout": ps.suspend_timeout,
            "resume_timeout": ps.resume_timeout, "exclude": ",".join(always_on)}


# Enforced when the profile puts accounts or QoS into slurmdbd: without an association no job
# runs, limits and QoS hold, and `safe` keeps a job from starting that a TRES-minutes limit would kill.
ACCOUNTING_ENFORCE = "associations,limits,qos,safe"


def scheduling_settings(profile: Profile) -> list[tuple[str, str]]:
    """slurm.conf (key, value) pairs of spec.scheduling, in the order they are written."""
    s = profile.scheduling
    out = [("SchedulerType", f"sched/{s.scheduler}")]
    params: list[str] = []
    if s.scheduler == "backfill":
        params = (["bf_continue"] if s.bf_continue else []) + [
            f"bf_interval={s.bf_interval}", f"bf_max_job_test={s.bf_max_job_test}", f"bf_window={s.bf_window}"]
    params = merged_options(profile, "SchedulerParameters", params)  # with builtin: the profile's alone
    if params:
        out.append(("SchedulerParameters", ",".join(params)))
    out.append(("PriorityType", f"priority/{s.priority}"))
    if s.priority == "multifactor":
        w = s.weights
        out += [("PriorityWeightFairshare", str(w.fairshare)), ("PriorityWeightAge", str(w.age)),
                ("PriorityWeightJobSize", str(w.job_size)), ("PriorityWeightPartition", str(w.partition)),
                ("PriorityWeightQOS", str(w.qos)), ("PriorityDecayHalfLife", s.decay_half_life),
                ("PriorityMaxAge", s.max_age), ("PriorityCalcPeriod", str(s.calc_period))]
    if s.preemption != "none":
        out += [("PreemptType", f"preempt/{s.preemption}"), ("PreemptMode", s.preempt_mode.upper())]
    if s.manages_tree and profile.accounting.enabled:
        out.append(("AccountingStorageEnforce", ACCOUNTING_ENFORCE))
    return out


def drains_on_cordon(profile: Profile) -> bool:
    """spec.rollout.drainOnCordon in effect: pool pods only (side-by-side nodes mount no HealthCheckProgram)."""
    return profile.rollout.drain_on_cordon and bool(profile.pools) and not profile.side_by_side


def runs_health_program(profile: Profile) -> bool:
    """slurmd runs HealthCheckProgram: for spec.healthChecks, or to follow its Kubernetes node's cordon."""
    return profile.health_checks.enabled or drains_on_cordon(profile)


def observe_settings(profile: Profile) -> list[tuple[str, str]]:
    """slurm.conf keys of spec.metrics and spec.healthChecks (docs/metrics.md, docs/health-checks.md)."""
    out = []
    if profile.metrics.enabled:
        out.append(("MetricsType", "metrics/openmetrics"))
    if runs_health_program(profile):
        out += [("HealthCheckProgram", HEALTH_PROGRAM), ("HealthCheckInterval", str(profile.health_checks.interval)),
                ("HealthCheckNodeState", "ANY")]
    return out


def disable_root_jobs(profile: Profile) -> bool:
    """Whether slurm.conf refuses root's jobs: when spec.identity declares users, unless spec.slurm.config says."""
    # Without declared users root is the only account (the quickstart submits as root), so it keeps its jobs.
    declared = profile.identity is not None and bool(profile.identity.users)
    return declared and not any(key.lower() == "disablerootjobs" for key, _ in profile.slurm_config)


def render_slurm_conf(profile: Profile) -> str:
    """slurm.conf: controllers, auth, plugins, accounting, every node of every pool, partitions."""
    nodes = [
        {
            "names": seg.node_names,
            "hostnames": naming.statefulset_hostname_range(seg.statefulset, seg.slots),
            "cpus": p.cpus,
            "real_memory": p.memory_mib,
            "mem_spec_limit": slurmd_mem_spec_mib(p.memory_mib),
            "gres": gres_of(p),
            "features": ",".join(p.features),
            "state": "CLOUD",
        }
        # One NodeName line per segment: a pool split over topology leaves has one per leaf.
        for p in profile.pools for seg in pool_segments(profile, p)
    ] + shared_slurm_nodes(profile)
    max_replicas = {p.name: p.max_replicas for p in profile.pools}
    partitions = [
        {
            "name": part.name,
            "nodes": ",".join(naming.slurm_node_range(name, max_replicas[name]) for name in part.pools),
            "default": part.default,
            "max_time": part.max_time,
            "extra": list(part.config) + partition_memory_defaults(profile, part),
        }
        for part in profile.partitions
    ] + [p for p in [shared_partition(profile)] if p]
    auth = "auth/slurm" if profile.auth == "slurm" else "auth/munge"
    # A key spec.slurm.config sets is written once, in its section: the generator's default for it is left out.
    profile_keys = frozenset(key.lower() for key, _ in profile.slurm_config)
    return _render(
        "slurm.conf.j2",
        cluster=profile.name,
        version=profile.version,
        controllers=naming.controller_hosts(profile.name, profile.controller_replicas),
        srun_port_range=profile.srun_port_range,
        disable_root_jobs=disable_root_jobs(profile),
        auth_type=auth,
        cred_type=auth.replace("auth/", "cred/"),
        auth_extra=auth_lines(profile),
        gres_types="gpu" if any(p.gpus for p in profile.pools) or shared_nodes_have_gpus(profile) else "",
        accounting_host=naming.component_name(profile.name, naming.ACCOUNTING) if profile.accounting.enabled else "",
        extra=[(k, v) for k, v in profile.slurm_config if k.lower() not in MERGED_SLURM_KEYS],  # merged in place
        profile_keys=profile_keys,
        derived=global_job_settings(profile),
        nodes=nodes,
        partitions=partitions,
        slurmctld_parameters=",".join(merged_options(profile, "SlurmctldParameters", slurmctld_parameters(profile))),
        power=power_settings(profile),
        task_plugin_param=task_plugin_param(profile),
        scheduling=scheduling_settings(profile),
        topology_plugin=topology_plugin(profile),
        topology_file=topology_file_name(profile),
        observe=[(k, v) for k, v in observe_settings(profile) if k.lower() not in profile_keys],
    )


def render_gres_conf(profile: Profile) -> str | None:
    """gres.conf listing each GPU pool's device files, or None without GPUs."""
    lines = [
        {"nodes": naming.slurm_node_range(p.name, p.max_replicas), "type": p.gpus.type,
         "files": gpu_device_files(p.gpus.count)}
        for p in profile.pools if p.gpus
    ]
    return _render("gres.conf.j2", cluster=profile.name, lines=lines) if lines else None


def render_cgroup_conf(profile: Profile) -> str:
    """cgroup.conf: cgroup/v2 confining cores, memory and devices."""
    return _render("cgroup.conf.j2", cluster=profile.name)


def render_slurmdbd_conf(profile: Profile) -> str | None:
    """slurmdbd.conf without StoragePass (added from a Secret at pod start)."""
    acc = profile.accounting
    if not acc.enabled:
        return None
    if acc.external:
        host, port, user, loc = acc.external.host, acc.external.port, acc.external.user, acc.external.database
        secret, key = acc.external.password.name, acc.external.password.key
    else:
        host, port, user, loc = naming.component_name(profile.name, naming.DATABASE), 3306, "slurm", "slurm_acct_db"
        secret, key = naming.db_password_secret(profile.name), "password"
    auth = "auth/slurm" if profile.auth == "slurm" else "auth/munge"
    return _render(
        "slurmdbd.conf.j2", cluster=profile.name, auth_type=auth, auth_extra=auth_lines(profile),
        dbd_host=naming.accounting_host(profile.name), storage_host=host, storage_port=port,
        storage_user=user, storage_loc=loc, password_secret=secret, password_key=key, extra=acc.config,
    )


def render_slurm_files(profile: Profile) -> dict[str, str]:
    """The files of the shared Slurm ConfigMap, by file name."""
    files = {"slurm.conf": render_slurm_conf(profile), "cgroup.conf": render_cgroup_conf(profile)}
    gres = render_gres_conf(profile)
    if gres:
        files["gres.conf"] = gres
    topology_file = topology_file_name(profile)
    if topology_file:
        files[topology_file] = _render(f"{topology_file}.j2", **topology_data(profile))
    prolog = task_prolog(profile)
    if prolog:
        files[TASK_PROLOG_FILE] = prolog
    files.update(profile.slurm_extra_files)  # spec.slurm.extraFiles (names checked not to collide)
    return dict(sorted(files.items()))
