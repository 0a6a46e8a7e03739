"""spec.slurm: the Slurm release, auth, images, slurm.conf overrides and extra files: loading and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slurmk8s import naming, versions
from slurmk8s.profile.defaults import default

if TYPE_CHECKING:  # the section is part of Profile: no import cycle at run time
    from slurmk8s.profile.model import Profile

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Images:
    """spec.slurm.images: each component's image and the pull policy."""

    controller: str
    worker: str
    accounting: str
    login: str
    restapi: str
    database: str
    pull_policy: str


# slurm.conf keys the generator writes; a profile may not override them through
# spec.slurm.config because the pods, Services and secrets depend on their values
# (SchedulerParameters and SlurmctldParameters take added options: MERGED_SLURM_KEYS).
OWNED_SLURM_KEYS = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController", "BackupAddr",
    "SlurmUser", "SlurmdUser", "AuthType", "CredType", "AuthInfo", "AuthAltTypes", "AuthAltParameters",
    "SlurmctldPort", "SlurmdPort", "SrunPortRange", "StateSaveLocation", "SlurmdSpoolDir",
    "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "ProctrackType", "TaskPlugin",
    "JobAcctGatherType", "SelectType", "GresTypes", "AccountingStorageType", "AccountingStorageHost",
    "AccountingStoragePort", "AccountingStoragePass", "TopologyPlugin", "NodeName", "NodeSet", "PartitionName",
    "TreeWidth", "MailProg", "ResumeProgram", "SuspendProgram", "Include",
    "PrologSlurmctld", "EpilogSlurmctld",  # the busy marks (render/k8s/podreplacement.py)
    # spec.scheduling
    "SchedulerType", "PriorityType", "PriorityWeightFairshare", "PriorityWeightAge",
    "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS", "PriorityDecayHalfLife",
    "PriorityMaxAge", "PriorityCalcPeriod", "PreemptType", "PreemptMode", "AccountingStorageEnforce",
))


# slurm.conf keys written from a typed field of the profile: set there, not through spec.slurm.config.
TYPED_SLURM_KEYS = {"suspendtime": "spec.powerSaving.suspendTime", "suspendtimeout": "spec.powerSaving.suspendTimeout",
                    "resumetimeout": "spec.powerSaving.resumeTimeout"}


# List-valued slurm.conf keys the generator writes and a profile may add options to: the line is the generator's
# options, then the profile's (`SchedulerParameters: bf_busy_nodes,max_rpc_cnt=150`) it does not hold already
# (render/slurmfiles.py merged_options). Slurm reads an option's name before any `=` and ignores its case.
MERGED_SLURM_KEYS = frozenset(k.lower() for k in ("SchedulerParameters", "SlurmctldParameters"))

# Options of a merged key written from a typed field of the profile: set there, not through spec.slurm.config.
TYPED_SLURM_OPTIONS = {"schedulerparameters": {
    "bf_continue": "spec.scheduling.scheduler.continue", "bf_interval": "spec.scheduling.scheduler.interval",
    "bf_max_job_test": "spec.scheduling.scheduler.maxJobTest", "bf_window": "spec.scheduling.scheduler.window"}}


def option_name(option: str) -> str:
    """The name of one option of a list-valued key, as Slurm compares it: `bf_interval=30` -> bf_interval."""
    return option.split("=", 1)[0].lower()


def profile_options(profile: Profile, key: str) -> tuple[str, ...]:
    """The options spec.slurm.config adds to key (one of MERGED_SLURM_KEYS), in the profile's order, each once."""
    out: list[str] = []
    for k, value in profile.slurm_config:
        if k.lower() == key.lower():
            out += [o for o in value.split(",") if o not in out]
    return tuple(out)


def options_problems(key: str, value: str) -> list[str]:
    """Why the options spec.slurm.config gives a merged key cannot be added to the generator's ([] when they can)."""
    if "" in value.split(","):
        return [f"{value!r} has an empty option: give options separated by single commas"]
    out = []
    seen: dict[str, str] = {}
    for option in value.split(","):
        name = option_name(option)
        if name in TYPED_SLURM_OPTIONS.get(key.lower(), {}):
            out.append(f"option '{name}' has its own field: set {TYPED_SLURM_OPTIONS[key.lower()][name]}")
        elif name in seen and seen[name].lower() != option.lower():
            out.append(f"option '{name}' is given twice ('{seen[name]}' and '{option}'): give it once")
        seen.setdefault(name, option)
    return out


# slurm.conf keys whose value is a whole line of its own options (Slurm's S_P_ARRAY keys in read_config.c):
# `DownNodes=n[1-2] State=DOWN Reason=x` is one entry, and its options are checked against DownNodes' own
# table. Every other key takes one value; NodeName, NodeSet, PartitionName and SlurmctldHost are owned.
LINE_SLURM_KEYS = frozenset(k.lower() for k in ("DownNodes", "FrontendName", "NodeName", "NodeSet", "PartitionName",
                                                "SlurmctldHost"))


def one_word_problem(value: object) -> str | None:
    """Why value cannot be one `Key=value` of a Slurm config line, or None when it can.

    Slurm's parser (parse_config.c) ends a value at whitespace and reads what follows as more keys, and
    drops everything after a `#` as a comment: a space would set keys past the owned-key checks, a `#`
    the rest of the line. An `=` inside one word stays in the value (`MpiParams=ports=12000-12999`,
    `TRESBillingWeights=CPU=1.0,Mem=0.25G`), so it is allowed.
    """
    if not isinstance(value, str):
        return None
    if not value or any(ch.isspace() for ch in value):
        return "must be one word"
    return "must not contain '#'" if "#" in value else None


DAEMON_PORTS = (6817, 6818, 6819, 6820)  # slurmctld, slurmd, slurmdbd, slurmrestd


DEFAULT_IMAGE_REGISTRY = "ghcr.io/slinkyproject"


# Slurm releases SlinkyProject publishes images for (docs/research/slinky-facts.md).
SLINKY_IMAGE_VERSIONS = frozenset({"24.11", "25.05", "25.11", "26.05"})


# Files the generator writes into /etc/slurm (slurm.conf's companions, keys, scripts).
GENERATED_FILES = frozenset({"slurm.conf", "cgroup.conf", "gres.conf", "topology.conf", "topology.yaml",
                             "slurmdbd.conf", "task_prolog.sh"})


def conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return str(value)


def load_images(raw: dict, version: str) -> Images:
    registry = raw.get("registry", default("spec.slurm.images.registry"))
    tag = raw.get("tag") or naming.image_tag(version, raw.get("os", default("spec.slurm.images.os")))

    def image(component: str, daemon: str) -> str:
        return raw.get(component) or naming.image_ref(registry, daemon, tag)

    return Images(
        controller=image("controller", "slurmctld"),
        worker=image("worker", "slurmd"),
        accounting=image("accounting", "slurmdbd"),
        login=image("login", "login"),
        restapi=image("restapi", "slurmrestd"),
        database=raw.get("database", default("spec.slurm.images.database")),
        pull_policy=raw.get("pullPolicy", default("spec.slurm.images.pullPolicy")),
    )


def config_problems(path: tuple[str, ...], config: dict, conf_file: str, owned: frozenset[str],
                    typed: dict[str, str] | None = None, line_keys: frozenset[str] = frozenset()) -> list[Problem]:
    """Extra Key: Value lines of a Slurm config file (spec.slurm.config, spec.accounting.config): a key given in
    two spellings, a key the generator owns or one with a field of its own, a value that is not one word."""
    out: list[Problem] = []
    seen: dict[str, str] = {}
    for key, value in config.items():
        # A value with a line break (which could smuggle in owned keys) never gets here: loader.unsafe_text.
        where, low = path + (key,), key.lower()
        if low in seen:  # Slurm's keys ignore case: two spellings would be two lines, the last one winning
            out.append((where, f"'{key}' is '{seen[low]}' again (Slurm's keys ignore case): set it once", True))
        seen.setdefault(low, key)
        if low in owned:
            out.append((where, f"'{key}' is set by the generator and cannot be overridden here", True))
        elif typed and low in typed:
            out.append((where, f"'{key}' has its own field: set {typed[low]}", True))
        elif low not in line_keys and one_word_problem(value):
            out.append((where, f"{value!r} {one_word_problem(value)}: in {conf_file} what follows a space would be "
                        "read as more keys, and what follows a '#' as a comment", False))
    return out


def check_slurm(profile: Profile, spec: dict) -> list[Problem]:
    out: list[Problem] = []
    slurm = spec.get("slurm", {})
    dialect = versions.dialect(profile.version)
    if profile.auth == "slurm" and not dialect.has_auth_slurm:
        out.append((("spec", "slurm", "auth"), f"auth 'slurm' needs Slurm 23.11 or newer; {profile.version} has only munge", False))
    config = slurm.get("config", {})
    out += config_problems(("spec", "slurm", "config"), config, "slurm.conf", OWNED_SLURM_KEYS, TYPED_SLURM_KEYS,
                           LINE_SLURM_KEYS)
    for key, value in config.items():
        if key.lower() in MERGED_SLURM_KEYS and not one_word_problem(value):
            out += [(("spec", "slurm", "config", key), message, False) for message in options_problems(key, conf_value(value))]
    low, high = (int(x) for x in profile.srun_port_range.split("-"))
    if not 1024 <= low <= high <= 65535:
        out.append((("spec", "slurm", "srunPortRange"), f"'{profile.srun_port_range}' must be LOW-HIGH with 1024 <= LOW <= HIGH <= 65535", False))
    elif low <= DAEMON_PORTS[-1] and high >= DAEMON_PORTS[0]:
        out.append((("spec", "slurm", "srunPortRange"), f"'{profile.srun_port_range}' overlaps the ports of the Slurm "
                    f"daemons ({DAEMON_PORTS[0]}-{DAEMON_PORTS[-1]}: slurmctld, slurmd, slurmdbd, slurmrestd); "
                    "choose a range outside them, such as 60001-63000", False))
    images = slurm.get("images", {})
    custom = "tag" in images or images.get("registry", DEFAULT_IMAGE_REGISTRY) != DEFAULT_IMAGE_REGISTRY
    if not custom and not all(c in images for c in naming.SLURM_COMPONENTS):
        if profile.auth == "munge":
            out.append((("spec", "slurm", "auth"), "SlinkyProject's images carry no munged: with auth 'munge' set "
                        "spec.slurm.images (registry/tag or per component) to images that do, such as those of "
                        "`slurmk8s images build`", False))
        elif profile.version not in SLINKY_IMAGE_VERSIONS:
            out.append((("spec", "slurm", "version"), f"SlinkyProject publishes no images for Slurm {profile.version}; "
                        "set spec.slurm.images.registry/tag to images you build (`slurmk8s images build` makes "
                        "them for 22.05, 24.11 and 26.05)", False))
    return out


def check_extra_files(spec: dict) -> list[Problem]:
    files = spec.get("slurm", {}).get("extraFiles", {})
    return [(("spec", "slurm", "extraFiles", name), f"{name} is written by the generator; it cannot be replaced here",
             True) for name in files if name in GENERATED_FILES]


