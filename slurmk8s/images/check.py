"""`slurmk8s images check`: run an image's contract (slurmk8s.images.contract) in a container of it.

One throwaway container per image (two when its Slurm series must be read from it first), run
as root with no network and the image's own environment (PATH), its entrypoint replaced by /bin/sh.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from slurmk8s import versions
from slurmk8s.debian import tail
from slurmk8s.errors import UsageError
from slurmk8s.images import contract, recipes
from slurmk8s.images.contract import Assertion
from slurmk8s.images.engine import ENGINES
from slurmk8s.images.errors import ImageError


@dataclass(frozen=True)
class CheckResult:
    """One image against its contract."""

    image: str
    role: str
    series: str | None  # None for the database image
    auth: str | None
    checks: tuple[Assertion, ...]
    failed: tuple[Assertion, ...]
    error: str | None = None  # why no check could run

    @property
    def ok(self) -> bool:
        return not self.failed and self.error is None

    def lines(self) -> list[str]:
        """A summary line, then one line per failed check."""
        if self.error is not None:
            return [f"{self.image} ({self.role}): not checked: {self.error}"]
        what = self.role if self.series is None else f"{self.role}, Slurm {self.series}, auth/{self.auth}"
        if not self.failed:
            return [f"{self.image} ({what}): all {len(self.checks)} checks passed"]
        return [f"{self.image} ({what}): {len(self.failed)} of {len(self.checks)} checks failed",
                *(f"  FAILED {a.what}: {a.why}" for a in self.failed)]


def role_of(image: str, role: str | None) -> str:
    """The component an image is for: ``role`` when given, else its name (``.../slurmctld:tag``)."""
    if role is not None:
        if role not in contract.ROLES:
            raise UsageError(f"--as {role!r}: expected one of {', '.join(contract.ROLES)}")
        return role
    name = image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]
    if name not in contract.ROLES:
        raise UsageError(f"cannot tell which component {image} is for: its name is not one of "
                         f"{', '.join(contract.ROLES)}; pass --as COMPONENT")
    return name


def check_images(images: list[str], role: str | None = None, series: str | None = None, auth: str | None = None,
                 engine: str = "podman", echo: Callable[[str], None] = print) -> list[CheckResult]:
    """Check each image against its contract, print the results; every argument is checked first."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: expected {' or '.join(ENGINES)}")
    if series is not None and series not in versions.SUPPORTED:
        raise UsageError(f"--slurm {series!r}: expected one of {', '.join(versions.SUPPORTED)}")
    if auth is not None and auth not in contract.AUTHS:
        raise UsageError(f"--auth {auth!r}: expected one of {', '.join(contract.AUTHS)}")
    roles = [role_of(image, role) for image in images]
    results = []
    for image, image_role in zip(images, roles):
        try:
            result = check_image(image, image_role, series, auth, engine)
        except ImageError as e:
            result = CheckResult(image, image_role, series, auth, (), (), error=str(e))
        for line in result.lines():
            echo(line)
        results.append(result)
    return results


def check_image(image: str, role: str, series: str | None, auth: str | None, engine: str = "podman") -> CheckResult:
    """Run the contract of ``role`` in a container of ``image``."""
    user, labels = _inspect(engine, image)
    if role == "mariadb":
        series = auth = None
        checks = contract.assertions(role, versions.DEFAULT, "slurm")
    else:
        # the project's images say their series in a label; others are asked (one more container)
        series = series or labels.get(recipes.LABEL_SERIES) or _series_of(engine, image, role, user)
        auth = auth or versions.dialect(series).default_auth
        checks = contract.assertions(role, series, auth)
    done = _run(engine, image, user, contract.check_script(checks))
    if done.returncode != 0 and not done.stdout:
        # the script never started (no /bin/sh, say): no check can run, so say why once
        raise ImageError(f"cannot run /bin/sh in it, which every rendered init container needs "
                         f"({engine} run exited {done.returncode}: {tail(done.stderr, 2)})")
    return CheckResult(image, role, series, auth, checks, tuple(contract.failed_checks(done.stdout, checks)))


def _inspect(engine: str, image: str) -> tuple[str, dict[str, str]]:
    """The image's configured USER and its labels; pulls it first when it is not here."""
    inspect = ["image", "inspect", "--format", "{{json .Config}}", image]
    done = _engine(engine, inspect, 120)
    if done.returncode != 0:
        pulled = _engine(engine, ["pull", "-q", image], 900)
        if pulled.returncode != 0:
            raise ImageError(f"not here and {engine} pull failed: {tail(pulled.stderr or pulled.stdout, 1)}")
        done = _engine(engine, inspect, 120)
        if done.returncode != 0:
            raise ImageError(f"{engine} image inspect failed: {tail(done.stderr, 3)}")
    config = json.loads(done.stdout or "{}") or {}
    return config.get("User") or "", config.get("Labels") or {}


def _series_of(engine: str, image: str, role: str, user: str) -> str:
    """The Slurm series the image's version program prints; ImageError when it prints none we render for."""
    program = contract.VERSION_PROGRAM[role]
    done = _run(engine, image, user, contract.version_command(role))
    found = re.search(r"^slurm(?:-wlm)? (\d+\.\d+)\.", done.stdout, re.M)
    if not found:
        raise ImageError(f"`{program} -V` printed no Slurm version ({tail(done.stdout or done.stderr, 1)!r}); "
                         f"is it a {role} image? pass --slurm SERIES to check it anyway")
    if found.group(1) not in versions.SUPPORTED:
        raise ImageError(f"Slurm {found.group(1)} is not a series slurmk8s renders for "
                         f"({', '.join(versions.SUPPORTED)})")
    return found.group(1)


def _run(engine: str, image: str, user: str, script: str) -> subprocess.CompletedProcess:
    argv = ["run", "--rm", "--network=none", "--pull=never", "--user", "0", "--entrypoint", "/bin/sh",
            "-e", f"{contract.IMAGE_USER_ENV}={user}", image, "-c", script]
    return _engine(engine, argv, 300)


def _engine(engine: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([engine, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ImageError(f"{engine} is not installed (bash tools/install-podman.sh)") from None
    except subprocess.TimeoutExpired:
        raise ImageError(f"{engine} {args[0]} timed out after {timeout:.0f} s") from None

