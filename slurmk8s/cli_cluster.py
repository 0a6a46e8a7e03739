"""CLI commands for the cluster layer; imports of heavy modules stay inside the commands.

Nothing here imports `kubernetes` at module level: `slurmk8s --help` and `render` must
start without it.
"""

from __future__ import annotations

from typing import Callable, Optional

import typer

KUBECONFIG_HELP = "Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."
CONTEXT_HELP = "Kubeconfig context (default: the current context)."
VERBOSE_HELP = "Log every API request, and show the full API response on errors."


def _access(kubeconfig: Optional[str], context: Optional[str]):
    from slurmk8s.kube.client import Access
    return Access(kubeconfig, context)


def _run(verbose: bool, action: Callable[[], object]) -> None:
    """Run an action; with --verbose a cluster error carries the API's full answer."""
    from slurmk8s.errors import ClusterError
    try:
        action()
    except ClusterError as e:
        detail = getattr(e, "detail", "")
        if verbose and detail:
            raise ClusterError(f"{e}\n{detail}") from e
        raise


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""

    @app.command()
    def up(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
           kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
           context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
           dry_run: bool = typer.Option(False, "--dry-run", help="Server-side dry run: say what would change."),
           wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait until every pod is Ready and Slurm knows every node."),
           timeout: float = typer.Option(600, "--timeout", help="Seconds to wait before naming what is not ready."),
           prune: bool = typer.Option(True, "--prune/--no-prune", help="Delete objects the profile no longer has (ours only; never PVCs or Secrets)."),
           force_conflicts: bool = typer.Option(False, "--force-conflicts", help="Take over fields another field manager owns."),
           workers: int = typer.Option(8, "--parallel", min=1, max=64, help="Objects applied at once within a stage."),
           verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Create or update the cluster in Kubernetes (server-side apply) and wait until it is usable."""
        from slurmk8s.actions.up import UpOptions, run_up
        options = UpOptions(dry_run=dry_run, prune=prune, wait=wait, timeout=timeout,
                            force_conflicts=force_conflicts, workers=workers, verbose=verbose)
        _run(verbose, lambda: run_up(profile, _access(kubeconfig, context), options, echo=typer.echo))

    @app.command()
    def scale(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
              pool: str = typer.Argument(..., help="Pool name."),
              replicas: int = typer.Argument(..., help="Pods the pool should run (minReplicas..maxReplicas)."),
              lab: bool = typer.Option(False, "--lab", help="Scale the pool of this profile's running lab (`slurmk8s lab up`)."),
              timeout: float = typer.Option(24 * 3600, "--timeout", help="Seconds to wait for jobs on the nodes that go."),
              kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
              context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
              verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Scale a pool: up at once; down after draining the highest ordinals and waiting for their jobs."""
        from slurmk8s.actions.scale import run_scale
        _run(verbose, lambda: run_scale(profile, pool, replicas, lab, timeout, _access(kubeconfig, context),
                                        verbose, echo=typer.echo))

    @app.command()
    def diff(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
             kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
             context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
             verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Show what `up` would change, as unified diffs (server-side dry run)."""
        from slurmk8s.actions.diff import run_diff
        _run(verbose, lambda: run_diff(profile, _access(kubeconfig, context), verbose=verbose, echo=typer.echo))

    @app.command()
    def status(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
               kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
               context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
               verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Objects, pods, and `sinfo` from the controller."""
        from slurmk8s.actions.status import run_status
        _run(verbose, lambda: run_status(profile, _access(kubeconfig, context), verbose=verbose, echo=typer.echo))

    @app.command()
    def down(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
             kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
             context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
             delete_data: bool = typer.Option(False, "--delete-data", help="Also delete PVCs (Slurm state, accounting DB) and Secrets (keys)."),
             yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before --delete-data."),
             dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted (server-side dry run)."),
             wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait until the pods are gone."),
             timeout: float = typer.Option(300, "--timeout", help="Seconds to wait for pods to terminate."),
             verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Remove the cluster's workloads; PVCs and Secrets stay unless --delete-data."""
        from slurmk8s.actions.down import run_down
        _run(verbose, lambda: run_down(profile, _access(kubeconfig, context), delete_data=delete_data, yes=yes,
                                       wait=wait, timeout=timeout, dry_run=dry_run, verbose=verbose,
                                       echo=typer.echo, ask=lambda q: typer.confirm(q, default=False)))

    secrets_app = typer.Typer(no_args_is_help=True, help="Secrets the cluster needs (created once, never overwritten).")
    app.add_typer(secrets_app, name="secrets")

    @secrets_app.command("create")
    def secrets_create(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
                       kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
                       context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
                       verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Create the profile's missing Secrets with random material (for GitOps: apply manifests elsewhere)."""
        from slurmk8s.actions.secrets import run_secrets_create
        _run(verbose, lambda: run_secrets_create(profile, _access(kubeconfig, context), echo=typer.echo,
                                                 verbose=verbose))
