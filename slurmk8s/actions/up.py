"""`up`: render, apply in stages, create Secrets once, prune, wait until Slurm is usable."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Callable, TextIO

from slurmk8s import naming
from slurmk8s.actions.accounts import apply_accounts, run_in_controller
from slurmk8s.actions.interface import Cluster, header
from slurmk8s.actions.converge import drain_dropped, into_range, resume_own_drains
from slurmk8s.actions.reconfigure import ANNOTATION_CONFIG_SEEN, explain, reconfigure_in_place
from slurmk8s.actions.rollout import check_upgrade, roll_pools, upgrade_slurmdbd_first, waiting_pods
from slurmk8s.actions.secrets import secret_factory
from slurmk8s.debian import SLURM_RELEASES
from slurmk8s.errors import UsageError
from slurmk8s.images.recipes import check_registry
from slurmk8s.kube.apply import CONFIGURED, CREATED, KEPT, PRUNED, UNCHANGED
from slurmk8s.profile.files import read_profile
from slurmk8s.profile.slurm import load_images
from slurmk8s.progress import Progress
from slurmk8s.render import render
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


def run_up(profile_path: str, cluster: Cluster, options: UpOptions = UpOptions(), echo: Callable[[str], None] = print,
           progress: Callable[[str], None] | None = None):
    """Stand up (or update) the profile's cluster; returns the Plan of what was done."""
    live_wait = progress is None  # the CLI: the wait shows a live line
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    profile = read_profile(profile_path, options.namespace)  # once: the profile may come from stdin
    if options.images:
        profile = with_built_images(profile, options.images)
    bundle = render(profile)
    verb = "would be" if options.dry_run else ""
    echo(f"{'dry run: ' if options.dry_run else ''}{header(bundle, cluster)}")
    if options.images:
        echo(f"  images: {profile.images.controller.replace('slurmctld:', '<image>:')} (--images {options.images})")
    quiet = (UNCHANGED, KEPT)
    live_versions = check_upgrade(cluster, bundle, profile)  # refuses a jump Slurm cannot take, before any write
    if not options.dry_run:
        cluster.refuse_unowned(bundle, options.adopt)  # before the writes below, not only the apply's
        for name in cluster.clear_rolling_update(bundle):
            echo(f"  StatefulSet/{name} now OnDelete: its pods are replaced by the rollout, drain first")
        upgrade_slurmdbd_first(cluster, bundle, live_versions, lambda first: cluster.apply(
            first, secret_factory(bundle), workers=options.workers, force_conflicts=options.force_conflicts,
            prune=False, adopt=options.adopt), timeout=options.timeout, progress=progress)

    def pools_into_range() -> None:
        """An elastic pool back into a changed min..max, before any write: pods above a lowered max go
        drained while the running slurm.conf still knows their nodes."""
        into_range(profile, bundle, cluster, options.timeout, dry_run=options.dry_run, log=echo)
        if options.prune:  # prune would delete their pods, jobs or not
            drain_dropped(bundle, cluster, options.timeout, dry_run=options.dry_run, log=echo)

    day_two = None
    if not options.dry_run:
        # Before writing: which pods the change restarts and why, and what Slurm takes in place.
        preview = cluster.apply(bundle, secret_factory(bundle), workers=options.workers, dry_run=True,
                                force_conflicts=options.force_conflicts, prune=options.prune, adopt=options.adopt)
        day_two = day_two_of_plan(preview, bundle, profile.version)
        for line in day_two.lines():
            echo(line)
    plan = cluster.apply(bundle, secret_factory(bundle), workers=options.workers,
                         force_conflicts=options.force_conflicts, dry_run=options.dry_run, prune=options.prune,
                         before_writes=pools_into_range, adopt=options.adopt)
    for change in plan.changes:
        if change.note:
            echo(f"  {change.ref} {verb + ' ' if verb else ''}{change.action}: {change.note}")
        elif options.verbose or change.action not in quiet:
            echo(f"  {change.ref} {verb + ' ' if verb else ''}{change.action}")
    if options.dry_run:
        for line in day_two_of_plan(plan, bundle, profile.version).lines():
            echo(line)
    echo(("dry run, nothing written: " if options.dry_run else "") + summary_line(plan, len(bundle.secrets)))
    if options.dry_run:
        return plan
    assert day_two is not None  # set above whenever not a dry run
    if not options.wait:
        if day_two.slurm_files_changed:
            echo("not waiting: Slurm's config changed; run `up` again (or `scontrol reconfigure`) to apply it in place")
        return plan
    if live_wait:
        wait_live(cluster, bundle, options.timeout, sys.stderr)
    else:
        cluster.wait_until_usable(bundle, timeout=options.timeout, progress=progress)
    resume_own_drains(profile, bundle, cluster, log=echo)
    if day_two.slurm_files_changed:
        apply_in_place(cluster, bundle, options.timeout, echo)
    applied = apply_accounts(profile, run_in_controller(cluster, bundle), log=echo)
    if applied:
        echo(f"accounts: {len(applied)} sacctmgr command(s) applied")
    if options.rollout:
        roll_pools(cluster, bundle, profile, ready_timeout=options.timeout, say=progress)
    else:
        waiting = waiting_pods(cluster, bundle)
        if waiting:
            echo(f"{waiting} slurmd pod(s) wait for `slurmk8s rollout` (drain, then replace)")
    echo(f"cluster {bundle.cluster} is ready")
    for line in login_hint(bundle, bundle.namespace):
        echo(line)
    return plan
