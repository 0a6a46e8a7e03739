"""Build, reuse and save the images of one Slurm series.

1. Base: the suite debootstrapped once (slurmk8s.debian, shared with the lab) and imported as
   ``<base repo>:<suite>``, labelled with the key of what was written into it.
2. Resolve: one throwaway container of the base refreshes apt's lists into the cache and
   simulates each image's apt transaction (the exact package versions it would install).
3. Each image's key hashes its recipe text, the base image id and those versions. An image
   already carrying that key is reused (or only re-tagged). The others have their packages
   downloaded into the cache by a second container, then are built offline from the cached lists
   and packages. A warm run therefore costs one ``apt-get update`` and a few inspects.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurmk8s import debian, naming
from slurmk8s.debian import APT_OPTS, DebianError, SlurmRelease, series_of
from slurmk8s.errors import UsageError
from slurmk8s.images import recipes
from slurmk8s.images.engine import ENGINES, Engine
from slurmk8s.images.errors import ImageError
from slurmk8s.images.recipes import ImageRecipe, Package
from slurmk8s.progress import Progress

CACHE_ENV = "SLURMK8S_IMAGE_CACHE"
DEFAULT_CACHE_DIR = Path("/var/cache/slurmk8s/images")

BUILT, CACHED, RETAGGED = "built", "cached", "retagged"


@dataclass(frozen=True)
class BuildOptions:
    """Where images go and what builds them. ``base_repo`` and ``cache_dir`` exist for isolation
    (the bench builds cold without touching the real cache)."""

    registry: str = recipes.DEFAULT_REGISTRY
    engine: str = "podman"
    cache_dir: Path | None = None
    base_repo: str = recipes.DEFAULT_BASE_REPO
    timeout_s: float = 3600

    @property
    def cache(self) -> Path:
        return Path(self.cache_dir or os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


@dataclass(frozen=True)
class ImageResult:
    """What happened to one image."""

    name: str
    refs: tuple[str, ...]
    version: str
    outcome: str
    seconds: float
    key: str


def check_request(series: str, options: BuildOptions) -> SlurmRelease:
    """The Debian release of ``series``; UsageError for a series, engine or registry we cannot take."""
    if series not in debian.SLURM_RELEASES:
        raise UsageError(f"unknown Slurm series {series!r}: images are built for {', '.join(debian.SLURM_RELEASES)}")
    if options.engine not in ENGINES:
        raise UsageError(f"unknown engine {options.engine!r}: expected {' or '.join(ENGINES)}")
    problem = recipes.check_registry(options.registry)
    if problem:
        raise UsageError(problem)
    return debian.SLURM_RELEASES[series]


def _workdir(options: BuildOptions, release: SlurmRelease) -> Path:
    """The suite's cache: apt lists/ and archives/ (the build context), Containerfiles, build.log."""
    work = options.cache / release.suite
    for sub in ("lists/partial", "archives/partial"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    return work


def build_series(series: str, options: BuildOptions, log: Callable[[str], None] = print,
                 progress: Progress | None = None) -> list[ImageResult]:
    """Build (or reuse) every image of a Slurm series; one result per image, in recipe order. `progress`
    shows what a long step (a debootstrap import, a build) is doing while it runs."""
    release = check_request(series, options)
    work = _workdir(options, release)
    with debian.locked(work / "build.lock", log):
        log_file = work / "build.log"
        engine = Engine(options.engine, log_file, progress=progress)
        engine.check()
        log_file.write_text("")
        base_ref, base_id = _ensure_base(engine, release, options, work, log)
        image_recipes = recipes.recipes_for(series)
        started = time.monotonic()
        resolved = _resolve(engine, base_ref, release, image_recipes, work)
        log(f"Slurm {series} ({release.suite}): packages resolved in {time.monotonic() - started:.1f} s")
        plans = [_plan(recipe, release, base_ref, base_id, resolved[recipe.name], options) for recipe in image_recipes]
        results = {plan.recipe.name: _reuse(engine, plan) for plan in plans}
        to_build = [plan for plan in plans if results[plan.recipe.name] is None]
        if to_build:
            _download(engine, base_ref, release, [plan.recipe for plan in to_build], work)
        for plan in to_build:
            results[plan.recipe.name] = _build(engine, plan, release, options, work, log)
        built: list[ImageResult] = []
        for recipe in image_recipes:
            result = results[recipe.name]
            assert result is not None  # every plan _reuse gave None was built just above
            built.append(result)
        return built


def _ensure_base(engine: Engine, release: SlurmRelease, options: BuildOptions, work: Path,
                 log: Callable[[str], None]) -> tuple[str, str]:
    """(ref, id) of the suite's base image, debootstrapped and imported when missing or outdated."""
    ref = f"{options.base_repo}:{release.suite}"
    try:
        mirror, security = debian.debian_mirror(), debian.security_mirror()
    except DebianError as e:
        raise ImageError(str(e)) from e
    files = recipes.base_files(release, mirror, security)
    want = recipes.base_key(release, files)
    labels = engine.labels(ref)
    if labels is not None and labels.get(recipes.LABEL_BASE_KEY) == want:
        return ref, engine.image_id(ref) or ""
    old_id = engine.image_id(ref)
    started = time.monotonic()
    log(f"base image {ref}: debootstrap {release.suite} from {mirror}")
    try:
        debian.check_debootstrap()
    except DebianError as e:
        raise ImageError(f"building the base image of {release.suite} needs debootstrap as root: {e}") from e
    rootfs = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=work))
    rootfs.chmod(0o755)  # mkdtemp makes it 0700; the image's / must be traversable by every user
    try:
        debian.debootstrap(release.suite, rootfs, mirror, engine.log_file, options.timeout_s)
        for path, text in files.items():
            target = rootfs / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(0o755 if path.startswith("usr/sbin/") else 0o644)
        # what debootstrap downloaded lives in the cache from now on, not in the image
        for leftover in [*rootfs.glob("var/lib/apt/lists/*"), *rootfs.glob("var/cache/apt/archives/*.deb"),
                         *rootfs.glob("etc/apt/sources.list.d/*")]:
            if leftover.is_file():
                leftover.unlink()
        engine.import_rootfs(rootfs, ref, [f"LABEL {recipes.LABEL_BASE_KEY}={want}",
                                           f"LABEL {recipes.LABEL_SUITE}={release.suite}", 'CMD ["/bin/bash"]'])
    except DebianError as e:
        raise ImageError(str(e)) from e
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    new_id = engine.image_id(ref) or ""
    if old_id and old_id != new_id:
        engine.remove_if_unused(old_id)
    log(f"base image {ref}: imported in {time.monotonic() - started:.1f} s")
    return ref, new_id


_MARK = "@@slurmk8s"
# The suite's apt state lives in the cache, mounted into the resolve and download containers
# (and bound into each build from the build context).
_APT_CACHE = (("lists", "/var/lib/apt/lists"), ("archives", "/var/cache/apt/archives"))


def resolve_script(image_recipes: tuple[ImageRecipe, ...]) -> str:
    """Shell run in a container of the base: refresh the lists, then per image simulate its apt
    transaction (stdout, between markers)."""
    apt_opts = " ".join(APT_OPTS)
    lines = ["set -u", f"apt-get -q {apt_opts} update >&2 || {{ echo '{_MARK} update-failed'; exit 0; }}"]
    for recipe in image_recipes:
        lines += [f"echo '{_MARK} image {recipe.name}'",
                  f"{recipes.apt_install(recipe.packages, '-s')} 2>&1 || echo '{_MARK} failed'"]
    # drop packages the lists no longer offer, so the cache does not grow forever
    lines.append("apt-get -q autoclean >&2")
    return "\n".join(lines) + "\n"


def download_script(image_recipes: list[ImageRecipe]) -> str:
    """Shell that downloads the packages of each image's transaction into the cache."""
    return "set -e\n" + "".join(f"{recipes.apt_install(r.packages, '-d')} >&2\n" for r in image_recipes)


def parse_resolution(output: str, suite: str) -> dict[str, tuple[Package, ...]]:
    """Per image, the packages of its transaction; ImageError naming what apt refused."""
    if f"{_MARK} update-failed" in output:
        raise ImageError(f"apt-get update of {suite} failed: is the Debian mirror reachable? (see build.log)")
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in output.splitlines():
        if line.startswith(f"{_MARK} image "):
            current = sections.setdefault(line.split()[-1], [])
        else:
            current.append(line)
    resolved = {}
    for name, body in sections.items():
        if f"{_MARK} failed" in body:
            errors = [line for line in body if line.startswith("E:")] or body[-3:]
            raise ImageError(f"{suite} cannot install the packages of {name}: {' '.join(errors).strip()}")
        resolved[name] = recipes.parse_simulation("\n".join(body))
    return resolved


def _resolve(engine: Engine, base_ref: str, release: SlurmRelease, image_recipes: tuple[ImageRecipe, ...],
             work: Path) -> dict[str, tuple[Package, ...]]:
    # Host network: apt reaches the mirror the host reaches, and no container network is created.
    output = engine.run_script(base_ref, resolve_script(image_recipes), [], [(work / a, b) for a, b in _APT_CACHE],
                               network="host", what=f"resolve packages of {release.suite}")
    resolved = parse_resolution(output, release.suite)
    missing = [r.name for r in image_recipes if not resolved.get(r.name)]
    if missing:
        raise ImageError(f"resolving {release.suite} gave no packages for {', '.join(missing)} (see {engine.log_file})")
    return resolved


def _download(engine: Engine, base_ref: str, release: SlurmRelease, image_recipes: list[ImageRecipe],
              work: Path) -> None:
    engine.run_script(base_ref, download_script(image_recipes), [], [(work / a, b) for a, b in _APT_CACHE],
                      network="host", what=f"download packages of {release.suite}")


@dataclass(frozen=True)
class _Plan:
    """An image about to be reused or built: its recipe text, key, tags and version."""

    recipe: ImageRecipe
    text: str
    key: str
    refs: tuple[str, ...]
    version: str


def _plan(recipe: ImageRecipe, release: SlurmRelease, base_ref: str, base_id: str, packages: tuple[Package, ...],
          options: BuildOptions) -> _Plan:
    version = recipes.version_of(packages, recipe.version_package)
    if version is None:
        raise ImageError(f"{release.suite}: {recipe.version_package} is not in the transaction of {recipe.name}")
    if recipe.is_slurm and series_of(version) != release.series:
        raise ImageError(f"{release.suite} gives Slurm {version}, not {release.series}.x: the suite moved on; "
                         f"update slurmk8s.debian.SLURM_RELEASES")
    text = recipes.containerfile(recipe, release, base_ref)
    return _Plan(recipe, text, recipes.cache_key(text, base_id, packages),
                 recipes.image_refs(recipe, release, options.registry, version), version)


def _reuse(engine: Engine, plan: _Plan) -> ImageResult | None:
    """The image carrying the plan's key, under its tags already or re-tagged; None if there is none."""
    started = time.monotonic()
    if all((engine.labels(ref) or {}).get(recipes.LABEL_KEY) == plan.key for ref in plan.refs):
        outcome = CACHED
    else:
        same = engine.images_labelled(recipes.LABEL_KEY, plan.key)
        if not same:
            return None
        previous = _named(engine, plan.refs)
        for ref in plan.refs:  # built before under another name (another registry prefix, say)
            engine.tag(same[0], ref)
        _drop_unnamed(engine, previous, plan.refs)
        outcome = RETAGGED
    return ImageResult(plan.recipe.name, plan.refs, plan.version, outcome, round(time.monotonic() - started, 1), plan.key)


def _build(engine: Engine, plan: _Plan, release: SlurmRelease, options: BuildOptions, work: Path,
           log: Callable[[str], None]) -> ImageResult:
    started = time.monotonic()
    what = f"Slurm {plan.version}" if plan.recipe.is_slurm else plan.version
    log(f"  building {plan.refs[0]} ({what})")
    previous = _named(engine, plan.refs)
    containerfile = work / f"Containerfile.{plan.recipe.name}"
    containerfile.write_text(plan.text)
    engine.build(containerfile, work, plan.refs, _labels(plan.recipe, release, plan.version, plan.key),
                 f"build {plan.refs[0]}", options.timeout_s)
    _drop_unnamed(engine, previous, plan.refs)
    return ImageResult(plan.recipe.name, plan.refs, plan.version, BUILT, round(time.monotonic() - started, 1), plan.key)


def _named(engine: Engine, refs: tuple[str, ...]) -> set[str]:
    return {i for i in (engine.image_id(ref) for ref in refs) if i}


def _drop_unnamed(engine: Engine, previous: set[str], refs: tuple[str, ...]) -> None:
    """Remove the images these tags named before, once no name is left on them."""
    for old in previous - _named(engine, refs):
        engine.remove_if_unused(old)


def _labels(recipe: ImageRecipe, release: SlurmRelease, version: str, key: str) -> dict[str, str]:
    return {
        recipes.LABEL_KEY: key,
        recipes.LABEL_VERSION: version,
        recipes.LABEL_SERIES: release.series,
        recipes.LABEL_SUITE: release.suite,
        "org.opencontainers.image.title": recipe.name,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.description": f"slurmk8s: {recipe.purpose} (Debian {release.suite})",
    }


def archive_name(recipe: ImageRecipe, release: SlurmRelease) -> str:
    """File name of an image's docker-archive tarball."""
    return f"{recipe.name}_{naming.image_tag(release.series, release.os_name)}.tar"


def save_series(series: str, options: BuildOptions, out_dir: Path,
                log: Callable[[str], None] = print) -> list[tuple[Path, bool]]:
    """Write each built image of a series as a docker-archive tarball into out_dir.

    Returns (path, written); a tarball whose recorded image id still matches is kept as is.
    """
    release = check_request(series, options)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    engine = Engine(options.engine, _workdir(options, release) / "save.log")
    engine.check()
    saved = []
    for recipe in recipes.recipes_for(series):
        ref = recipes.image_refs(recipe, release, options.registry)[0]
        image_id = engine.image_id(ref)
        if image_id is None:
            raise ImageError(f"{ref} is not built: run slurmk8s images build --slurm {series}"
                             + (f" --registry {options.registry}" if options.registry != recipes.DEFAULT_REGISTRY else ""))
        path = out_dir / archive_name(recipe, release)
        stamp = path.with_name(path.name + ".id")
        if path.exists() and stamp.exists() and stamp.read_text().strip() == image_id:
            saved.append((path, False))
            continue
        stamp.unlink(missing_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        engine.save(ref, tmp)
        os.replace(tmp, path)
        stamp.write_text(image_id + "\n")
        log(f"  saved {ref} -> {path}")
        saved.append((path, True))
    return saved
