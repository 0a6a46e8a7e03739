"""The slurmk8s command line: parse flags, call an action, print its errors once.

Imports of actions happen inside each command so `--help` and `render` stay fast
and never load the Kubernetes client.
"""

import atexit
import gc
import signal
import sys
from typing import Any, Optional

from slurmk8s import codecache

with codecache.caching():  # typer's own dataclasses too
    import typer

from slurmk8s.errors import SlurmK8sError

# rich_markup_mode=None on every Typer() of the CLI: plain help and error text. typer's rich
# formatting imports rich's console, markdown and pygments (about 50 ms, more than the rest of `--help`).
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Slurm on Kubernetes from one cluster profile: validate, render, up, down, lab, images.")


def version() -> str:
    """The installed version (the package's own when it runs from a checkout)."""
    from importlib import metadata

    import slurmk8s
    try:
        return metadata.version("slurmk8s")
    except metadata.PackageNotFoundError:
        return slurmk8s.__version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"slurmk8s {version()}")
        raise typer.Exit()


@app.callback()
def _root(show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                            help="Print the version and exit.")) -> None:
    """Slurm on Kubernetes from one cluster profile: validate, render, up, down, lab, images."""


@app.command()
def init(path: str = typer.Argument("profile.yaml", help="Where to write the starter profile; - prints it."),
         force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
    """Write a commented starter profile."""
    from slurmk8s.actions.init import write_starter
    for written in write_starter(path, force):
        typer.echo(f"wrote {written}")


@app.command()
def schema() -> None:
    """Print the profile's JSON Schema (init writes it beside the profile; editors check profiles with it)."""
    from slurmk8s.actions.init import print_schema
    print_schema()


@app.command()
def validate(profile: str = typer.Argument(..., help="Cluster profile (YAML).")) -> None:
    """Check a profile against the schema, the cross-field rules and what the API server would refuse."""
    from slurmk8s.profile.files import read_profile
    from slurmk8s.render import render
    p = read_profile(profile)
    render(p)  # the bundle's own checks (names, the API server's rules: render/apirules.py), as render runs them
    typer.echo(f"{profile}: ok (cluster {p.name}, Slurm {p.version}, {len(p.pools)} pool(s), "
               f"{sum(x.max_replicas for x in p.pools)} node(s))")


@app.command()
def render(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
           output: str = typer.Option(..., "-o", "--output", help="Output directory, or - for one YAML stream."),
           fmt: str = typer.Option("plain", "--format",
                                   help="plain | kustomize | helm | argocd (see docs/gitops.md)."),
           repo_url: Optional[str] = typer.Option(None, "--repo-url",
                                                  help="argocd: the git repository Argo CD reads the tree from."),
           revision: str = typer.Option("HEAD", "--revision", help="argocd: the git revision to track."),
           repo_path: Optional[str] = typer.Option(None, "--repo-path",
                                                   help="argocd: the tree's path in the repository (default: -o).")) -> None:
    """Render every Kubernetes object and Slurm file of a profile."""
    from slurmk8s.actions.render import FORMATS, render_to
    if fmt not in FORMATS:
        raise typer.BadParameter(f"unknown format {fmt!r}; available: {', '.join(FORMATS)}", param_hint="--format")
    written = render_to(profile, output, fmt, repo_url=repo_url, revision=revision, repo_path=repo_path)
    if output != "-":
        typer.echo(f"wrote {len(written)} files to {output}")


@app.command()
def fence(profile: str = typer.Argument(..., help="Cluster profile (YAML).")) -> None:
    """Print how each shared node shape is split between Slurm, Kubernetes and the system (checked first)."""
    from slurmk8s.actions.fence import fence_plan_text
    typer.echo(fence_plan_text(profile), nl=False)


def _register_command_groups() -> None:
    """Commands that live in their own modules (cluster access, the lab), registered lazily-importing."""
    from slurmk8s import cli_cluster, cli_images, cli_lab, cli_topology
    cli_cluster.register(app)
    cli_lab.register(app)
    cli_topology.register(app)
    cli_images.register(app)


_register_command_groups()


def _plain_str_coercion() -> None:
    """A `str` parameter given a string, or a `bool` one a bool, is taken as is, without pydantic.

    typer 0.29 coerces every parameter through a pydantic TypeAdapter; importing pydantic is about
    50 ms, a third of a whole `render`. Given a value of its own type that adapter hands it back
    unchanged; every other case (other types, custom parsers, a string for a bool) still goes to
    typer's own coercion, built only then. On a typer without these internals nothing changes.
    """
    try:
        from typer import _coercion, core

        from slurmk8s.codecache import dataclass
        build = core.build_runtime_param
        base = _coercion.RuntimeParam
    except (ImportError, AttributeError):
        return

    @dataclass(frozen=True)
    class Plain(base):  # type: ignore[misc, valid-type]
        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:
                return value
            return build(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    def build_runtime_param(descriptor: Any) -> Any:
        if (descriptor.annotation in (str, bool) and descriptor.file_annotation is None
                and getattr(descriptor.parameter_info, "parser", None) is None):
            return Plain(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                         descriptor=descriptor)
        return build(descriptor)

    core.build_runtime_param = build_runtime_param


_plain_str_coercion()


INTERRUPTED = 130  # 128 + SIGINT

# At exit the interpreter's last garbage collections walk every object the imports made, about 15 ms
# of a render (issue 17); frozen, they are skipped. The process is ending: nothing is left to reclaim.
atexit.register(gc.freeze)

# Typer 0.2x vendors its own click: catch the classes typer raises, whichever click that is.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main() -> None:
    """Entry point: every command's exit code becomes the process's; our errors print as one clean
    message with theirs; Ctrl-C exits 130 with one line, as shells expect of an interrupted command."""
    interrupted: list[int] = []
    # A command makes hundreds of thousands of objects that live until it ends (imports, a 10,000-node
    # render): a young-generation collection every 700 of them was about 5 ms of a render (issue 17).
    # One every 100,000 still reclaims what a long command (up, lab) leaves in cycles.
    gc.set_threshold(100_000, *gc.get_threshold()[1:])

    def on_interrupt(signum: int, frame: object) -> None:
        # Typer turns KeyboardInterrupt into Exit(130) and click's prompts into Abort: remember
        # that it was Ctrl-C, whatever it becomes on the way out.
        interrupted.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:
        code = INTERRUPTED
    except SlurmK8sError as e:
        if not interrupted:
            print(str(e), file=sys.stderr)
        code = e.exit_code
    except typer.Abort:
        # Interrupted at a prompt: the message goes below the question, not after it.
        print("" if interrupted else "aborted", file=sys.stderr)
        code = 1
    except _ClickException as e:
        e.show()
        code = e.exit_code
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        print("interrupted", file=sys.stderr)
        code = INTERRUPTED
    # standalone_mode=False hands back typer.Exit's code, or the command's return value (None: success).
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
