"""What each image holds, how it is named, and the key that says when a rebuild is needed.

Pure: no engine, no network. The conventions come from the rendered pods (their commands,
users and mounts) and from Slinky's image build files (docs/research/slinky-facts.md):
SlurmUser `slurm` is uid/gid 401, daemons on PATH in /usr/sbin, config in /etc/slurm.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from slurmk8s import naming, versions
from slurmk8s.debian import SlurmRelease, apt_sources, upstream_version

DEFAULT_REGISTRY = naming.PROJECT_REGISTRY
# Internal: the imported debootstrap rootfs every image starts FROM (never pushed).
DEFAULT_BASE_REPO = "localhost/slurmk8s-base/debian"

LABEL_KEY = "io.slurmk8s.image.key"
LABEL_BASE_KEY = "io.slurmk8s.base.key"
LABEL_VERSION = "io.slurmk8s.version"  # upstream version of the image's main package
LABEL_SERIES = "io.slurmk8s.slurm.series"
LABEL_SUITE = "io.slurmk8s.debian.suite"

# Bump when the key's inputs change meaning (not when a recipe changes: its text is an input).
KEY_FORMAT = 1

# One apt transaction names every installed package as well as the image's own, so it upgrades
# the base and installs in one go; the resolve step simulates exactly this transaction.
_INSTALLED = "$(dpkg-query -W -f '${db:Status-Abbrev}${Package}\\n' | sed -n 's/^ii *//p')"

# A registry prefix: host[:port] and path segments of lowercase letters, digits and separators.
_REGISTRY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$")


@dataclass(frozen=True)
class User:
    """A system account created before the packages, so their maintainer scripts reuse its ids."""

    name: str
    uid: int
    gid: int


SLURM_USER = User("slurm", 401, 401)  # Slinky's SlurmUser; the rendered pods chown to it by name
MYSQL_USER = User("mysql", 999, 999)  # the rendered MariaDB pod runs as 999 and chowns to mysql


@dataclass(frozen=True)
class ImageRecipe:
    """One image: its Debian packages, accounts, setup after install and default command."""

    name: str
    purpose: str
    packages: tuple[str, ...]
    version_package: str  # the package whose upstream version the image carries (Slurm's or MariaDB's)
    users: tuple[User, ...]
    setup: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    run_as: str | None = None

    @property
    def is_slurm(self) -> bool:
        return self.users[:1] == (SLURM_USER,)


# munge: Debian's Slurm packages depend on it, and munge profiles run munged as a sidecar
# from the daemon's own image. python3: the power-saving programs (ResumeProgram). The JWT
# plugin: a slurm.conf with AuthAltTypes=auth/jwt is read by every daemon and client.
# procps: ps and kill for whoever debugs a pod.
_SLURM_COMMON = ("munge", "python3", "slurm-wlm-jwt-plugin", "procps")
# /etc/slurm is where every rendered pod mounts its config; the rest are state dirs the daemons expect.
_SLURM_DIRS = ("install -d -m 0755 /etc/slurm /var/spool/slurmd /run/munge",
               "install -d -m 0755 -o slurm -g slurm /var/spool/slurmctld /var/log/slurm /run/slurm")


def recipes_for(series: str) -> tuple[ImageRecipe, ...]:
    """Every image of a Slurm series, in build order."""
    has_sackd = versions.dialect(series).has_auth_slurm  # sackd arrived with auth/slurm in 23.11
    slurm = (SLURM_USER,)
    return (
        ImageRecipe("slurmctld", "slurmctld, the Slurm clients (scontrol for the power programs, sacctmgr) and python3",
                    ("slurmctld", "slurm-client", *_SLURM_COMMON), "slurmctld", slurm,
                    _SLURM_DIRS, ("slurmctld", "-D")),
        ImageRecipe("slurmd", "slurmd and slurmstepd, the Slurm clients (srun inside jobs)",
                    ("slurmd", "slurm-client", *_SLURM_COMMON), "slurmd", slurm,
                    _SLURM_DIRS, ("slurmd", "-D")),
        ImageRecipe("slurmdbd", "slurmdbd with its MySQL plugin, and the Slurm clients",
                    ("slurmdbd", "slurm-client", *_SLURM_COMMON), "slurmdbd", slurm,
                    _SLURM_DIRS, ("slurmdbd", "-D")),
        ImageRecipe("login", "sshd and the Slurm clients" + (", sackd for auth/slurm" if has_sackd else "")
                    + ", munged for munge profiles",
                    ("slurm-client", "openssh-server", *(("sackd",) if has_sackd else ()), *_SLURM_COMMON),
                    "slurm-client", slurm,
                    # the host key comes from the create-once Secret <cluster>-ssh-host-keys: none may ship in the image
                    _SLURM_DIRS + ("rm -f /etc/ssh/ssh_host_*", "install -d -m 0755 /run/sshd"),
                    ("/usr/sbin/sshd", "-D", "-e")),
        ImageRecipe("slurmrestd", "slurmrestd with the JWT plugin",
                    ("slurmrestd", *_SLURM_COMMON), "slurmrestd", slurm,
                    _SLURM_DIRS, ("slurmrestd", "0.0.0.0:6820")),
        ImageRecipe("mariadb", "Debian's MariaDB server for the embedded accounting database",
                    ("mariadb-server",), "mariadb-server", (MYSQL_USER,),
                    # an empty datadir, as the pod's init container expects to create it
                    ("install -d -m 0755 -o mysql -g mysql /var/lib/mysql /run/mysqld",
                     "find /var/lib/mysql -mindepth 1 -delete"),
                    ("mariadbd", "--user=mysql"), run_as=f"{MYSQL_USER.uid}:{MYSQL_USER.gid}"),
    )


def image_names() -> tuple[str, ...]:
    """The names of the images every series has."""
    return tuple(r.name for r in recipes_for(versions.DEFAULT))


def check_registry(registry: str) -> str | None:
    """Why a registry prefix is unusable, None when it is fine."""
    if not _REGISTRY.match(registry.rstrip("/")):
        return (f"registry {registry!r} is not an image name prefix: expected host[:port]/path in lowercase "
                f"letters, digits, '.', '_' and '-' (e.g. {DEFAULT_REGISTRY})")
    return None


def image_refs(recipe: ImageRecipe, release: SlurmRelease, registry: str, version: str | None = None) -> tuple[str, ...]:
    """Tags of an image: ``<series>-<os>`` (the profile's default tag rule), and for Slurm images
    also ``<full version>-<os>`` once the version is known."""
    refs = [naming.image_ref(registry, recipe.name, naming.image_tag(release.series, release.os_name))]
    if version and recipe.is_slurm:
        refs.append(naming.image_ref(registry, recipe.name, naming.image_tag(version, release.os_name)))
    return tuple(refs)


def apt_install(packages: tuple[str, ...], mode: str = "") -> str:
    """The apt-get command line of an image; mode "-s" simulates it, "-d" only downloads."""
    flags = f"{mode} " if mode else ""
    return (f"apt-get -q -y -o Dpkg::Use-Pty=0 {flags}install --no-install-recommends "
            f"{_INSTALLED} {' '.join(packages)}")


def containerfile(recipe: ImageRecipe, release: SlurmRelease, base_ref: str) -> str:
    """The build recipe of an image. Apt's lists and downloads are bind mounts from the build
    context (the resolve step filled them), so the build needs no network and keeps neither."""
    steps = [f"groupadd --system --gid {u.gid} {u.name}; "
             f"useradd --system --no-log-init --uid {u.uid} --gid {u.gid} --home-dir /nonexistent "
             f"--shell /usr/sbin/nologin {u.name}" for u in recipe.users]
    steps.append("export DEBIAN_FRONTEND=noninteractive")
    steps.append(apt_install(recipe.packages))
    steps.extend(recipe.setup)
    lines = [
        f"# slurmk8s image {recipe.name} for Slurm {release.series} on Debian {release.suite}: {recipe.purpose}.",
        "# Generated by `slurmk8s images build`; the context holds apt's lists/ and archives/.",
        f"FROM {base_ref}",
        "RUN --mount=type=bind,source=lists,target=/var/lib/apt/lists,rw \\",
        "    --mount=type=bind,source=archives,target=/var/cache/apt/archives,rw \\",
        "    set -eu; \\",
        *(f"    {step}; \\" for step in steps[:-1]),
        f"    {steps[-1]}",
    ]
    if recipe.run_as:
        lines.append(f"USER {recipe.run_as}")
    if recipe.cmd:
        lines.append(f"CMD {json.dumps(list(recipe.cmd))}")
    return "\n".join(lines) + "\n"


POLICY_RC_D = "#!/bin/sh\n# services never start while an image is built\nexit 101\n"
# Containers have no use for documentation: keep copyright files, drop the rest.
DPKG_NODOC = ("path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\n"
              "path-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\n")


def base_files(release: SlurmRelease, mirror: str, security: str) -> dict[str, str]:
    """Files written into the debootstrapped rootfs before it is imported (path -> text)."""
    return {
        "etc/apt/sources.list": apt_sources(release, mirror, security),
        "usr/sbin/policy-rc.d": POLICY_RC_D,
        "etc/dpkg/dpkg.cfg.d/slurmk8s-nodoc": DPKG_NODOC,
    }


def _digest(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def base_key(release: SlurmRelease, files: dict[str, str]) -> str:
    """Key of the base image: the suite and the files written into it."""
    return _digest({"format": KEY_FORMAT, "suite": release.suite, "files": files})


@dataclass(frozen=True, order=True)
class Package:
    """One package of an apt transaction, at the version it installs."""

    name: str
    version: str
    arch: str

    def __str__(self) -> str:
        return f"{self.name}={self.version}:{self.arch}"


_INST = re.compile(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) [^\[]*\[([^\]]+)\]\)")


def parse_simulation(text: str) -> tuple[Package, ...]:
    """The packages an ``apt-get -s`` run would install or upgrade, sorted (release labels dropped)."""
    found = {Package(*m.groups()) for m in map(_INST.match, text.splitlines()) if m}
    return tuple(sorted(found))


def cache_key(containerfile_text: str, base_id: str, packages: tuple[Package, ...]) -> str:
    """Key of an image: same recipe, same base and same package versions give the same image."""
    return _digest({"format": KEY_FORMAT, "recipe": containerfile_text, "base": base_id,
                    "packages": [str(p) for p in sorted(packages)]})


def version_of(packages: tuple[Package, ...], package: str) -> str | None:
    """Upstream version (no epoch, no Debian revision) of ``package`` in a transaction."""
    return next((upstream_version(p.version) for p in packages if p.name == package), None)
