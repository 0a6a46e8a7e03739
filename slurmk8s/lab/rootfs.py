"""Where each Slurm version of the lab comes from: host packages or a debootstrapped rootfs.

22.05 is Debian 12's own Slurm (the host's packages). Newer series run chrooted from a
Debian rootfs built on demand with debootstrap and cached (one directory per series).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from slurmk8s.lab.errors import LabError

DEFAULT_CACHE_DIR = Path("/var/cache/slurmk8s/rootfs")
CACHE_ENV = "SLURMK8S_LAB_ROOTFS_CACHE"
MARKER = ".slurmk8s-rootfs.json"
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
# openssh-server: the login pods run the rendered sshd; python3: the power-saving programs.
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "openssh-server", "python3")
# Debian's release files can be older than the machine's clock (snapshot mirrors).
APT_OPTS = ("-o", "Acquire::Check-Valid-Until=false")


@dataclass(frozen=True)
class SlurmSource:
    """One Slurm series of the lab: ``suite`` None means the host's own packages."""

    series: str
    suite: str | None
    description: str


SLURM_SOURCES: dict[str, SlurmSource] = {
    "22.05": SlurmSource("22.05", None, "host packages (Debian 12 bookworm)"),
    "24.11": SlurmSource("24.11", "trixie", "Debian 13 trixie rootfs"),
    "26.05": SlurmSource("26.05", "forky", "Debian testing (forky) rootfs"),
}


def default_cache_dir() -> Path:
    """The rootfs cache dir: $SLURMK8S_LAB_ROOTFS_CACHE or /var/cache/slurmk8s/rootfs."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


def _dpkg_version(status_file: Path, package: str) -> str | None:
    """Version of an installed package read from a dpkg status file (no dpkg needed)."""
    try:
        text = status_file.read_text(errors="replace")
    except FileNotFoundError:
        return None
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace()
        )
        if fields.get("Package") == package and fields.get("Status", "").endswith(" installed"):
            return fields.get("Version")
    return None


def upstream_version(debian_version: str) -> str:
    """'24.11.5-1' -> '24.11.5' (drops the epoch and the Debian revision)."""
    version = debian_version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def series_of(version: str) -> str:
    """'24.11.5' -> '24.11'."""
    return ".".join(version.split(".")[:2])


def host_slurm_version() -> str | None:
    """Upstream version of the host's slurmctld package, None if it is not installed."""
    found = _dpkg_version(Path("/var/lib/dpkg/status"), "slurmctld")
    return upstream_version(found) if found else None


def rootfs_slurm_version(path: Path) -> str | None:
    """Upstream version of slurmctld installed in the rootfs at ``path``, None if absent."""
    found = _dpkg_version(Path(path) / "var/lib/dpkg/status", "slurmctld")
    return upstream_version(found) if found else None


def rootfs_info(path: Path) -> dict | None:
    """The marker written when the rootfs at ``path`` was completed, None if incomplete."""
    try:
        return json.loads((Path(path) / MARKER).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def debian_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 sources first, then sources.list)."""
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.exists():
        for stanza in deb822.read_text().split("\n\n"):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and "security" not in suites.group(1):
                return uris.group(1).rstrip("/")
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m and "security" not in m.group(2):
                return m.group(1).rstrip("/")
    raise LabError("no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list")


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _run(argv: list[str], what: str, log_file: Path, timeout: float) -> None:
    """Run argv, appending its output to log_file; LabError with the output's tail on failure."""
    with log_file.open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = None
    if rc != 0:
        outcome = "timed out" if rc is None else f"exited {rc}"
        raise LabError(f"{what} {outcome}; last output ({log_file}):\n"
                       f"{_tail(log_file.read_text(errors='replace'))}")


def _in_chroot(root: Path, script: str) -> list[str]:
    """argv running a sh script chrooted in root, with /proc and /dev in a private mount ns.

    The namespace dies with the command, so no mount is ever left on the host.
    """
    return ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
            'mount -t proc proc "$1/proc"; mount --rbind /dev "$1/dev"; '
            'exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
            'DEBIAN_FRONTEND=noninteractive LC_ALL=C sh -ec "$2"',
            "in-chroot", str(root), script]


@contextlib.contextmanager
def _locked(lock_path: Path, log: Callable[[str], None]) -> Iterator[None]:
    with lock_path.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {lock_path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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
    with _locked(cache_dir / f".{target.name}.lock", log):
        if _complete(target):  # built by whoever held the lock before us
            return target
        if target.exists():  # an incomplete tree without marker: never reuse it
            shutil.rmtree(target)
        _build(source, target, log, timeout_s)
    return target


def _complete(target: Path) -> bool:
    """A finished rootfs that carries every package the lab needs now (older caches are rebuilt)."""
    info = rootfs_info(target)
    return bool(info) and set(SLURM_PACKAGES) <= set(info.get("packages", ()))


def _build(source: SlurmSource, target: Path, log: Callable[[str], None], timeout_s: float) -> None:
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is missing: apt-get install -y --no-install-recommends debootstrap")
    if os.geteuid() != 0:
        raise LabError("building a rootfs needs root (debootstrap and chroot)")
    started = time.monotonic()
    mirror = debian_mirror()
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it 0700: maintainer scripts su to system users need to traverse /
    log_file = target.parent / f"{target.name}.build.log"
    log_file.write_text("")
    try:
        log(f"building Slurm {source.series} rootfs: debootstrap {source.suite} from {mirror} into {tmp}")
        # debootstrap mounts /proc and /sys in the target: a private mount ns drops them even on failure
        argv = ["unshare", "--mount", "--propagation", "private", "debootstrap", "--variant=minbase",
                source.suite, str(tmp), mirror]
        if not Path(DEBOOTSTRAP_SCRIPTS, source.suite).exists():
            # an older debootstrap lacks newer suite names; every current suite uses the sid script
            argv.append(str(Path(DEBOOTSTRAP_SCRIPTS, "sid")))
        _run(argv, f"debootstrap {source.suite}", log_file, timeout_s)
        bootstrap_s = time.monotonic() - started
        (tmp / "etc/hosts").write_text("127.0.0.1 localhost\n")
        policy = tmp / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\n# slurmk8s lab: never start services on install\nexit 101\n")
        policy.chmod(0o755)
        apt = " ".join(("apt-get", *APT_OPTS))
        _run(_in_chroot(tmp, f"{apt} update -q"), f"apt-get update in {source.suite}", log_file, timeout_s)
        has_sackd = subprocess.run(_in_chroot(tmp, "apt-cache show sackd >/dev/null 2>&1"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        packages = " ".join(SLURM_PACKAGES + (("sackd",) if has_sackd else ()))
        _run(_in_chroot(tmp, f"{apt} install -y -q --no-install-recommends {packages}; apt-get clean"),
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
            "slurm_debian_version": _dpkg_version(tmp / "var/lib/dpkg/status", "slurmctld"),
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
