"""The file systems the lab's containers run on: images, exported once per image id.

A container runs on its rendered image when podman has it, else on the project's own image of
the same name for the bundle's Slurm series (``slurmk8s images build --slurm X``, slurm =
401:401, mysql = 999:999, as the rendered securityContexts assume), so that a runAsUser
means the same user in the lab as on a kubelet. Each image is exported (``podman create`` +
``podman export``) into the cache once per image id, with its config (USER, Env, WorkingDir,
Entrypoint, Cmd) beside it; every container then runs on an overlay of that tree with a
writable layer of its own, as a container runtime gives it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from slurmk8s import debian, naming
from slurmk8s.lab.errors import LabError, LabUnavailable

DEFAULT_CACHE_DIR = Path("/var/cache/slurmk8s/rootfs")
CACHE_ENV = "SLURMK8S_LAB_ROOTFS_CACHE"
IMAGES_DIR = "images"
# Before images, the lab ran from debootstrapped trees marked with this file: prune removes them.
LEGACY_MARKER = ".slurmk8s-rootfs.json"
ENGINE = "podman"
_ID = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageConfig:
    """What an image says about how its containers run."""

    user: str = ""
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()

    @classmethod
    def from_inspect(cls, config: dict | None) -> ImageConfig:
        config = config or {}
        env = tuple(tuple(e.split("=", 1)) for e in config.get("Env") or () if "=" in e)
        return cls(config.get("User") or "", env, config.get("WorkingDir") or "",
                   tuple(config.get("Entrypoint") or ()), tuple(config.get("Cmd") or ()))


@dataclass(frozen=True)
class LabImage:
    """The image one rendered image reference runs on in the lab."""

    rendered: str
    ref: str
    image_id: str
    path: Path
    config: ImageConfig

    @property
    def substituted(self) -> bool:
        return self.ref != self.rendered

    def read(self, path: str) -> str:
        """A text file of the image ('' when absent), e.g. /etc/passwd."""
        try:
            return (self.path / path.lstrip("/")).read_text(errors="replace")
        except OSError:
            return ""


def default_cache_dir() -> Path:
    """The export cache: $SLURMK8S_LAB_ROOTFS_CACHE or /var/cache/slurmk8s/rootfs."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


def image_name(ref: str) -> str:
    """'ghcr.io/slinkyproject/slurmd:26.05-ubuntu24.04' -> 'slurmd' (no registry, tag or digest)."""
    return ref.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def project_image(name: str, series: str) -> str:
    """The project's image ``name`` for a Slurm series, as `slurmk8s images build` tags it."""
    release = _release(series)
    return naming.image_ref(naming.PROJECT_REGISTRY, name, naming.image_tag(series, release.os_name))


def _release(series: str) -> debian.SlurmRelease:
    try:
        return debian.slurm_release(series)
    except debian.DebianError as e:
        raise LabUnavailable(f"the lab has no images for Slurm {series}: {e}") from None


def _engine(args: list[str], what: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run([ENGINE, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise LabUnavailable("the lab runs the project's images: install podman (bash tools/install-podman.sh) "
                             "and build them (slurmk8s images build --slurm SERIES)") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{what}: {ENGINE} timed out after {timeout:.0f} s") from None
    if check and done.returncode != 0:
        raise LabError(f"{what}: {ENGINE} exited {done.returncode}: {debian.tail(done.stderr or done.stdout, 5)}")
    return done


def local_images() -> dict[str, str]:
    """Every name podman has an image under -> its id."""
    out = _engine(["images", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"], "list images").stdout
    found = {}
    for line in out.splitlines():
        image_id, _, name = line.partition(" ")
        if name and "<none>" not in name:
            found[name] = image_id.removeprefix("sha256:")
    return found


def candidates(ref: str) -> list[str]:
    """The names a reference can be stored under: a short name is looked up as podman resolves it."""
    name = ref if ":" in ref.rsplit("/", 1)[-1] or "@" in ref else f"{ref}:latest"
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return [name]
    return [f"localhost/{name}", f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"]


def resolve(rendered: Iterable[str], series: str, cache_dir: Path | None = None,
            log: Callable[[str], None] = print) -> dict[str, LabImage]:
    """The image each rendered reference runs on, exported into the cache when not there yet."""
    local = local_images()
    chosen: dict[str, tuple[str, str]] = {}
    for ref in sorted(set(rendered)):
        stored = next((c for c in candidates(ref) if c in local), None)
        use = ref if stored else project_image(image_name(ref), series)
        image_id = local.get(stored or use)
        if image_id is None:
            raise LabUnavailable(f"no image to run {ref}: podman has neither it nor {use} "
                                 f"(build the project's images: slurmk8s images build --slurm {series})")
        chosen[ref] = (use, image_id)
    ids = sorted({image_id for _, image_id in chosen.values()})
    cache = Path(cache_dir or default_cache_dir())
    # An image id names its content, config included: kept in its export record, inspected once.
    raw = {i: info["config"] for i in ids if (info := export_info(i, cache)) and "config" in info}
    missing = [i for i in ids if i not in raw]
    if missing:
        records = json.loads(_engine(["image", "inspect", "--format", "json", *missing], "inspect images").stdout or "[]")
        raw |= {r["Id"].removeprefix("sha256:"): r.get("Config") or {} for r in records}
    images = {ref: LabImage(ref, use, image_id, ensure_exported(image_id, use, cache, log),
                            ImageConfig.from_inspect(raw[image_id]))
              for ref, (use, image_id) in chosen.items()}
    for image_id in missing:
        _remember_config(image_id, cache, raw[image_id])
    return images


def _remember_config(image_id: str, cache_dir: Path, config: dict) -> None:
    """Add the image's config to its export record (written whole, then renamed: readers never see half)."""
    info = export_info(image_id, cache_dir)
    if info is None:
        return
    record = exported_path(image_id, cache_dir).with_suffix(".json")
    tmp = record.with_name(f".{record.name}.{os.getpid()}")
    tmp.write_text(json.dumps({**info, "config": config}, indent=1) + "\n")
    os.replace(tmp, record)


def exported_path(image_id: str, cache_dir: Path) -> Path:
    """Where the tree of an image id lives in the cache (it may not exist yet)."""
    if not _ID.match(image_id):
        raise LabError(f"image id {image_id!r}: expected 64 hex digits")
    return Path(cache_dir) / IMAGES_DIR / image_id


def export_info(image_id: str, cache_dir: Path) -> dict | None:
    """The record written when the export of an image id finished, None if there is none."""
    try:
        return json.loads(exported_path(image_id, cache_dir).with_suffix(".json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def ensure_exported(image_id: str, ref: str, cache_dir: Path, log: Callable[[str], None] = print,
                    timeout_s: float = 900) -> Path:
    """The exported tree of an image, exported once (the record beside it says it is complete)."""
    target = exported_path(image_id, cache_dir)
    if target.is_dir() and export_info(image_id, cache_dir):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with debian.locked(target.parent / ".export.lock", log):
        if target.is_dir() and export_info(image_id, cache_dir):  # exported by whoever held the lock
            return target
        if target.exists():  # an incomplete tree: never reuse it
            shutil.rmtree(target)
        _export(image_id, ref, target, timeout_s)
    log(f"exported {ref} ({image_id[:12]}) for the lab: {target}")
    return target


def _export(image_id: str, ref: str, target: Path, timeout_s: float) -> None:
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{image_id[:12]}.tmp-", dir=target.parent))
    container = _engine(["create", "--pull=never", "--network=none", image_id, "slurmk8s-lab-export"],
                        f"create a container of {ref}").stdout.strip()
    try:
        with subprocess.Popen([ENGINE, "export", container], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as export:
            assert export.stdout is not None and export.stderr is not None  # both PIPE
            # numeric owners, modes and file capabilities exactly as in the image
            untar = subprocess.run(["tar", "-C", str(tmp), "--numeric-owner", "--xattrs", "--xattrs-include=*",
                                    "-xpf", "-"], stdin=export.stdout, capture_output=True, timeout=timeout_s)
            export.stdout.close()
            export_err = export.stderr.read().decode(errors="replace")
            export.wait(timeout=60)
        if export.returncode != 0 or untar.returncode != 0:
            raise LabError(f"export of {ref} failed: {ENGINE} export exited {export.returncode} "
                           f"({export_err.strip()[-300:]}), tar exited {untar.returncode} "
                           f"({untar.stderr.decode(errors='replace').strip()[-300:]})")
        tmp.chmod(0o755)  # mkdtemp makes it 0700; the image's / is traversable by every user
        os.rename(tmp, target)
        info = {"ref": ref, "id": image_id, "export_seconds": round(time.monotonic() - started, 1),
                "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        target.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _engine(["rm", "--force", container], f"remove the export container of {ref}", check=False)


def prune(cache_dir: Path, keep_ids: Iterable[str]) -> list[Path]:
    """Remove exports of images not in keep_ids, and the debootstrapped trees of earlier labs; what went."""
    cache = Path(cache_dir)
    keep = set(keep_ids)
    gone = []
    for path in sorted((cache / IMAGES_DIR).glob("*")) if (cache / IMAGES_DIR).is_dir() else []:
        image_id = path.name.removesuffix(".json")
        if _ID.match(image_id) and image_id not in keep:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            gone.append(path)
    for path in sorted(cache.glob("*")) if cache.is_dir() else []:
        if (path / LEGACY_MARKER).exists():
            shutil.rmtree(path)
            gone.append(path)
            Path(f"{path}.build.log").unlink(missing_ok=True)
    return gone


def series_images(series: str) -> list[str]:
    """The project's image of every component for a Slurm series."""
    return [project_image(name, series) for name in naming.IMAGES]


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m slurmk8s.lab.rootfs build|show [SERIES...]``, ``prune``."""
    parser = argparse.ArgumentParser(prog="python -m slurmk8s.lab.rootfs",
                                     description="Export the project's images for the lab, show or prune the cache.")
    parser.add_argument("action", choices=["build", "show", "prune"])
    parser.add_argument("series", nargs="*", default=list(debian.SLURM_RELEASES))
    parser.add_argument("--cache", type=Path, default=None,
                        help=f"cache dir (default ${CACHE_ENV} or {DEFAULT_CACHE_DIR})")
    args = parser.parse_args(argv)
    cache = args.cache or default_cache_dir()
    try:
        if args.action == "prune":
            for path in prune(cache, set(local_images().values())):
                print(f"removed {path}")
            return 0
        for series in args.series:
            refs = series_images(series)
            if args.action == "build":
                resolve(refs, series, cache)
            local = local_images()
            for ref in refs:
                image_id = local.get(ref)
                info = export_info(image_id, cache) if image_id else None
                state = "not built" if image_id is None else "not exported" if info is None else \
                    f"{exported_path(image_id, cache)} (exported in {info['export_seconds']} s)"
                print(f"{series}: {ref}: {state}")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
