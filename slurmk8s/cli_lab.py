"""`slurmk8s lab ...`: boot rendered bundles with real Slurm daemons (needs root)."""

import sys
from typing import List, Optional

import typer

lab_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Boot a rendered profile with real Slurm daemons on this machine.")

ROOTFS_HELP = "Cache directory of the images' trees the containers run on (exported on demand, once per image id)."


@lab_app.command("up")
def up(profile: str = typer.Argument(..., help="Cluster profile."),
       slurm_rootfs: Optional[str] = typer.Option(None, "--slurm-rootfs", help=ROOTFS_HELP)) -> None:
    """Boot every pod of the rendered profile and leave it running."""
    from slurmk8s.actions.lab import lab_up
    lab_up(profile, slurm_rootfs)


@lab_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(profile: str = typer.Argument(..., help="Cluster profile."),
          command: List[str] = typer.Argument(..., help="Command to run, after --."),
          pod: Optional[str] = typer.Option(None, "--pod", help="Pod to run in (default: the login pod)."),
          container: Optional[str] = typer.Option(None, "--container", "-c",
                                                  help="Container to run in, as its user (default: the pod's last).")) -> None:
    """Run a client command (sinfo, sbatch, ...) inside the lab, as kubectl exec would."""
    from slurmk8s.actions.lab import lab_exec
    done = lab_exec(profile, list(command), pod, container)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    # A command killed by signal N exits 128 + N, as in a shell.
    raise typer.Exit(done.returncode if done.returncode >= 0 else 128 - done.returncode)


@lab_app.command("down")
def down(profile: str = typer.Argument(..., help="Cluster profile.")) -> None:
    """Stop the lab and remove everything it made."""
    from slurmk8s.actions.lab import lab_down
    left = lab_down(profile)
    if left:
        typer.echo("left behind:\n  " + "\n  ".join(left), err=True)
        raise typer.Exit(1)
    typer.echo("lab down; nothing left behind")


@lab_app.command("verify")
def verify(profile: str = typer.Argument(..., help="Cluster profile."),
           slurm_rootfs: Optional[str] = typer.Option(None, "--slurm-rootfs", help=ROOTFS_HELP)) -> None:
    """Boot, run the smoke suite (sinfo, srun, sbatch, GPUs, sacct, restart, resume), tear down; exit 0 or 1."""
    from slurmk8s.actions.lab import lab_verify
    results = lab_verify(profile, slurm_rootfs)
    for r in results:
        typer.echo(str(r))
    failed = [r for r in results if not r.ok]
    skipped = [r for r in results if not r.applies]
    typer.echo(f"{len(results) - len(failed) - len(skipped)} passed, {len(failed)} failed, {len(skipped)} skipped")
    raise typer.Exit(1 if failed else 0)


def register(app: typer.Typer) -> None:
    """Add the `lab` command group."""
    app.add_typer(lab_app, name="lab")
