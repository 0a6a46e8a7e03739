"""spec.accounting.config: extra slurmdbd.conf lines after the generated ones; keys the generator writes, a key in
two spellings, a value of more than one word, and the field with accounting disabled are refused, located. Also the
companions of slurm.conf that spec.slurm.extraFiles carries (mpi.conf, acct_gather.conf, ...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
ACCOUNTING_LINE = "  accounting:\n"
VERSION_LINE = '    version: "26.05"\n'


def kind_dev(accounting: str = "", slurm: str = ""):
    """kind-dev.yaml's render with extra lines in spec.accounting and spec.slurm."""
    text = (ROOT / "profiles" / "kind-dev.yaml").read_text()
    assert ACCOUNTING_LINE in text and VERSION_LINE in text
    text = text.replace(ACCOUNTING_LINE, ACCOUNTING_LINE + accounting).replace(VERSION_LINE, VERSION_LINE + slurm)
    return render(load_profile(text.encode()))


def dbd_conf(accounting: str = "") -> str:
    return kind_dev(accounting).find("ConfigMap", "dev-slurmdbd-config")["data"]["slurmdbd.conf"]


def test_the_profiles_lines_follow_the_generated_ones_sorted_in_a_marked_section() -> None:
    before = dbd_conf()
    after = dbd_conf("    config: {PurgeStepAfter: 3month, PurgeJobAfter: 12month, ArchiveJobs: yes, CommitDelay: 1,\n"
                     "             ArchiveDir: /var/spool/slurmdbd/archive, DebugLevel: verbose}\n")
    assert "spec.accounting.config" not in before
    assert after == before + (
        "\n# From the profile's spec.accounting.config\n"
        "ArchiveDir=/var/spool/slurmdbd/archive\n"
        "ArchiveJobs=YES\n"
        "CommitDelay=1\n"
        "DebugLevel=verbose\n"
        "PurgeJobAfter=12month\n"
        "PurgeStepAfter=3month\n")


def test_a_changed_slurmdbd_conf_restarts_slurmdbd() -> None:
    def hash_of(accounting: str) -> str:
        sts = kind_dev(accounting).find("StatefulSet", "dev-accounting")
        return sts["spec"]["template"]["metadata"]["annotations"]["slurmk8s.io/config-hash"]
    assert hash_of("") != hash_of("    config: {PurgeJobAfter: 12month}\n")


@pytest.mark.parametrize("config, message", [
    ("{StorageHost: db}", "spec.accounting.config.StorageHost: 'StorageHost' is set by the generator and cannot be "
                          "overridden here"),
    ("{dbdport: 7000}", "spec.accounting.config.dbdport: 'dbdport' is set by the generator and cannot be overridden here"),
    ("{LogFile: /var/log/slurmdbd.log}",
     "spec.accounting.config.LogFile: 'LogFile' is set by the generator and cannot be overridden here"),
    ("{PurgeJobAfter: 12month, purgejobafter: 6month}", "spec.accounting.config.purgejobafter: 'purgejobafter' is "
                                                         "'PurgeJobAfter' again (Slurm's keys ignore case): set it once"),
    ("{PrivateData: 'jobs users'}", "spec.accounting.config.PrivateData: 'jobs users' must be one word: in "
                                    "slurmdbd.conf what follows a space would be read as more keys, and what follows "
                                    "a '#' as a comment"),
    ("{DebugLevel: 'info#x'}", "spec.accounting.config.DebugLevel: 'info#x' must not contain '#': in slurmdbd.conf "
                               "what follows a space would be read as more keys, and what follows a '#' as a comment"),
])
def test_a_refused_key_or_value_is_one_located_line(config: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        dbd_conf(f"    config: {config}\n")
    assert [line.split(" ", 1)[1] for line in str(info.value).splitlines()] == [message]
    assert str(info.value).startswith("<profile>:14:")


def test_config_with_accounting_disabled_is_refused_located() -> None:
    text = (ROOT / "profiles" / "kind-dev.yaml").read_text().replace(
        "  accounting:\n    database:\n      embedded: {storage: 1Gi}\n",
        "  accounting:\n    enabled: false\n    config: {PurgeJobAfter: 12month}\n")
    with pytest.raises(ProfileError) as info:
        render(load_profile(text.encode()))
    assert [line.split(" ", 1)[1] for line in str(info.value).splitlines()] == [
        "spec.accounting.config: slurmdbd.conf keys are configured but accounting.enabled is false"]


@pytest.mark.parametrize("name", ["mpi.conf", "acct_gather.conf", "job_container.conf", "plugstack.conf"])
def test_a_slurm_conf_companion_comes_through_extrafiles(name: str) -> None:
    bundle = kind_dev(slurm=f"    extraFiles:\n      {name}: 'Key=value'\n")
    assert bundle.files[name] == "Key=value"
    assert bundle.find("ConfigMap", "dev-slurm-config")["data"][name] == "Key=value"
    # Configless slurmd pods copy the profile's own files from the ConfigMap by name.
    pool = json.dumps(bundle.find("StatefulSet", "dev-cpu"))
    assert f"/etc/slurm/{name}" in pool
