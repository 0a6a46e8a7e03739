"""Pod hardening every workload gets, and the one table of security-scan findings we accept, with reasons.

Each accepted finding becomes a `checkov.io/skip<N>: CKV_K8S_xx=reason` annotation on the workload,
so a scanner run over the rendered tree shows why a check does not apply instead of failing it.
tests/output/test_checkov.py proves both directions: with the annotations nothing fails, and every
annotation names a check that really fails without it.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.render.k8s.common import Obj

SECCOMP_RUNTIME_DEFAULT = {"seccompProfile": {"type": "RuntimeDefault"}}
SKIP_ANNOTATION_PREFIX = "checkov.io/skip"

# Reasons shared by several components.
_PULL = "images are pinned by Slurm version tag; IfNotPresent lets kind and air-gapped nodes use preloaded images"
_DIGEST = "images are chosen by Slurm version tag; set spec.slurm.images to digests where policy demands it"
_ROOTFS = "Slurm daemons write state, pid and config files inside the image (/etc/slurm, /var/spool, /run)"
_UID_SLURM = "the Slurm images own their files as the slurm user (uid 401); another uid breaks file ownership"
_CAPS_INIT = "init-config drops ALL and adds back only CHOWN/FOWNER/DAC_OVERRIDE to set key ownership"

# component -> {check: reason}: the findings accepted for every pod of that component.
ACCEPTED: dict[str, dict[str, str]] = {
    naming.DATABASE: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": "MariaDB writes its socket, pid and temp files outside the data volume",
        "CKV_K8S_28": "the MariaDB image entrypoint needs its default capability set; NET_RAW is not used",
        "CKV_K8S_35": "the official MariaDB image reads MARIADB_PASSWORD from the environment only",
        "CKV_K8S_37": "the MariaDB image entrypoint switches users and needs its default capability set",
        "CKV_K8S_40": "the official MariaDB image owns its data as uid 999",
        "CKV_K8S_43": _DIGEST,
    },
    naming.ACCOUNTING: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": _ROOTFS,
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_35": "init-config appends StoragePass to slurmdbd.conf from the Secret; it never reaches slurmdbd's env",
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.CONTROLLER: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": _ROOTFS,
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.WORKER: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_16": "slurmd creates and confines the jobs' cgroups, which needs a privileged container",
        "CKV_K8S_20": "privileged slurmd (cgroups for jobs) implies privilege escalation",
        "CKV_K8S_22": _ROOTFS,
        "CKV_K8S_23": "slurmd runs as root: it starts job steps as the submitting user",
        "CKV_K8S_25": "IPC_LOCK lets RDMA/NCCL jobs pin memory",
        "CKV_K8S_28": "privileged slurmd keeps the default capability set that jobs expect",
        "CKV_K8S_37": "privileged slurmd keeps the default capability set that jobs expect",
        "CKV_K8S_40": "slurmd runs as root: it starts job steps as the submitting user",
        "CKV_K8S_43": _DIGEST,
    },
    naming.LOGIN: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": "sshd writes host keys and per-session files in the image",
        "CKV_K8S_23": "sshd runs as root to log users in",
        "CKV_K8S_25": "sshd drops ALL and adds back only what privilege separation needs (login.py SSHD_CAPABILITIES); "
                      "init-config only CHOWN/FOWNER/DAC_OVERRIDE to set key ownership",
        "CKV_K8S_40": "sshd runs as root to log users in",
        "CKV_K8S_43": _DIGEST,
    },
    naming.ACCOUNTS: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": "init-config writes the config and installs the key in the image's /etc/slurm, as in every Slurm pod",
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.ROLLOUT: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": "init-config writes the config and installs the key in the image's /etc/slurm, as in every Slurm pod",
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.DB_BACKUP: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_40": "the MariaDB image's mysql user (uid 999) owns the dumps, as it owns the database",
        "CKV_K8S_43": _DIGEST,
    },
    naming.TOKENS: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": "init-config writes the config and installs the key in the image's /etc/slurm, as in every Slurm pod",
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.UPGRADE_CHECK: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_40": _UID_SLURM,
        "CKV_K8S_43": _DIGEST,
    },
    naming.RESTAPI: {
        "CKV_K8S_15": _PULL,
        "CKV_K8S_22": _ROOTFS,
        "CKV_K8S_25": _CAPS_INIT,
        "CKV_K8S_43": _DIGEST,
    },
}

# Extra findings of pods that run the munged sidecar (munge auth, Slurm 22.05 era images).
ACCEPTED_WITH_MUNGE: dict[str, str] = {
    "CKV_K8S_28": "munged runs as root with the default capability set to read its root-owned key",
    "CKV_K8S_37": "munged runs as root with the default capability set to read its root-owned key",
}

# Extra findings of pods that call the API: slurmctld (power saving, busy marks) and the rollout Job.
ACCEPTED_WITH_TOKEN: dict[str, str] = {
    "CKV_K8S_38": "the pod calls the API with a Role limited to named objects: the pool StatefulSets' scale "
                  "(power saving), pool pod labels (busy marks), get/delete of pool pods (the rollout Job), "
                  "get of the Slurm StatefulSets (the upgrade check), patch of the token Secrets (the tokens Job)",
}


def accepted_findings(obj: Obj) -> dict[str, str]:
    """check id -> reason for the findings accepted on this workload ({} for other kinds)."""
    if obj.get("kind") not in naming.POD_TEMPLATE_KINDS + ("CronJob",):
        return {}
    component = obj["metadata"].get("labels", {}).get(naming.LABEL_COMPONENT)
    found = dict(ACCEPTED.get(component, {}))
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    pod = spec["template"]["spec"]
    if any(c["name"] == "munged" for c in pod.get("initContainers", [])):
        found.update(ACCEPTED_WITH_MUNGE)
    if pod.get("automountServiceAccountToken") is not False:
        found.update(ACCEPTED_WITH_TOKEN)
    return dict(sorted(found.items()))


def with_scan_annotations(obj: Obj) -> Obj:
    """A copy of obj whose metadata carries one skip annotation per accepted finding (obj is not changed)."""
    findings = accepted_findings(obj)
    if not findings:
        return obj
    annotations = dict(obj["metadata"].get("annotations", {}))
    for n, (check, reason) in enumerate(findings.items(), start=1):
        annotations[f"{SKIP_ANNOTATION_PREFIX}{n}"] = f"{check}={reason}"
    return {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}
