"""Where each Slurm version of the lab comes from: host packages or a debootstrapped rootfs.

22.05 is Debian 12's own Slurm (the host's packages). Newer series run chrooted from a
Debian rootfs built on demand with debootstrap and cached (one directory per series). Which
suite carries which series, and the debootstrap itself, live in slurmk8s.debian (shared with
the image builder).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurmk8s import debian
from slurmk8s.debian import APT_OPTS, DebianError, debian_mirror, series_of, upstream_version
from slurmk8s.lab.errors import LabError

DEFAULT_CACHE_DIR = Path("/var/cache/slurmk8s/rootfs")
CACHE_ENV = "SLURMK8S_LAB_ROOTFS_CACHE"
MARKER = ".slurmk8s-rootfs.json"
# openssh-server: the login pods run the rendered sshd; python3: the power-saving programs.
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "openssh-server", "python3")
# The series the host itself carries (Debian 12): the lab runs it from the host's packages.
HOST_SERIES = "22.05"


@dataclass(frozen=True)
class SlurmSource:
    """One Slurm series of the lab: ``suite`` None means the host's own packages."""

    series: str
    suite: str | None
    description: str


SLURM_SOURCES: dict[str, SlurmSource] = {
    series: SlurmSource(series, None, f"host packages ({release.suite})") if series == HOST_SERIES
    else SlurmSource(series, release.suite, f"{release.suite} rootfs")
    for series, release in debian.SLURM_RELEASES.items()
}


def default_cache_dir() -> Path:
    """The rootfs cache dir: $SLURMK8S_LAB_ROOTFS_CACHE or /var/cache/slurmk8s/rootfs."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


def host_slurm_version() -> str | None:
    """Upstream version of the host's slurmctld package, None if it is not installed."""
    found = debian.dpkg_version(Path("/var/lib/dpkg/status"), "slurmctld")
    return upstream_version(found) if found else None


def rootfs_slurm_version(path: Path) -> str | None:
    """Upstream version of slurmctld installed in the rootfs at ``path``, None if absent."""
    found = debian.dpkg_version(Path(path) / "var/lib/dpkg/status", "slurmctld")
    return upstream_version(found) if found else None


def rootfs_info(path: Path) -> dict | None:
    """The marker written when the rootfs at ``path`` was completed, None if incomplete."""
    try:
        return json.loads((Path(path) / MARKER).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _in_chroot(root: Path, script: str) -> list[str]:
    """argv running a sh script chrooted in root, with /proc and /dev in a private mount ns.

    The namespace dies with the command, so no mount is ever left on the host.
    """
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
            'mount -t proc proc "$1/proc"; mount --rbind /dev "$1/dev"; '
            'exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
            'DEBIAN_FRONTEND=noninteractive LC_ALL=C sh -ec "$2"',
            "in-chroot", str(root), script]


def rootfs_path(series: str, cache_dir: Path) -> Path:
    """Where the rootfs of ``series`` lives in ``cache_dir`` (it may not exist yet)."""
    source = _source(series)
    if source.suite is None:
        raise LabError(f"Slurm {series} comes from the host's packages, it has no rootfs")
    return Path(cache_dir) / f"slurm-{series}-{source.suite}"


def _source(series: str) -> SlurmSource:
    try:
        return SLURM_SOURCES[series]
    except KeyError:
        raise LabError(f"unknown Slurm series {series!r}: expected one of {', '.join(SLURM_SOURCES)}") from None


def ensure_rootfs(series: str, cache_dir: Path | None = None, log: Callable[[str], None] = print,
                  timeout_s: float = 1800) -> Path | None:
    """Return the rootfs running Slurm ``series``, building it once; None for the host's packages."""
    source = _source(series)
    if source.suite is None:
        found = host_slurm_version()
        if found is None or series_of(found) != series:
            raise LabError(f"Slurm {series} needs the host packages (apt-get install slurmctld slurmd "
                           f"slurm-client slurmdbd munge); found {found or 'none'}")
        return None
    cache_dir = Path(cache_dir or default_cache_dir())
    target = rootfs_path(series, cache_dir)
    if _complete(target):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with debian.locked(cache_dir / f".{target.name}.lock", log):
        if _complete(target):  # built by whoever held the lock before us
            return target
        if target.exists():  # an incomplete tree without marker: never reuse it
            shutil.rmtree(target)
        try:
            _build(source, target, log, timeout_s)
        except DebianError as e:
            raise LabError(str(e)) from e
    return target


def _complete(target: Path) -> bool:
    """A finished rootfs that carries every package the lab needs now (older caches are rebuilt)."""
    info = rootfs_info(target)
    return bool(info) and set(SLURM_PACKAGES) <= set(info.get("packages", ()))


def _build(source: SlurmSource, target: Path, log: Callable[[str], None], timeout_s: float) -> None:
    debian.check_debootstrap()
    started = time.monotonic()
    mirror = debian_mirror()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it 0700: maintainer scripts su to system users need to traverse /
    log_file = target.parent / f"{target.name}.build.log"
    log_file.write_text("")
    try:
        log(f"building Slurm {source.series} rootfs: debootstrap {source.suite} from {mirror} into {tmp}")
        debian.debootstrap(source.suite, tmp, mirror, log_file, timeout_s)
        bootstrap_s = time.monotonic() - started
        (tmp / "etc/hosts").write_text("127.0.0.1 localhost\n")
        policy = tmp / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\n# slurmk8s lab: never start services on install\nexit 101\n")
        policy.chmod(0o755)
        apt = " ".join(("apt-get", *APT_OPTS))
        debian.run_logged(_in_chroot(tmp, f"{apt} update -q"), f"apt-get update in {source.suite}", log_file, timeout_s)
        has_sackd = subprocess.run(_in_chroot(tmp, "apt-cache show sackd >/dev/null 2>&1"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        packages = " ".join(SLURM_PACKAGES + (("sackd",) if has_sackd else ()))
        debian.run_logged(_in_chroot(tmp, f"{apt} install -y -q --no-install-recommends {packages}; apt-get clean"),
             f"apt-get install {packages} in {source.suite}", log_file, timeout_s)
        version = rootfs_slurm_version(tmp)
        if version is None or series_of(version) != source.series:
            raise LabError(f"{source.suite} gave Slurm {version or 'nothing'}, not {source.series}.x: "
                           f"the suite moved on; update SLURM_SOURCES")
        info = {
            "series": source.series,
            "suite": source.suite,
            "mirror": mirror,
            "slurm_version": version,
            "slurm_debian_version": debian.dpkg_version(tmp / "var/lib/dpkg/status", "slurmctld"),
            "sackd": has_sackd,
            "packages": packages.split(),
            "debootstrap_seconds": round(bootstrap_s, 1),
            "build_seconds": round(time.monotonic() - started, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / MARKER).write_text(json.dumps(info, indent=2) + "\n")
        os.rename(tmp, target)  # atomic: a rootfs with a marker is always complete
        log(f"built Slurm {version} ({source.suite}{', with sackd' if has_sackd else ', no sackd'}) "
            f"in {info['build_seconds']} s: {target}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m slurmk8s.lab.rootfs build 24.11 26.05 --cache DIR`` or ``show``."""
    parser = argparse.ArgumentParser(prog="python -m slurmk8s.lab.rootfs",
                                     description="Build or show the lab's Slurm rootfs cache.")
    parser.add_argument("action", choices=["build", "show"])
    parser.add_argument("series", nargs="*", default=[s for s, src in SLURM_SOURCES.items() if src.suite])
    parser.add_argument("--cache", type=Path, default=None,
                        help=f"cache dir (default ${CACHE_ENV} or {DEFAULT_CACHE_DIR})")
    args = parser.parse_args(argv)
    cache = args.cache or default_cache_dir()
    try:
        for series in args.series:
            source = _source(series)
            if args.action == "build":
                ensure_rootfs(series, cache)
            if source.suite is None:
                print(f"{series}: host packages, Slurm {host_slurm_version() or 'not installed'}")
                continue
            path = rootfs_path(series, cache)
            info = rootfs_info(path)
            if info is None:
                print(f"{series}: not built ({path})")
            else:
                print(f"{series}: Slurm {info['slurm_version']} from {info['suite']} at {path} "
                      f"(sackd: {'yes' if info['sackd'] else 'no'}, built in {info['build_seconds']} s)")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
