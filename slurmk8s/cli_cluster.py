"""CLI commands for the cluster layer; imports of heavy modules stay inside the commands.

Nothing here imports `kubernetes` at module level: `slurmk8s --help` and `render` must
start without it.
"""

import math
import re
import sys
from typing import Any, Callable, Optional

import typer

from slurmk8s.errors import SlurmK8sError

KUBECONFIG_HELP = "Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)."
CONTEXT_HELP = "Kubeconfig context (default: the current context)."
VERBOSE_HELP = "Log every API request, and show the full API response on errors."
OUTPUT_HELP = "text, or json | yaml: one machine-readable document on stdout (the header goes to stderr)."
TIMEOUT_NOTE = "A duration: 90s, 5m, 1h30m, or seconds."

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def parse_duration(value: Any) -> float:
    """Seconds in a --timeout value: Go-style durations (90s, 5m, 1h30m, 500ms) or plain seconds; > 0 and finite."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        if _DURATION.match(text):
            seconds = sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))
        else:
            try:
                seconds = float(text)
            except ValueError:
                raise typer.BadParameter(f"{text!r} is not a duration; use e.g. 90s, 5m, 1h30m or seconds") from None
    if math.isnan(seconds) or math.isinf(seconds) or seconds <= 0:
        raise typer.BadParameter(f"{value!r} must be a positive, finite duration such as 90s or 5m")
    return seconds


def _timeout_option(default: float, help_text: str) -> Any:
    return typer.Option(default, "--timeout", parser=parse_duration, metavar="DURATION",
                        help=f"{help_text} {TIMEOUT_NOTE}")


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_namespace(value: Optional[str]) -> Optional[str]:
    """-n/--namespace: a Kubernetes namespace name (a DNS-1123 label), else exit 2."""
    if value is not None and (len(value) > 63 or not _DNS_LABEL.match(value)):
        raise typer.BadParameter(f"{value!r} is not a namespace name: at most 63 lowercase letters, digits and '-', "
                                 "starting and ending with a letter or digit")
    return value


def _namespace_option() -> Any:
    return typer.Option(None, "--namespace", "-n", callback=check_namespace, metavar="NAMESPACE",
                        help="Act in this namespace instead of the profile's metadata.namespace (as helm's -n).")


def _output_option() -> Any:
    return typer.Option("text", "-o", "--output", help=OUTPUT_HELP)


def _check_output(output: str) -> str:
    if output not in ("text", "json", "yaml"):
        raise typer.BadParameter(f"{output!r}: choose text, json or yaml", param_hint="-o/--output")
    return output


DIFF_CHANGES = 1  # kubectl diff: 0 no differences, 1 differences, >1 an error
DIFF_ERROR = 3  # 2 stays a bad profile or command line, as everywhere


class DiffFailed(SlurmK8sError):
    """`diff` could not tell (the cluster unreachable, a request refused, its output not written)."""

    exit_code = DIFF_ERROR


def _stderr(line: str) -> None:
    typer.echo(line, err=True)


def _cluster(kubeconfig: Optional[str], context: Optional[str], **options: Any):
    """The client the command acts through; it connects on first use."""
    from slurmk8s.actions.interface import connect
    return connect(kubeconfig, context, **options)


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
           timeout: float = _timeout_option(600, "How long to wait before naming what is not ready; it also bounds each API request (at most 60 s)."),
           prune: bool = typer.Option(True, "--prune/--no-prune", help="Delete objects the profile no longer has (ours only; never PVCs or Secrets)."),
           force_conflicts: bool = typer.Option(False, "--force-conflicts", help="Take over fields another field manager owns."),
           workers: int = typer.Option(8, "--parallel", min=1, max=64, help="Objects applied at once within a stage."),
           rollout: bool = typer.Option(True, "--rollout/--no-rollout", help="After the wait, replace slurmd pods whose spec changed: drain each node, wait for its jobs (spec.rollout), then replace it."),
           namespace: Optional[str] = _namespace_option(),
           adopt: Optional[list[str]] = typer.Option(None, "--adopt", metavar="KIND/NAME", help="Take over an existing object that slurmk8s did not create (repeatable); `down` then deletes it. Without it `up` refuses such objects."),
           images: Optional[str] = typer.Option(None, "--images", metavar="PREFIX", help="Run the images `slurmk8s images build --registry PREFIX` made, over spec.slurm.images: PREFIX/<image>:<series>-<os>; 'local' is its default, localhost/slurmk8s (docs/images.md)."),
           verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Create or update the cluster in Kubernetes (server-side apply) and wait until it is usable."""
        from slurmk8s.actions.up import UpOptions, run_up
        options = UpOptions(dry_run=dry_run, prune=prune, wait=wait, timeout=timeout,
                            force_conflicts=force_conflicts, workers=workers, verbose=verbose, rollout=rollout,
                            namespace=namespace, adopt=tuple(adopt or ()), images=images)
        _run(verbose, lambda: run_up(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout,
                                                         workers=workers), options, echo=typer.echo))

    @app.command()
    def rollout(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
                pool: Optional[str] = typer.Option(None, "--pool", help="Only this pool's pods."),
                timeout: float = _timeout_option(900, "How long each replaced pod may take to come back Ready and registered (the wait for jobs is spec.rollout.drainTimeout)."),
                kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
                context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
                namespace: Optional[str] = _namespace_option(),
                verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Replace slurmd pods whose spec changed, drain first: never while a job runs on them."""
        from slurmk8s.actions.rollout import run_rollout_command
        _run(verbose, lambda: run_rollout_command(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout),
                                                  pool=pool, timeout=timeout, echo=typer.echo,
                                                  namespace=namespace))

    @app.command()
    def scale(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
              pool: str = typer.Argument(..., help="Pool name."),
              replicas: int = typer.Argument(..., help="Pods the pool should run (minReplicas..maxReplicas)."),
              lab: bool = typer.Option(False, "--lab", help="Scale the pool of this profile's running lab (`slurmk8s lab up`)."),
              timeout: float = _timeout_option(24 * 3600, "How long to wait for jobs on the nodes that go."),
              kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
              context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
              namespace: Optional[str] = _namespace_option(),
              verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Scale a pool: up at once; down after draining the highest ordinals and waiting for their jobs."""
        from slurmk8s.actions.scale import run_scale
        _run(verbose, lambda: run_scale(profile, pool, replicas,
                                        _cluster(kubeconfig, context, lab=lab, verbose=verbose, timeout=timeout),
                                        timeout, echo=typer.echo, namespace=namespace))

    @app.command()
    def diff(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
             kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
             context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
             output: str = _output_option(),
             timeout: float = _timeout_option(60, "How long each API request (with its retries) may take."),
             namespace: Optional[str] = _namespace_option(),
             verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Show what `up` would change, as unified diffs (server-side dry run).

        Exit status, as kubectl diff's: 0 nothing would change, 1 something would, 2 a bad profile or
        command line, 3 the cluster could not be asked (unreachable, forbidden) or the diff not written."""
        from slurmk8s.actions.diff import run_diff
        _check_output(output)
        plans = []
        try:
            _run(verbose, lambda: plans.append(run_diff(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout),
                                                        echo=typer.echo, timeout=timeout, output=output, note=_stderr,
                                                        namespace=namespace)))
            sys.stdout.flush()  # a diff that cannot be written is an error (3), not "changes" (1)
        except SlurmK8sError as e:
            if e.exit_code == DIFF_CHANGES:  # exit 1 means "changes" here: an error must not say so
                raise DiffFailed(str(e)) from e
            raise
        except OSError as e:  # writing the diff failed (our errors wrap every other I/O)
            raise DiffFailed(f"cannot write the diff to standard output: {e.strerror or e}") from e
        if plans[0].changed:
            raise typer.Exit(DIFF_CHANGES)

    @app.command()
    def status(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
               kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
               context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
               output: str = _output_option(),
               timeout: float = _timeout_option(60, "How long each API request (with its retries) may take."),
               namespace: Optional[str] = _namespace_option(),
               verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Objects, pods, and `sinfo` from the controller. Exit 1 when the cluster is missing or not healthy."""
        from slurmk8s.actions.status import run_status
        _check_output(output)
        # A cluster with problems ends in one line and exit 1, after the report.
        _run(verbose, lambda: run_status(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout),
                                         echo=typer.echo, output=output, note=_stderr, fail_unhealthy=True,
                                         namespace=namespace))

    @app.command()
    def down(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
             kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
             context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
             delete_data: bool = typer.Option(False, "--delete-data", help="Also delete PVCs (Slurm state, accounting DB) and Secrets (keys)."),
             yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before --delete-data."),
             dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be deleted (server-side dry run)."),
             wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait until the pods are gone."),
             timeout: float = _timeout_option(300, "How long to wait for pods to terminate; it also bounds each API request (at most 60 s)."),
             namespace: Optional[str] = _namespace_option(),
             verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Remove the cluster's workloads; PVCs and Secrets stay unless --delete-data."""
        from slurmk8s.actions.down import run_down
        _run(verbose, lambda: run_down(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout),
                                       delete_data=delete_data, yes=yes, wait=wait, timeout=timeout, dry_run=dry_run,
                                       echo=typer.echo, ask=lambda q: typer.confirm(q, default=False), namespace=namespace))

    @app.command()
    def token(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
              user: str = typer.Argument(..., help="The Slurm user the token authenticates."),
              lifespan: float = typer.Option(3600, "--lifespan", parser=parse_duration, metavar="DURATION",
                                             help=f"How long the token is valid. {TIMEOUT_NOTE}"),
              kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
              context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
              timeout: float = _timeout_option(60, "How long each API request (with its retries) may take."),
              namespace: Optional[str] = _namespace_option(),
              verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Print SLURM_JWT=<token> for slurmrestd, minted by slurmctld (scontrol token) in its pod."""
        from slurmk8s.actions.token import run_token
        _run(verbose, lambda: run_token(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout), user,
                                        max(1, round(lifespan)), echo=typer.echo, note=_stderr, namespace=namespace))

    accounts_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The profile's accounts, users and QoS in slurmdbd.")
    app.add_typer(accounts_app, name="accounts")

    @accounts_app.command("apply")
    def accounts_apply(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
                       kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
                       context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
                       prune: bool = typer.Option(False, "--prune", help="Also delete accounts, users and QoS the profile "
                                                  "no longer has (never an account with pending or running jobs)."),
                       timeout: float = _timeout_option(60, "How long each API request (with its retries) may take."),
                       namespace: Optional[str] = _namespace_option(),
                       verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Apply the account and QoS tree with sacctmgr in slurmctld's pod: what `up` does last, for clusters GitOps deploys."""
        from slurmk8s.actions.accounts import run_accounts_apply
        _run(verbose, lambda: run_accounts_apply(profile, _cluster(kubeconfig, context, verbose=verbose, timeout=timeout),
                                                 delete=prune, echo=typer.echo, namespace=namespace))

    secrets_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Secrets the cluster needs (created once, never overwritten).")
    app.add_typer(secrets_app, name="secrets")

    @secrets_app.command("create")
    def secrets_create(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
                       kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=KUBECONFIG_HELP),
                       context: Optional[str] = typer.Option(None, "--context", help=CONTEXT_HELP),
                       namespace: Optional[str] = _namespace_option(),
                       verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP)) -> None:
        """Create the profile's missing Secrets with random material (for GitOps: apply manifests elsewhere)."""
        from slurmk8s.actions.secrets import run_secrets_create
        _run(verbose, lambda: run_secrets_create(profile, _cluster(kubeconfig, context, verbose=verbose), echo=typer.echo,
                                                 namespace=namespace))
