"""spec.slurm.config and the generator's own slurm.conf lines: each key is written once, the profile's value winning
over a default; a key with a typed field of its own is refused; extraFiles may carry any file nothing else writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.profile.slurm import GENERATED_FILES
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
VERSION_LINE = '    version: "26.05"\n'


def kind_dev(extra: str):
    text = (ROOT / "profiles" / "kind-dev.yaml").read_text()
    assert VERSION_LINE in text
    return render(load_profile(text.replace(VERSION_LINE, VERSION_LINE + extra).encode()))


def key_lines(slurm_conf: str, key: str) -> list[str]:
    return [line for line in slurm_conf.splitlines() if line.split("=", 1)[0].lower() == key.lower()]


@pytest.mark.parametrize("key, default, mine", [
    ("MpiDefault", "none", "pmix"),
    ("ReturnToService", "2", "1"),
    ("SlurmdTimeout", "300", "600"),
    ("SelectTypeParameters", "CR_Core_Memory", "CR_CPU_Memory"),
    ("SuspendExcNodes", None, "cpu-[0-1]"),
    ("HealthCheckInterval", None, "120"),
])
def test_a_key_the_profile_sets_is_one_line_with_its_value(key: str, default: str | None, mine: str) -> None:
    before = kind_dev("").files["slurm.conf"]
    if default is not None:
        assert key_lines(before, key) == [f"{key}={default}"]
    after = kind_dev(f"    config: {{{key}: \"{mine}\"}}\n").files["slurm.conf"]
    assert key_lines(after, key) == [f"{key}={mine}"]


def test_the_untouched_defaults_stay() -> None:
    conf = kind_dev('    config: {MpiDefault: pmix}\n').files["slurm.conf"]
    assert key_lines(conf, "ReturnToService") == ["ReturnToService=2"]
    assert key_lines(conf, "SlurmdTimeout") == ["SlurmdTimeout=300"]


@pytest.mark.parametrize("config, message", [
    ("{SuspendTime: 60}", "spec.slurm.config.SuspendTime: 'SuspendTime' has its own field: set spec.powerSaving.suspendTime"),
    ("{MpiDefault: pmix, mpidefault: none}",
     "spec.slurm.config.mpidefault: 'mpidefault' is 'MpiDefault' again (Slurm's keys ignore case): set it once"),
])
def test_a_key_set_twice_or_with_a_field_of_its_own_is_refused_located(config: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        kind_dev(f"    config: {config}\n")
    assert [line.split(" ", 1)[1] for line in str(info.value).splitlines()] == [message]
    assert str(info.value).startswith("<profile>:11:")


def test_every_file_extrafiles_may_not_replace_is_one_the_generator_writes() -> None:
    """The refusal names only files some example's render writes (oci.conf, written by nothing, was refused)."""
    written = set()
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        written |= set(render(load_profile(path.read_bytes(), str(path))).files)
    older = (ROOT / "profiles" / "kind-topology.yaml").read_text().replace(VERSION_LINE, '    version: "24.11"\n')
    written |= set(render(load_profile(older.encode())).files)  # topology.conf before 25.05
    assert GENERATED_FILES <= written, sorted(GENERATED_FILES - written)


def test_oci_conf_comes_through_extrafiles() -> None:
    oci = 'RunTimeQuery="runc --rootless=true --root=/run/user/%U/ state %n.%u.%j.%s.%t"\n'
    data = kind_dev(f"    extraFiles:\n      oci.conf: '{oci.strip()}'\n").find("ConfigMap", "dev-slurm-config")["data"]
    assert data["oci.conf"] == oci.strip()
