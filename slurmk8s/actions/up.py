"""`up`: render, apply in stages, create Secrets once, prune, wait until Slurm is usable."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, TextIO

from slurmk8s import naming
from slurmk8s.actions.accounts import apply_accounts, run_in_controller
from slurmk8s.actions.interface import Cluster, header
from slurmk8s.actions.converge import drain_dropped, into_range, resume_own_drains
from slurmk8s.actions.reconfigure import ANNOTATION_CONFIG_SEEN, DayTwo, explain, reconfigure_in_place
from slurmk8s.actions.rollout import check_upgrade, roll_pools, upgrade_slurmdbd_first, waiting_pods
from slurmk8s.actions.secrets import secret_factory
from slurmk8s.debian import SLURM_RELEASES
from slurmk8s.errors import UsageError
from slurmk8s.images.recipes import check_registry
from slurmk8s.kube.apply import CONFIGURED, CREATED, KEPT, PRUNED, UNCHANGED, Plan
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.slurm import load_images
from slurmk8s.progress import Progress
from slurmk8s.profile.model import Profile
from slurmk8s.render import Bundle, render
from slurmk8s.render.hints import login_hint


@dataclass(frozen=True)
class UpOptions:
    """Flags of `slurmk8s up`."""

    dry_run: bool = False
    prune: bool = True
    wait: bool = True
    timeout: float = 600
    force_conflicts: bool = False
    workers: int = 8
    verbose: bool = False
    rollout: bool = True  # replace stale slurmd pods drain-first after the wait (actions/rollout.py)
    namespace: str | None = None  # -n: instead of the profile's metadata.namespace
    adopt: tuple[str, ...] = ()  # KIND/NAME of existing objects someone else made, handed to slurmk8s on purpose
    images: str | None = None  # --images: a prefix of `slurmk8s images build` ("local"), over spec.slurm.images


# `--images local`: where `slurmk8s images build` tags its images by default.
LOCAL_IMAGES = "local"


def with_built_images(profile, prefix: str):
    """The profile with every image as `slurmk8s images build --registry PREFIX` tags it for the profile's
    series: <prefix>/<image>:<series>-<os>, the database <prefix>/mariadb:<series>-<os>. `local` is
    naming.PROJECT_REGISTRY (localhost/slurmk8s); the pull policy stays the profile's."""
    registry = naming.PROJECT_REGISTRY if prefix == LOCAL_IMAGES else prefix.rstrip("/")
    problem = check_registry(registry)
    if problem:
        raise UsageError(f"--images: {problem}, or 'local' for {naming.PROJECT_REGISTRY}")
    release = SLURM_RELEASES.get(profile.version)
    if release is None:
        raise UsageError(f"--images {prefix}: `slurmk8s images build` makes Slurm {', '.join(SLURM_RELEASES)}; "
                         f"the profile runs {profile.version}")
    tag = naming.image_tag(profile.version, release.os_name)
    images = load_images({"registry": registry, "os": release.os_name, "pullPolicy": profile.images.pull_policy,
                          "database": naming.image_ref(registry, "mariadb", tag)}, profile.version)
    return replace(profile, images=images)


def summary_line(plan, secrets_total: int) -> str:
    """One line saying what changed; says so plainly when nothing did."""
    objects = [c for c in plan.changes if not c.ref.startswith("Secret/")]
    secrets = [c for c in plan.changes if c.ref.startswith("Secret/")]
    kept = sum(1 for c in secrets if c.action == KEPT)
    if not plan.changed:
        return f"no changes: {len(objects)} objects unchanged, {kept} of {secrets_total} secrets kept"
    counts = [f"{sum(1 for c in objects if c.action == a)} {a}" for a in (CREATED, CONFIGURED, UNCHANGED, PRUNED)]
    made = sum(1 for c in secrets if c.action == CREATED)
    return f"{', '.join(counts)}; secrets: {made} created, {kept} kept"


def slurm_files(bundle) -> dict[str, str]:
    """The data of the Slurm ConfigMap (slurm.conf and its companions) as rendered."""
    return dict(bundle.find("ConfigMap", naming.config_map(bundle.cluster))["data"])


def day_two_of_plan(plan, bundle, version: str):
    """Restarts and in-place changes of a dry-run Plan (its changes carry live and applied objects)."""
    return explain(plan.changes, naming.config_map(bundle.cluster), version, slurm_files(bundle),
                   naming.identity_config_map(bundle.cluster))


def apply_in_place(cluster, bundle, timeout: float, echo: Callable[[str], None]) -> None:
    """Make slurmctld read the applied Slurm files and push them to every slurmd (`scontrol reconfigure`)."""
    sts = naming.component_name(bundle.cluster, naming.CONTROLLER)
    pods = [naming.pod_name(sts, i) for i in range(bundle.find("StatefulSet", sts)["spec"]["replicas"])]
    reconfigure_in_place(slurm_files(bundle), pods,
                         lambda pod, value: cluster.annotate_pod(bundle, pod, ANNOTATION_CONFIG_SEEN, value),
                         lambda argv: cluster.slurm(bundle, argv), timeout=min(timeout, 300), say=echo)


def wait_live(cluster, bundle, timeout: float, stream: TextIO) -> None:
    """`up`'s wait on stream: a live line on a terminal (what is waited for, since when), timestamped lines
    otherwise; the last line stays, with how long the wait took."""
    live, last, started = Progress(stream), [""], time.monotonic()

    def show(line: str) -> None:
        last[0] = line
        live.update(line)
    try:
        cluster.wait_until_usable(bundle, timeout=timeout, progress=show, every_poll=True)
    finally:
        live.done(f"{last[0]} (after {time.monotonic() - started:.0f} s)" if last[0] else None)


@dataclass
class UpRun:
    """What one `up` carries from step to step: the inputs, then what each step found."""

    cluster: Cluster
    options: UpOptions
    echo: Callable[[str], None]
    progress: Callable[[str], None]
    live_wait: bool  # the CLI: the wait shows a live line
    profile: Profile
    bundle: Bundle
    live_versions: dict[str, str] = field(default_factory=dict)  # component -> the Slurm release it runs
    # Restarts and in-place changes, from a dry-run apply before the writes (none in a dry run).
    day_two: DayTwo = field(default_factory=lambda: DayTwo((), (), False))
    plan: Plan | None = None


def rendered(profile_path: str, options: UpOptions) -> tuple[Profile, Bundle]:
    """Read the profile once (it may come from stdin) and render it."""
    profile = read_profile(profile_path, options.namespace)
    if options.images:
        profile = with_built_images(profile, options.images)
    return profile, render(profile)


def step_check_upgrade(run: UpRun) -> None:
    """Refuse a Slurm version jump Slurm cannot take, before any write."""
    run.live_versions = check_upgrade(run.cluster, run.bundle, run.profile)


def step_prepare(run: UpRun) -> None:
    """Refuse foreign objects, turn pools OnDelete, and upgrade slurmdbd first when the release changes."""
    cluster, bundle, options = run.cluster, run.bundle, run.options
    cluster.refuse_unowned(bundle, options.adopt)  # before the writes below, not only the apply's
    for name in cluster.clear_rolling_update(bundle):
        run.echo(f"  StatefulSet/{name} now OnDelete: its pods are replaced by the rollout, drain first")
    upgrade_slurmdbd_first(cluster, bundle, run.live_versions, lambda first: cluster.apply(
        first, secret_factory(bundle), workers=options.workers, force_conflicts=options.force_conflicts,
        prune=False, adopt=options.adopt), timeout=options.timeout, progress=run.progress)


def step_preview(run: UpRun) -> None:
    """Before writing: which pods the change restarts and why, and what Slurm takes in place."""
    options = run.options
    preview = run.cluster.apply(run.bundle, secret_factory(run.bundle), workers=options.workers, dry_run=True,
                                force_conflicts=options.force_conflicts, prune=options.prune, adopt=options.adopt)
    run.day_two = day_two_of_plan(preview, run.bundle, run.profile.version)
    for line in run.day_two.lines():
        run.echo(line)


def step_apply(run: UpRun) -> None:
    """Apply in stages (Secrets created once), say what changed, and the summary line."""
    cluster, bundle, options = run.cluster, run.bundle, run.options

    def pools_into_range() -> None:
        """An elastic pool back into a changed min..max, before any write: pods above a lowered max go
        drained while the running slurm.conf still knows their nodes."""
        into_range(run.profile, bundle, cluster, options.timeout, dry_run=options.dry_run, log=run.echo)
        if options.prune:  # prune would delete their pods, jobs or not
            drain_dropped(bundle, cluster, options.timeout, dry_run=options.dry_run, log=run.echo)

    run.plan = cluster.apply(bundle, secret_factory(bundle), workers=options.workers,
                             force_conflicts=options.force_conflicts, dry_run=options.dry_run, prune=options.prune,
                             before_writes=pools_into_range, adopt=options.adopt)
    verb = "would be " if options.dry_run else ""
    for change in run.plan.changes:
        if change.note:
            run.echo(f"  {change.ref} {verb}{change.action}: {change.note}")
        elif options.verbose or change.action not in (UNCHANGED, KEPT):
            run.echo(f"  {change.ref} {verb}{change.action}")
    if options.dry_run:
        for line in day_two_of_plan(run.plan, bundle, run.profile.version).lines():
            run.echo(line)
    run.echo(("dry run, nothing written: " if options.dry_run else "") + summary_line(run.plan, len(bundle.secrets)))
    if not options.dry_run and not options.wait and run.day_two.slurm_files_changed:
        run.echo("not waiting: Slurm's config changed; run `up` again (or `scontrol reconfigure`) to apply it in place")


def step_wait(run: UpRun) -> None:
    """Wait until every workload is ready and Slurm answers."""
    if run.live_wait:
        wait_live(run.cluster, run.bundle, run.options.timeout, sys.stderr)
    else:
        run.cluster.wait_until_usable(run.bundle, timeout=run.options.timeout, progress=run.progress)


def step_resume_drains(run: UpRun) -> None:
    """Resume the nodes an earlier, unfinished scale-down of slurmk8s left drained."""
    resume_own_drains(run.profile, run.bundle, run.cluster, log=run.echo)


def step_reconfigure(run: UpRun) -> None:
    """Slurm takes a changed slurm.conf in place (`scontrol reconfigure`), no pod restarted."""
    if run.day_two.slurm_files_changed:
        apply_in_place(run.cluster, run.bundle, run.options.timeout, run.echo)


def step_accounts(run: UpRun) -> None:
    """The profile's accounts, users and QoS, through sacctmgr in the controller."""
    applied = apply_accounts(run.profile, run_in_controller(run.cluster, run.bundle), log=run.echo)
    if applied:
        run.echo(f"accounts: {len(applied)} sacctmgr command(s) applied")


def step_rollout(run: UpRun) -> None:
    """Replace stale slurmd pods drain-first (or say how many wait for `slurmk8s rollout`)."""
    if run.options.rollout:
        roll_pools(run.cluster, run.bundle, run.profile, ready_timeout=run.options.timeout, say=run.progress)
        return
    waiting = waiting_pods(run.cluster, run.bundle)
    if waiting:
        run.echo(f"{waiting} slurmd pod(s) wait for `slurmk8s rollout` (drain, then replace)")


def step_ready(run: UpRun) -> None:
    """The closing lines: ready, and how to log in."""
    run.echo(f"cluster {run.bundle.cluster} is ready")
    for line in login_hint(run.bundle, run.bundle.namespace):
        run.echo(line)


# After step_apply, in order. A dry run stops after step_apply, --no-wait too.
WRITES_FIRST = (step_prepare, step_preview)
AFTER_THE_WAIT = (step_wait, step_resume_drains, step_reconfigure, step_accounts, step_rollout, step_ready)


def run_up(profile_path: str, cluster: Cluster, options: UpOptions = UpOptions(), echo: Callable[[str], None] = print,
           progress: Callable[[str], None] | None = None) -> Plan:
    """Stand up (or update) the profile's cluster as named steps, as kind's create actions run; returns the
    Plan of what was applied."""
    profile, bundle = rendered(profile_path, options)
    echo(f"{'dry run: ' if options.dry_run else ''}{header(bundle, cluster)}")
    if options.images:
        echo(f"  images: {profile.images.controller.replace('slurmctld:', '<image>:')} (--images {options.images})")
    run = UpRun(cluster, options, echo, progress or (lambda line: print(line, file=sys.stderr, flush=True)),
                live_wait=progress is None, profile=profile, bundle=bundle)
    step_check_upgrade(run)
    steps = (() if options.dry_run else WRITES_FIRST) + (step_apply,)
    if not options.dry_run and options.wait:
        steps += AFTER_THE_WAIT
    for step in steps:
        step(run)
    assert run.plan is not None  # every run has step_apply
    return run.plan
