"""Load a profile: bytes -> YAML (with positions) -> schema -> defaults -> model -> checks.

Pure: the caller reads the file; nothing here touches the filesystem.
"""

from __future__ import annotations

import re
from typing import Any

from slurmk8s import versions
from slurmk8s.errors import FieldError, ProfileError
from slurmk8s.profile.checks import check_profile
from slurmk8s.profile.accounting import Storage, load_accounting
from slurmk8s.profile.defaults import default, value_or_default
from slurmk8s.profile.kubevalues import toleration_findings
from slurmk8s.profile.located import Locator
from slurmk8s.profile.model import PowerSaving, Profile, Rollout
from slurmk8s.profile.observe import load_health_checks, load_metrics
from slurmk8s.profile.identity import load_identity, scheduling_with_identity_accounts
from slurmk8s.profile.login import load_login
from slurmk8s.profile.partitions import load_partitions
from slurmk8s.profile.pods import load_pods
from slurmk8s.profile.pools import load_pool
from slurmk8s.profile.resources import load_resources
from slurmk8s.profile.restapi import load_tokens
from slurmk8s.profile.scheduling import load_scheduling
from slurmk8s.profile.repair import repair
from slurmk8s.profile.schema import describe_value, schema_findings
from slurmk8s.profile.sidebyside import load_side_by_side
from slurmk8s.profile.slurm import conf_value, load_images
from slurmk8s.profile.topology import load_topology
from slurmk8s.profile.volumes import load_volumes
from slurmk8s.profile.yamlpos import Positions, format_path, parse


# Real profiles are a few kilobytes; a bound here keeps a huge file from costing minutes and
# gigabytes in the YAML parser before any check could refuse it.
MAX_PROFILE_BYTES = 1024 * 1024

# C0/C1 control characters and Unicode line separators: a value carrying one could start a
# new line in slurm.conf or slurmdbd.conf (StorageHost=db\nPurgeJobAfter=1) or in a manifest.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Fields that never reach a Slurm file and may span lines: a PromQL query in the ScaledObject, a pool's
# health check command (a shell function body in the rendered script).
_MULTILINE_FIELDS = {("spec", "pools", None, "keda", "query"),
                     ("spec", "pools", None, "healthChecks", None, "command")}
# Mappings whose values are whole files (their keys are still checked): spec.slurm.extraFiles.
_MULTILINE_MAPS = {("spec", "slurm", "extraFiles")}


def load_profile(data: bytes, source: str = "<profile>") -> Profile:
    """Parse and validate a profile; raise ProfileError listing every problem."""
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(source, [FieldError(0, 0, "", f"the file is larger than {MAX_PROFILE_BYTES // 2**20} MiB; "
                                                         "a profile is a few kilobytes (is this the right file?)")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ProfileError(source, [FieldError(line, col, "", f"not UTF-8 text: byte 0x{data[e.start]:02x} cannot be decoded")]) from None
    document, positions, errors = parse(text)
    if errors:
        raise ProfileError(source, errors)
    if not isinstance(document, dict):
        raise ProfileError(source, [FieldError(*positions.of(()), "", f"expected a ClusterProfile mapping, found {describe_value(document)}")])
    findings = schema_findings(document, positions)
    # One line per field: a value its pattern already refuses is not reported twice.
    refused = {f.error.path for f in findings}
    unsafe = [(path, e) for path, e in _unsafe_findings(document, positions) if e.path not in refused]
    errors = [f.error for f in findings] + [e for _, e in unsafe]
    # Rules the API server applies across one toleration's fields; no other check reads tolerations.
    errors += [FieldError(*positions.of(path), format_path(path), message)
               for path, message in toleration_findings(document) if format_path(path) not in refused]
    if findings or unsafe:
        # Every problem at once: the cross-field checks also run, on a repaired copy (profile.repair).
        fixed = repair(document, findings, [path for path, _ in unsafe])
        if fixed is not None and not fixed.dropped:
            problems = check_profile(_to_model(fixed.document, source), fixed.document)
            errors += [FieldError(*positions.of(path, key=key), format_path(path), fixed.restore(msg))
                       for path, msg, key in problems if not fixed.touches(path, msg)]
        raise ProfileError(source, errors)
    profile = _to_model(document, source, Locator(document, positions))
    errors += [FieldError(*positions.of(path, key=key), format_path(path), msg)
               for path, msg, key in check_profile(profile, document)]
    if errors:
        raise ProfileError(source, errors)
    return profile


def unsafe_text(document: Any, positions: Positions) -> list[FieldError]:
    """Every key or string value holding a line break or another control character."""
    return [e for _, e in _unsafe_findings(document, positions)]


def _unsafe_findings(document: Any, positions: Positions) -> list[tuple[tuple, FieldError]]:
    errors: list[tuple[tuple, FieldError]] = []

    def problem(text: str, multiline: bool) -> str | None:
        found = _UNSAFE.search(text)
        if multiline:
            found = next((m for m in _UNSAFE.finditer(text) if m.group() not in "\n\t"), None)
        if found is None:
            return None
        ch = found.group()
        what = "a line break" if ch in _LINE_BREAKS else "a control character"
        return (f"{text[:60]!r}{'...' if len(text) > 60 else ''} contains {what} (U+{ord(ch):04X}); values are "
                "written into Slurm and Kubernetes files, where it would break the line")

    def walk(value: Any, path: tuple) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                message = problem(key, False) if isinstance(key, str) else None
                if message:
                    errors.append((path + (key,), FieldError(*positions.of(path + (key,), key=True),
                                                             format_path(path + (key,)), message)))
                else:
                    walk(item, path + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, path + (i,))
        elif isinstance(value, str):
            generic = tuple(None if isinstance(p, int) else p for p in path)
            message = problem(value, generic in _MULTILINE_FIELDS or generic[:-1] in _MULTILINE_MAPS)
            if message:
                errors.append((path, FieldError(*positions.of(path), format_path(path), message)))

    walk(document, ())
    return errors




def _to_model(doc: dict, source: str, locator: Locator | None = None) -> Profile:
    meta, spec = doc["metadata"], doc["spec"]
    slurm = spec.get("slurm", {})
    version = value_or_default(slurm, "version", "spec.slurm.version")
    auth = slurm.get("auth") or versions.dialect(version).default_auth
    images = load_images(slurm.get("images", {}), version)
    controller = spec.get("controller", {})
    cstorage = controller.get("storage", {})
    return Profile(
        name=meta["name"],
        namespace=value_or_default(meta, "namespace", "metadata.namespace"),
        version=version,
        auth=auth,
        srun_port_range=value_or_default(slurm, "srunPortRange", "spec.slurm.srunPortRange"),
        images=images,
        slurm_config=tuple(sorted((k, conf_value(v)) for k, v in slurm.get("config", {}).items())),
        slurm_extra_files=tuple(sorted(slurm.get("extraFiles", {}).items())),
        controller_replicas=value_or_default(controller, "replicas", "spec.controller.replicas"),
        controller_storage=Storage(str(cstorage.get("size", default("spec.controller.storage.size"))),
                                   cstorage.get("storageClassName")),
        accounting=load_accounting(spec.get("accounting", {})),
        login=load_login(spec.get("login", {})),
        restapi_enabled=value_or_default(spec.get("restapi", {}), "enabled", "spec.restapi.enabled"),
        restapi_replicas=value_or_default(spec.get("restapi", {}), "replicas", "spec.restapi.replicas"),
        pools=tuple(sorted((load_pool(p) for p in spec["pools"]), key=lambda p: p.name)),
        partitions=load_partitions(spec),
        network_policy=value_or_default(spec.get("networkPolicy", {}), "enabled", "spec.networkPolicy.enabled"),
        admission_policy=value_or_default(spec.get("admissionPolicy", {}), "enabled", "spec.admissionPolicy.enabled"),
        power_saving=PowerSaving(
            suspend_time=value_or_default(spec.get("powerSaving", {}), "suspendTime", "spec.powerSaving.suspendTime"),
            suspend_timeout=value_or_default(spec.get("powerSaving", {}), "suspendTimeout", "spec.powerSaving.suspendTimeout"),
            resume_timeout=value_or_default(spec.get("powerSaving", {}), "resumeTimeout", "spec.powerSaving.resumeTimeout"),
        ),
        scheduling=load_scheduling(scheduling_with_identity_accounts(spec)),
        side_by_side=load_side_by_side(spec.get("sideBySide")),
        topology=load_topology(spec.get("topology")),
        cluster_domain=value_or_default(spec, "clusterDomain", "spec.clusterDomain"),
        metrics=load_metrics(spec.get("metrics")),
        health_checks=load_health_checks(spec.get("healthChecks"), spec["pools"]),
        rollout=Rollout(drain_timeout=value_or_default(spec.get("rollout", {}), "drainTimeout", "spec.rollout.drainTimeout"),
                        max_unavailable=value_or_default(spec.get("rollout", {}), "maxUnavailable", "spec.rollout.maxUnavailable"),
                        drain_on_cordon=value_or_default(spec.get("rollout", {}), "drainOnCordon", "spec.rollout.drainOnCordon")),
        identity=load_identity(spec.get("identity")),
        restapi_tokens=load_tokens(spec.get("restapi", {})),
        volumes=load_volumes(spec.get("volumes")),
        daemon_resources=load_resources(spec),
        pod_settings=load_pods(spec.get("pods")),
        source=source,
        locator=locator,
    )
