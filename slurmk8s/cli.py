"""The slurmk8s command line: parse flags, call an action, print its errors once.

Imports of actions happen inside each command so `--help` and `render` stay fast
and never load the Kubernetes client.
"""

import atexit
import gc
import os
import signal
import sys
from typing import Optional, TextIO

import typer

from slurmk8s.errors import OutputError, SlurmK8sError

# rich_markup_mode=None on every Typer() of the CLI: plain help and error text. typer's rich
# formatting imports rich's console, markdown and pygments (about 50 ms, more than the rest of `--help`).
# add_completion=False: typer's own --show-completion ignores a shell named after it whenever it can detect
# the running one (`--show-completion zsh` printed bash's script); ours takes the shell it is given.
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None, add_completion=False,
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


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
COMPLETE_VAR = "_SLURMK8S_COMPLETE"  # the console script's name, as click's completion protocol has it


def _print_completion(ctx: typer.Context, shell: Optional[str]) -> None:
    if shell is None or ctx.resilient_parsing:
        return
    if shell not in SHELLS:
        raise typer.BadParameter(f"{shell!r}: choose one of {', '.join(SHELLS)}", param_hint="--show-completion")
    from typer.completion import get_completion_script
    typer.echo(get_completion_script(prog_name="slurmk8s", complete_var=COMPLETE_VAR, shell=shell))
    raise typer.Exit()


@app.callback()
def _root(show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                            help="Print the version and exit."),
          show_completion: Optional[str] = typer.Option(
              None, "--show-completion", metavar="SHELL", callback=_print_completion, is_eager=True,
              help=f"Print the completion script of SHELL ({', '.join(SHELLS[:3])}, powershell), e.g. "
                   "`slurmk8s --show-completion zsh > ~/.zfunc/_slurmk8s`.")) -> None:
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
def validate(profile: str = typer.Argument(..., help="Cluster profile (YAML)."),
             strict: bool = typer.Option(False, "--strict",
                                         help="Warnings (docs/security.md) are errors: exit 2 when there is one.")) -> None:
    """Check a profile against the schema, the cross-field rules and what the API server would refuse."""
    from slurmk8s.errors import ProfileError
    from slurmk8s.profile.files import read_profile
    from slurmk8s.profile.review import security_warnings
    from slurmk8s.render import render
    p = read_profile(profile)
    render(p)  # the bundle's own checks (names, the API server's rules: render/apirules.py), as render runs them
    warnings = security_warnings(p)
    if strict and warnings:
        raise ProfileError(p.source, warnings)
    for warning in warnings:
        typer.echo(f"warning: {warning.format(p.source)}", err=True)
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
    if output.lower() in ("yaml", "yml", "json"):  # kubectl's -o takes a format: never a directory made by mistake
        from slurmk8s.errors import UsageError
        raise UsageError(f"-o {output}: a format's name, not a directory; did you mean -o - (one YAML stream) or "
                         f"--format ({'|'.join(FORMATS)})? For a directory of that name write -o ./{output}")
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


INTERRUPTED = 130  # 128 + SIGINT

# At exit the interpreter's last garbage collections walk every object the imports made, about 15 ms
# of a render (issue 17); frozen, they are skipped. The process is ending: nothing is left to reclaim.
atexit.register(gc.freeze)

# Typer 0.2x vendors its own click: catch the classes typer raises, whichever click that is.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _GuardedStream:
    """sys.stdout or sys.stderr for the length of a command. It remembers a write that failed (a full disk,
    a closed pipe), whoever wrote (our commands, typer's help and errors, print), so that main() reports
    that OSError as one line; a handler that words it better (render's write_stdout) still sees it first."""

    def __init__(self, stream: TextIO, name: str):
        self._stream, self.name = stream, name
        self.failed: Optional[OSError] = None

    def write(self, text: str) -> int:
        if text == "":
            return 0  # click probes a stream with an empty write, and ignores what that raises
        try:
            return self._stream.write(text)
        except OSError as e:
            self.failed = e
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self.failed = e
            raise

    def park_if_failed(self) -> None:
        """Point a stream that failed at /dev/null: else Python's own flush at exit fails again, with a traceback."""
        if self.failed is not None:
            _park(self._stream)

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding, buffer: the stream's own
        return getattr(self._stream, name)


def _guard(stream: Optional[TextIO], name: str) -> Optional[TextIO]:
    return stream if stream is None else _GuardedStream(stream, name)  # type: ignore[return-value]


def _write_failed(error: OSError, guards: tuple) -> int:
    """The one path for a write to stdout or stderr that failed: one line, exit 1. Any other OSError that
    reaches main() is a bug and keeps its traceback."""
    broken = next((g for g in guards if isinstance(g, _GuardedStream) and g.failed is not None), None)
    if broken is None:
        raise error
    _last_word(f"cannot write to {broken.name}: {broken.failed.strerror or broken.failed}")
    return OutputError.exit_code


def _park(stream: object) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # type: ignore[attr-defined]
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def _last_word(text: str) -> None:
    """One line on standard error; when that fails too, the exit code alone tells."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


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

    if COMPLETE_VAR in os.environ:
        # A shell asking for completions (the script --show-completion prints): add_completion=False left
        # typer's completion classes unregistered.
        from typer.completion import completion_init
        completion_init()
    previous = signal.signal(signal.SIGINT, on_interrupt)
    streams = sys.stdout, sys.stderr
    guards = _guard(sys.stdout, "standard output"), _guard(sys.stderr, "standard error")
    sys.stdout, sys.stderr = guards
    try:
        code = app(standalone_mode=False)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not in Python's flush at exit: a full disk is still one line and exit 1
    except KeyboardInterrupt:
        code = INTERRUPTED
    except SlurmK8sError as e:
        if not interrupted:
            _last_word(str(e))
        code = e.exit_code
    except typer.Abort:
        # Interrupted at a prompt: the message goes below the question, not after it.
        _last_word("" if interrupted else "aborted")
        code = 1
    except _ClickException as e:
        try:
            e.show()
        except OSError:
            pass
        code = e.exit_code
    except OSError as e:
        code = _write_failed(e, guards)
    finally:
        signal.signal(signal.SIGINT, previous)
        if interrupted:
            _last_word("interrupted")
            code = INTERRUPTED
        sys.stdout, sys.stderr = streams
        for guard in guards:
            if isinstance(guard, _GuardedStream):
                guard.park_if_failed()
    # standalone_mode=False hands back typer.Exit's code, or the command's return value (None: success).
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
