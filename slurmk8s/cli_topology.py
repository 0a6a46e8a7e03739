"""`slurmk8s topology ...`: network topology from a live cluster's node labels."""

import sys
from typing import Optional

import typer

topology_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Network topology: read it from Kubernetes node labels.")

LABELS_HELP = ("A preset (gke, eks, nvidia, oci, zone) or comma-separated node label keys, from the top tier "
               "to the leaf (tree) or the one block label (block).")


@topology_app.command("discover")
def discover(labels: str = typer.Option(..., "--labels", help=LABELS_HELP),
             plugin: str = typer.Option("tree", "--plugin", help="tree | block."),
             pool: Optional[str] = typer.Option(None, "--pool",
                                                help="Give each leaf one slot of this pool per Kubernetes node."),
             kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig",
                                                      help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)."),
             context: Optional[str] = typer.Option(None, "--context", help="Kubeconfig context (default: the current one)."),
             verbose: bool = typer.Option(False, "--verbose", help="Log every API request.")) -> None:
    """Print spec.topology for the cluster's nodes (domains and how many nodes each has)."""
    from slurmk8s.actions.interface import connect
    from slurmk8s.actions.topology import run_discover
    text, unlabelled = run_discover(connect(kubeconfig, context, verbose=verbose), plugin, labels, pool)
    typer.echo(text, nl=False)
    if unlabelled:
        print(f"warning: {len(unlabelled)} node(s) without the labels went to domain 'unknown': "
              f"{', '.join(unlabelled)}", file=sys.stderr)


def register(app: typer.Typer) -> None:
    """Add the `topology` command group."""
    app.add_typer(topology_app, name="topology")
