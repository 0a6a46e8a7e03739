"""Tag naming, cache keys, apt transaction parsing and the build recipes (pure, no engine)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from slurmk8s.debian import SLURM_RELEASES, slurm_release
from slurmk8s.images import recipes
from slurmk8s.images.build import download_script, parse_resolution, resolve_script
from slurmk8s.images.errors import ImageError
from slurmk8s.images.recipes import Package
from slurmk8s.profile.loader import load_profile

ROOT = Path(__file__).resolve().parents[2]


def recipe(series: str, name: str) -> recipes.ImageRecipe:
    return next(r for r in recipes.recipes_for(series) if r.name == name)


@pytest.mark.parametrize("series,name,registry,version,expected", [
    ("26.05", "slurmctld", "localhost/slurmk8s", "26.05.5",
     ("localhost/slurmk8s/slurmctld:26.05-debian14", "localhost/slurmk8s/slurmctld:26.05.5-debian14")),
    ("24.11", "login", "registry.example.org:5000/hpc/", "24.11.5",
     ("registry.example.org:5000/hpc/login:24.11-debian13", "registry.example.org:5000/hpc/login:24.11.5-debian13")),
    ("22.05", "slurmd", "localhost/slurmk8s", None, ("localhost/slurmk8s/slurmd:22.05-debian12",)),
    ("22.05", "mariadb", "localhost/slurmk8s", "10.11.19", ("localhost/slurmk8s/mariadb:22.05-debian12",)),
], ids=["series-and-full-version", "air-gapped-registry", "version-unknown-yet", "mariadb-series-tag-only"])
def test_image_refs(series, name, registry, version, expected):
    assert recipes.image_refs(recipe(series, name), SLURM_RELEASES[series], registry, version) == expected


@pytest.mark.parametrize("series", SLURM_RELEASES)
def test_a_profile_with_registry_and_os_points_at_the_built_images(series):
    """The profile's default tag rule and the builder's tags are one rule."""
    release = SLURM_RELEASES[series]
    database = recipes.image_refs(recipe(series, "mariadb"), release, recipes.DEFAULT_REGISTRY)[0]
    doc = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
           "spec": {"slurm": {"version": series, "images": {"registry": recipes.DEFAULT_REGISTRY,
                                                            "os": release.os_name, "database": database}},
                    "pools": [{"name": "cpu", "replicas": 1, "cpus": 1, "memory": "1Gi"}],
                    "partitions": [{"name": "p", "pools": ["cpu"]}]}}
    images = load_profile(yaml.safe_dump(doc).encode(), "t.yaml").images
    by_component = {"slurmctld": images.controller, "slurmd": images.worker, "slurmdbd": images.accounting,
                    "login": images.login, "slurmrestd": images.restapi, "mariadb": images.database}
    for r in recipes.recipes_for(series):
        assert by_component[r.name] == recipes.image_refs(r, release, recipes.DEFAULT_REGISTRY)[0]


def test_the_profile_in_docs_images_md_uses_the_built_images():
    doc = (ROOT / "docs/images.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", doc, re.S).group(1)
    profile = load_profile(example.encode(), "docs/images.md")
    release = SLURM_RELEASES[profile.version]
    built = {r.name: recipes.image_refs(r, release, recipes.DEFAULT_REGISTRY)[0] for r in recipes.recipes_for(profile.version)}
    assert (profile.images.controller, profile.images.login, profile.images.database) == \
        (built["slurmctld"], built["login"], built["mariadb"])
    for series, release in SLURM_RELEASES.items():  # the table of series, suites and tag suffixes
        assert re.search(rf"^\| {re.escape(series)} \| {release.suite} .*\| `{release.os_name}` \|", doc, re.M)


@pytest.mark.parametrize("registry,ok", [
    ("localhost/slurmk8s", True), ("registry.example.org:5000/hpc/slurm", True), ("ghcr.io/slinkyproject", True),
    ("Registry.example/x", False), ("localhost//x", False), ("localhost/x:tag", False), ("", False),
    ("host/with space", False),
])
def test_check_registry(registry, ok):
    problem = recipes.check_registry(registry)
    assert (problem is None) == ok, problem
    if not ok:
        assert "\n" not in problem and problem.startswith(f"registry {registry!r}")


def test_every_series_builds_the_same_image_names():
    assert recipes.image_names() == ("slurmctld", "slurmd", "slurmdbd", "login", "slurmrestd", "mariadb")
    for series in SLURM_RELEASES:
        assert tuple(r.name for r in recipes.recipes_for(series)) == recipes.image_names()


@pytest.mark.parametrize("series", SLURM_RELEASES)
def test_containerfile_creates_the_accounts_before_installing(series):
    for r in recipes.recipes_for(series):
        text = recipes.containerfile(r, SLURM_RELEASES[series], "localhost/base:x")
        user = recipes.SLURM_USER if r.is_slurm else recipes.MYSQL_USER
        created = text.index(f"useradd --system --no-log-init --uid {user.uid} --gid {user.gid}")
        assert created < text.index("apt-get") and f"groupadd --system --gid {user.gid} {user.name}" in text
        assert text.startswith("# slurmk8s image") and "\nFROM localhost/base:x\n" in text
        assert "source=lists,target=/var/lib/apt/lists" in text and "source=archives" in text


@pytest.mark.parametrize("series,sackd", [("22.05", False), ("24.11", True), ("26.05", True)])
def test_login_carries_sackd_from_23_11_and_no_host_keys(series, sackd):
    login = recipe(series, "login")
    assert ("sackd" in login.packages) == sackd
    assert {"openssh-server", "slurm-client", "munge"} <= set(login.packages)
    assert "rm -f /etc/ssh/ssh_host_*" in login.setup


def test_mariadb_runs_as_999_with_an_empty_datadir():
    db = recipe("26.05", "mariadb")
    assert db.users == (recipes.User("mysql", 999, 999),) and db.run_as == "999:999"
    text = recipes.containerfile(db, SLURM_RELEASES["26.05"], "b")
    assert "USER 999:999" in text and "find /var/lib/mysql -mindepth 1 -delete" in text


def test_resolve_simulates_and_downloads_the_build_transaction():
    """The key is only honest if the resolve step simulates exactly what the build installs."""
    series_recipes = recipes.recipes_for("26.05")
    scripts = {"-s": resolve_script(series_recipes), "-d": download_script(list(series_recipes))}
    for r in series_recipes:
        install = recipes.apt_install(r.packages)
        assert install in recipes.containerfile(r, SLURM_RELEASES["26.05"], "b")
        for mode, script in scripts.items():
            assert recipes.apt_install(r.packages, mode) in script
            assert recipes.apt_install(r.packages, mode).replace(f"{mode} ", "") == install


APT_SIMULATION = """NOTE: This is only a simulation!
Reading package lists...
Inst perl-base [5.36.0-7+deb12u3] (5.36.0-7+deb12u4 Debian-Security:12/oldstable-security [amd64])
Inst ucf (3.0043+nmu1+deb12u1 Debian:12.15/oldstable [all])
Inst slurmctld (22.05.8-4+deb12u3 Debian:12.15/oldstable [amd64])
Conf ucf (3.0043+nmu1+deb12u1 Debian:12.15/oldstable [all])
Inst mariadb-server (1:11.8.9+ds-2 Debian:testing [amd64]) []
"""


def test_parse_simulation_keeps_name_version_arch_only():
    assert recipes.parse_simulation(APT_SIMULATION) == (
        Package("mariadb-server", "1:11.8.9+ds-2", "amd64"),
        Package("perl-base", "5.36.0-7+deb12u4", "amd64"),
        Package("slurmctld", "22.05.8-4+deb12u3", "amd64"),
        Package("ucf", "3.0043+nmu1+deb12u1", "all"),
    )
    # a point release relabels the suite ("12.15" -> "12.16") without changing what is installed
    assert recipes.parse_simulation(APT_SIMULATION.replace("12.15", "12.16")) == recipes.parse_simulation(APT_SIMULATION)
    assert recipes.version_of(recipes.parse_simulation(APT_SIMULATION), "mariadb-server") == "11.8.9+ds"
    assert recipes.version_of(recipes.parse_simulation(APT_SIMULATION), "slurmctld") == "22.05.8"
    assert recipes.version_of(recipes.parse_simulation(APT_SIMULATION), "absent") is None


packages = st.lists(st.builds(Package, st.from_regex(r"[a-z][a-z0-9+.-]{0,12}", fullmatch=True),
                              st.from_regex(r"[0-9][0-9.:+~-]{0,8}", fullmatch=True), st.sampled_from(["amd64", "all"])),
                    min_size=1, max_size=12, unique_by=lambda p: p.name)


@given(packages, st.randoms())
def test_cache_key_ignores_order_and_sees_every_input(pkgs, rnd):
    key = recipes.cache_key("RECIPE", "sha256:base", tuple(pkgs))
    shuffled = list(pkgs)
    rnd.shuffle(shuffled)
    assert recipes.cache_key("RECIPE", "sha256:base", tuple(shuffled)) == key
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert recipes.cache_key("RECIPE ", "sha256:base", tuple(pkgs)) != key
    assert recipes.cache_key("RECIPE", "sha256:other", tuple(pkgs)) != key
    changed = [*pkgs[:-1], Package(pkgs[-1].name, pkgs[-1].version + "1", pkgs[-1].arch)]
    assert recipes.cache_key("RECIPE", "sha256:base", tuple(changed)) != key
    assert recipes.cache_key("RECIPE", "sha256:base", tuple(pkgs[:-1])) != key


def test_base_key_follows_the_sources():
    release = slurm_release("24.11")
    files = recipes.base_files(release, "http://deb.example/debian", "http://deb.example/security")
    assert files["etc/apt/sources.list"] == ("deb http://deb.example/debian trixie main\n"
                                             "deb http://deb.example/debian trixie-updates main\n"
                                             "deb http://deb.example/security trixie-security main\n")
    other = recipes.base_files(release, "http://mirror.example/debian", "http://deb.example/security")
    assert recipes.base_key(release, files) != recipes.base_key(release, other)
    testing = recipes.base_files(slurm_release("26.05"), "http://m/debian", "http://m/security")
    assert testing["etc/apt/sources.list"] == "deb http://m/debian forky main\n"  # testing has no -updates


def test_parse_resolution_names_what_apt_refused():
    with pytest.raises(ImageError, match="apt-get update of forky failed"):
        parse_resolution("@@slurmk8s update-failed\n", "forky")
    output = ("@@slurmk8s image slurmctld\nInst ucf (3 Debian:12 [all])\n"
              "@@slurmk8s image login\nE: Unable to locate package sackd\n@@slurmk8s failed\n")
    with pytest.raises(ImageError, match="^bookworm cannot install the packages of login: E: Unable to locate package sackd$"):
        parse_resolution(output, "bookworm")
    ok = parse_resolution(output.split("@@slurmk8s image login")[0], "bookworm")
    assert ok == {"slurmctld": (Package("ucf", "3", "all"),)}


def test_the_lab_exports_exactly_the_images_that_are_built() -> None:
    """naming.IMAGES (what the lab exports per series) is the recipes' list: a component without an
    image of its own (the accounts Job) must not send the lab looking for one."""
    from slurmk8s import naming
    from slurmk8s.images.recipes import image_names
    assert naming.IMAGES == tuple(sorted(image_names()))
