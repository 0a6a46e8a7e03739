"""`slurmk8s images ...`: build the project's Slurm images from Debian packages, or save them."""

from typing import List, Optional

import typer

from slurmk8s.versions import DEFAULT

images_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="The project's Slurm and MariaDB images, built here from Debian packages (needs root).")

SLURM_HELP = "Slurm series: 22.05 (bookworm), 24.11 (trixie) or 26.05 (forky); repeat for several."
REGISTRY_HELP = "Registry and path prefix of the tags, e.g. registry.example.org/hpc for an air-gapped site."
ENGINE_HELP = "podman or docker."
CACHE_HELP = "Cache of apt lists and packages (default $SLURMK8S_IMAGE_CACHE or /var/cache/slurmk8s/images)."


def _options(registry: str, engine: str, cache: Optional[str]):
    from pathlib import Path

    from slurmk8s.images.build import BuildOptions
    return BuildOptions(registry=registry, engine=engine, cache_dir=Path(cache) if cache else None)


@images_app.command("build")
def build(slurm: List[str] = typer.Option([DEFAULT], "--slurm", help=SLURM_HELP),
          registry: str = typer.Option("localhost/slurmk8s", "--registry", help=REGISTRY_HELP),
          engine: str = typer.Option("podman", "--engine", help=ENGINE_HELP),
          cache: Optional[str] = typer.Option(None, "--cache", help=CACHE_HELP)) -> None:
    """Build slurmctld, slurmd, slurmdbd, login, slurmrestd and mariadb, tagged <registry>/<image>:<series>-<os>.

    A rebuild with the same package versions and recipe reuses the images (seconds).
    """
    from slurmk8s.actions.images import build_images
    build_images(list(slurm), _options(registry, engine, cache), echo=typer.echo)


@images_app.command("save")
def save(slurm: List[str] = typer.Option([DEFAULT], "--slurm", help=SLURM_HELP),
         output: str = typer.Option(..., "-o", "--output", help="Directory for the docker-archive tarballs."),
         registry: str = typer.Option("localhost/slurmk8s", "--registry", help=REGISTRY_HELP),
         engine: str = typer.Option("podman", "--engine", help=ENGINE_HELP),
         cache: Optional[str] = typer.Option(None, "--cache", help=CACHE_HELP)) -> None:
    """Write each built image as <image>_<series>-<os>.tar (docker-archive) for kind load or podman load."""
    from slurmk8s.actions.images import save_images
    save_images(list(slurm), _options(registry, engine, cache), output, echo=typer.echo)


@images_app.command("check")
def check(images: List[str] = typer.Argument(..., help="Images to check (pulled when not here)."),
          role: Optional[str] = typer.Option(None, "--as", help="Component of every image (slurmctld, slurmd, slurmdbd, "
                                             "login, slurmrestd, mariadb); default: the image's name."),
          slurm: Optional[str] = typer.Option(None, "--slurm", help="Slurm series the bundle is for; default: the "
                                              "one the image's slurmctld/slurmd/... -V prints."),
          auth: Optional[str] = typer.Option(None, "--auth", help="slurm or munge; default: the series' default."),
          engine: str = typer.Option("podman", "--engine", help=ENGINE_HELP)) -> None:
    """Check images against what the rendered bundle assumes of them (docs/images.md); exit 1 if any check fails."""
    from slurmk8s.images.check import check_images
    results = check_images(list(images), role, slurm, auth, engine, echo=typer.echo)
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `images` command group."""
    app.add_typer(images_app, name="images")
