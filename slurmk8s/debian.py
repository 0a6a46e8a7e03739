"""Debian as the source of Slurm: which suite carries which Slurm series, and how to bootstrap it.

Shared by the pod lab (chrooted rootfs) and the image builder (podman images), which sit side
by side above this module; it imports nothing of slurmk8s but the error base.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from slurmk8s.errors import SlurmK8sError

DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
# Debian's release files can be older than the machine's clock (snapshot mirrors).
APT_OPTS = ("-o", "Acquire::Check-Valid-Until=false")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"


class DebianError(SlurmK8sError):
    """debootstrap, apt or the mirror configuration failed; callers wrap it in their own error."""

    exit_code = 1


@dataclass(frozen=True)
class SlurmRelease:
    """A Slurm series and the Debian suite that packages it.

    ``os_name`` is the image tag suffix (``<series>-<os_name>``); ``stable`` says whether the
    suite is a release with -updates and -security suites (testing has neither worth using).
    """

    series: str
    suite: str
    os_name: str
    stable: bool


# forky is Debian testing until it is released as Debian 14; its tag suffix says the number
# it will carry, like Slinky's ubuntu26.04 did before that release.
SLURM_RELEASES: dict[str, SlurmRelease] = {
    "22.05": SlurmRelease("22.05", "bookworm", "debian12", stable=True),
    "24.11": SlurmRelease("24.11", "trixie", "debian13", stable=True),
    "26.05": SlurmRelease("26.05", "forky", "debian14", stable=False),
}


def slurm_release(series: str) -> SlurmRelease:
    """The Debian release of a Slurm series; DebianError naming the known ones otherwise."""
    try:
        return SLURM_RELEASES[series]
    except KeyError:
        raise DebianError(f"unknown Slurm series {series!r}: expected one of {', '.join(SLURM_RELEASES)}") from None


def dpkg_version(status_file: Path, package: str) -> str | None:
    """Version of an installed package read from a dpkg status file (no dpkg needed)."""
    try:
        text = Path(status_file).read_text(errors="replace")
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


def _configured_uris() -> list[tuple[str, str]]:
    """(uri, suites) of every deb source apt is configured with, deb822 files first."""
    found = []
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.exists():
        for stanza in deb822.read_text().split("\n\n"):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites:
                found.append((uris.group(1).rstrip("/"), suites.group(1)))
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m:
                found.append((m.group(1).rstrip("/"), m.group(2)))
    return found


def debian_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 sources first, then sources.list)."""
    for uri, suites in _configured_uris():
        if "security" not in suites:
            return uri
    raise DebianError("no Debian mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list")


def security_mirror() -> str:
    """The Debian security mirror apt is configured with, else Debian's own."""
    for uri, suites in _configured_uris():
        if "security" in suites:
            return uri
    return DEFAULT_SECURITY_MIRROR


def apt_sources(release: SlurmRelease, mirror: str, security: str) -> str:
    """sources.list text for a suite: a stable release also gets its -updates and -security fixes."""
    lines = [f"deb {mirror} {release.suite} main"]
    if release.stable:
        lines += [f"deb {mirror} {release.suite}-updates main", f"deb {security} {release.suite}-security main"]
    return "\n".join(lines) + "\n"


def tail(text: str, lines: int = 25) -> str:
    """The last lines of a command's output, for an error message."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_logged(argv: list[str], what: str, log_file: Path, timeout: float, stdin=subprocess.DEVNULL) -> None:
    """Run argv, appending its output to log_file; DebianError with the output's tail on failure."""
    with Path(log_file).open("ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            rc = subprocess.run(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = None
        except FileNotFoundError:
            raise DebianError(f"{what}: {argv[0]} is not installed") from None
    if rc != 0:
        outcome = "timed out" if rc is None else f"exited {rc}"
        raise DebianError(f"{what} {outcome}; last output ({log_file}):\n"
                          f"{tail(Path(log_file).read_text(errors='replace'))}")


@contextlib.contextmanager
def locked(lock_path: Path, log: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on lock_path, saying so when another build holds it first."""
    with Path(lock_path).open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {lock_path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_debootstrap() -> None:
    """DebianError unless debootstrap can run here (installed, and we are root)."""
    if shutil.which("debootstrap") is None:
        raise DebianError("debootstrap is missing: apt-get install -y --no-install-recommends debootstrap")
    if os.geteuid() != 0:
        raise DebianError("debootstrap needs root")


def debootstrap(suite: str, target: Path, mirror: str, log_file: Path, timeout_s: float) -> None:
    """A minbase Debian ``suite`` in the empty dir ``target`` (needs root and debootstrap)."""
    check_debootstrap()
    # debootstrap mounts /proc and /sys in the target: a private mount ns drops them even on failure
    argv = ["unshare", "--mount", "--propagation", "private", "debootstrap", "--variant=minbase",
            suite, str(target), mirror]
    if not Path(DEBOOTSTRAP_SCRIPTS, suite).exists():
        # an older debootstrap lacks newer suite names; every current suite uses the sid script
        argv.append(str(Path(DEBOOTSTRAP_SCRIPTS, "sid")))
    run_logged(argv, f"debootstrap {suite}", log_file, timeout_s)
