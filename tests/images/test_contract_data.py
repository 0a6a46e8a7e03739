"""The image contract (slurmk8s/images/contract.py) covers what the rendered bundles run (pure, no engine).

Every profile of profiles/ is rendered for every Slurm series and both auths; every program a
container, probe or hook of those bundles starts must be in the contract of that container's image,
every module the shipped Python imports must be checked, and so must every plugin the configs name.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import yaml
from imagepods import plugin_files

from slurmk8s import versions
from slurmk8s.errors import ProfileError, UsageError
from slurmk8s.images import contract
from slurmk8s.images.check import CheckResult, role_of
from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "profiles").glob("*.yaml"))
SERIES = ("22.05", "24.11", "26.05")
REGISTRY = "registry.example.org/hpc"

# Words of sh that start no program: keywords before a command, builtins (their arguments are no command).
_PREFIX = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "exec"}
_BUILTIN = {"set", "echo", "printf", "exit", "return", "umask", "cd", "read", "shift", "local", "trap", "wait", "kill",
            "export", "unset", "eval", "test", "[", "command", "for", "case", "esac", ":", "true", "false", "break",
            "continue"}


def command_words(script: str) -> set[str]:
    """The programs a generated sh script starts (first word of each simple command, builtins left out)."""
    script = re.sub(r"\$\(\([^)]*\)\)", "0", script)  # arithmetic starts nothing
    lexer = shlex.shlex(script.replace("\n", " ; "), posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    found, start = set(), True
    for token in lexer:
        if token and set(token) <= set(";&|()"):
            start = True
        elif start and not (token in _PREFIX or re.match(r"^[A-Za-z_]\w*=", token)):
            start = False
            if token not in _BUILTIN and re.match(r"^(/[\w/.+-]+|[a-z][\w.+-]*)$", token):
                found.add(token)
    return found


def test_command_words_reads_a_generated_script():
    script = ("set -eu\nfor f in a b; do ln -sfn /x/$f /y/$f; done\ni=$((i + 1))\n"
              "x=$(awk '{ print }' /etc/resolv.conf)\n[ -d /x ] || install -m 0600 a b\n"
              "case \"$s\" in *down*) scontrol update ;; esac\necho 'sleep not a command'\nexec /usr/sbin/sshd -D")
    assert command_words(script) == {"ln", "awk", "install", "scontrol", "/usr/sbin/sshd"}


@functools.cache
def bundles() -> tuple:
    """Every example profile for every series and auth it renders with, on site images (role = image name)."""
    found = []
    for path in PROFILES:
        for series in SERIES:
            for auth in contract.AUTHS:
                if auth == "slurm" and not versions.dialect(series).has_auth_slurm:
                    continue
                doc = yaml.safe_load(path.read_text())
                slurm = doc["spec"]["slurm"]
                slurm.update(version=series, auth=auth)
                slurm["images"] = {"registry": REGISTRY, "os": "site", "database": f"{REGISTRY}/mariadb:site"}
                try:
                    found.append(((path.stem, series, auth), render(load_profile(yaml.safe_dump(doc).encode(), path.name))))
                except ProfileError:  # a feature the series lacks (metrics before 25.05, say)
                    continue
    assert len(found) >= 2 * len(PROFILES), [k for k, _ in found]
    return tuple(found)


def pods(bundle):
    for obj in (*bundle.objects, *bundle.hooks):
        spec = obj.get("spec", {})
        pod = spec.get("template", {}).get("spec") or spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
        if pod:
            yield obj, pod


def started_programs(container: dict) -> set[str]:
    """What a container, its exec probes and its hooks start."""
    argvs = [container["command"]]
    argvs += [container[p]["exec"]["command"] for p in ("startupProbe", "readinessProbe", "livenessProbe")
              if "exec" in container.get(p, {})]
    argvs += [h["exec"]["command"] for h in container.get("lifecycle", {}).values() if "exec" in h]
    found = set()
    for argv in argvs:
        found.add(argv[0])
        if argv[0] in ("/bin/sh", "sh") and argv[1] == "-c":
            found |= command_words(argv[2])
    return found


def contract_programs(role: str, series: str, auth: str) -> set[str]:
    found = set()
    for a in contract.assertions(role, series, auth):
        if (m := re.fullmatch(r"(\S+) on PATH", a.what)) or (m := re.fullmatch(r"(/\S+) executable", a.what)):
            found.add(m.group(1))
    return found


def test_every_program_the_bundles_start_is_in_the_contract_of_its_image():
    missing = {}
    for key, bundle in bundles():
        for obj, pod in pods(bundle):
            for c in pod.get("initContainers", []) + pod["containers"]:
                assert "command" in c, f"{obj['metadata']['name']}/{c['name']} relies on the image's entrypoint"
                role = c["image"].rsplit("/", 1)[-1].split(":")[0]
                lacking = started_programs(c) - contract_programs(role, key[1], key[2])
                for program in lacking:
                    missing.setdefault((role, program), f"{key}: {obj['kind']}/{obj['metadata']['name']} {c['name']}")
    assert missing == {}


def test_every_container_runs_as_a_user_the_contract_checks():
    users = set()
    for key, bundle in bundles():
        for obj, pod in pods(bundle):
            for c in pod.get("initContainers", []) + pod["containers"]:
                context = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
                users.add((c["image"].rsplit("/", 1)[-1].split(":")[0], context.get("runAsUser")))
    checked = {(role, uid) for role in contract.SLURM_ROLES for uid in (0, contract.SLURM_USER[1])}
    checked |= {("slurmrestd", contract.SLURMRESTD_UID), ("mariadb", contract.MYSQL_USER[1]), ("slurmd", None)}
    assert users - checked == set()
    # None: the image's own USER, which the slurmd contract requires to be root
    assert "the image runs as root" in {a.what for a in contract.assertions("slurmd", "26.05", "slurm")}


def test_the_python_the_bundles_ship_imports_only_what_the_contract_checks():
    imported = set()
    for _key, bundle in bundles():
        for obj in bundle.objects:
            if obj["kind"] == "ConfigMap":
                imported |= {m for name, text in obj.get("data", {}).items() if name.endswith(".py")
                             for m in contract.imported_modules(text)}
        for _obj, pod in pods(bundle):
            for c in pod.get("initContainers", []) + pod["containers"]:
                if c["command"][:2] == ["python3", "-c"]:
                    imported |= contract.imported_modules(c["command"][2])
    assert {"json", "ssl", "http.client", "subprocess"} <= imported  # the parse found the programs
    assert imported - set(contract.python_modules()) == set()


@pytest.mark.parametrize("role,configs", [("slurmctld", ("slurm.conf", "cgroup.conf")), ("slurmd", ("slurm.conf", "cgroup.conf")),
                                          ("slurmdbd", ("slurmdbd.conf",))], ids=["slurmctld", "slurmd", "slurmdbd"])
def test_every_plugin_the_configs_name_is_checked(role, configs):
    for (profile, series, auth), bundle in bundles():
        if profile != "kind-dev":  # gpu-ib and others add site plugins (gres/gpu, topology) a site image brings
            continue
        wanted = plugin_files(*(bundle.files[name] for name in configs if name in bundle.files))
        checked = {a.what.removeprefix("Slurm plugin ") for a in contract.assertions(role, series, auth)}
        assert wanted - checked == set(), (series, auth)


def test_sackd_only_where_slurm_has_it_and_munged_only_for_munge():
    def programs(series, auth):
        return contract_programs("login", series, auth)
    assert "sackd" in programs("24.11", "slurm") and "sackd" not in programs("22.05", "munge")
    assert "munged" in programs("26.05", "munge") and "munged" not in programs("26.05", "slurm")


def test_a_check_without_a_verdict_counts_as_failed():
    checks = contract.assertions("slurmrestd", "26.05", "slurm")
    script = contract.check_script(checks)
    assert script.count("\n") == len(checks)
    output = "\n".join(f"@@slurmk8s-check {i} ok" for i in range(len(checks)) if i != 2) + "\n@@slurmk8s-check 2 junk"
    assert contract.failed_checks(output, checks) == [checks[2]]
    assert contract.failed_checks("", checks) == list(checks)


@pytest.mark.parametrize("image,role,expected", [
    ("ghcr.io/slinkyproject/slurmctld:25.11-ubuntu24.04", None, "slurmctld"),
    ("localhost/slurmk8s/mariadb:26.05-debian14", None, "mariadb"),
    ("registry.example.org/hpc/slurm-login@sha256:ab", "login", "login"),
], ids=["slinky-name", "project-name", "as"])
def test_role_of_an_image(image, role, expected):
    assert role_of(image, role) == expected


def test_role_of_an_image_with_another_name_is_a_usage_error():
    with pytest.raises(UsageError) as e:
        role_of("registry.example.org/hpc/slurm-controller:1", None)
    assert str(e.value) == ("cannot tell which component registry.example.org/hpc/slurm-controller:1 is for: its name "
                            "is not one of slurmctld, slurmd, slurmdbd, login, slurmrestd, mariadb; pass --as COMPONENT")


def test_a_result_prints_one_line_per_failed_check():
    checks = contract.assertions("login", "26.05", "slurm")
    sackd = next(a for a in checks if a.what == "sackd on PATH")
    result = CheckResult("site/login:1", "login", "26.05", "slurm", checks, (sackd,))
    assert result.lines() == [f"site/login:1 (login, Slurm 26.05, auth/slurm): 1 of {len(checks)} checks failed",
                              "  FAILED sackd on PATH: the login's sackd sidecar (sackd -D) serves auth/slurm to the clients"]
