"""spec.slurm.config and the generator's own slurm.conf lines: each key is written once, the profile's value winning
over a default; SchedulerParameters and SlurmctldParameters take added options on their one line; a key or option
with a typed field of its own is refused; extraFiles may carry any file nothing else writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmk8s.actions.init import STARTER
from slurmk8s.errors import ProfileError
from slurmk8s.profile import load_profile
from slurmk8s.profile.slurm import GENERATED_FILES, TYPED_SLURM_OPTIONS, option_name
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]
VERSION_LINE = '    version: "26.05"\n'


def kind_dev(extra: str, spec: str = ""):
    """kind-dev.yaml's render with extra lines in spec.slurm and spec lines at the end of spec."""
    text = (ROOT / "profiles" / "kind-dev.yaml").read_text()
    assert VERSION_LINE in text
    return render(load_profile((text.replace(VERSION_LINE, VERSION_LINE + extra) + spec).encode()))


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


GENERATED = {"SchedulerParameters": "bf_continue,bf_interval=30,bf_max_job_test=500,bf_window=1440",
             "SlurmctldParameters": "enable_configless,idle_on_node_suspend"}  # kind-dev's (26.05, an elastic pool)


@pytest.mark.parametrize("key, added", [("SchedulerParameters", "bf_busy_nodes,max_rpc_cnt=150"),
                                        ("SlurmctldParameters", "enable_stepmgr")])
def test_options_added_to_a_list_valued_key_follow_the_generators_on_its_one_line(key: str, added: str) -> None:
    assert key_lines(kind_dev("").files["slurm.conf"], key) == [f"{key}={GENERATED[key]}"]
    conf = kind_dev(f"    config: {{{key}: \"{added}\"}}\n").files["slurm.conf"]
    assert key_lines(conf, key) == [f"{key}={GENERATED[key]},{added}"]
    assert "\n# From the profile's spec.slurm.config\n" not in conf  # nothing else of the profile's: no section


def test_an_option_the_generator_writes_already_is_written_once() -> None:
    conf = kind_dev('    config: {SlurmctldParameters: "Enable_Configless,enable_stepmgr,enable_stepmgr"}\n').files["slurm.conf"]
    assert key_lines(conf, "SlurmctldParameters") == [f"SlurmctldParameters={GENERATED['SlurmctldParameters']},enable_stepmgr"]


def test_with_the_builtin_scheduler_the_line_holds_the_profiles_options_alone() -> None:
    builtin = "  scheduling:\n    scheduler: {type: builtin}\n"
    assert key_lines(kind_dev("", builtin).files["slurm.conf"], "SchedulerParameters") == []
    conf = kind_dev('    config: {SchedulerParameters: "bf_busy_nodes"}\n', builtin).files["slurm.conf"]
    assert key_lines(conf, "SchedulerParameters") == ["SchedulerParameters=bf_busy_nodes"]
    assert "SchedulerType=sched/builtin\nSchedulerParameters=bf_busy_nodes\n" in conf


@pytest.mark.parametrize("value, message", [
    ("bf_interval=60", "option 'bf_interval' has its own field: set spec.scheduling.scheduler.interval"),
    ("BF_Window=2880", "option 'bf_window' has its own field: set spec.scheduling.scheduler.window"),
    ("bf_max_job_test=100", "option 'bf_max_job_test' has its own field: set spec.scheduling.scheduler.maxJobTest"),
    ("bf_continue", "option 'bf_continue' has its own field: set spec.scheduling.scheduler.continue"),
    ("max_rpc_cnt=100,max_rpc_cnt=150",
     "option 'max_rpc_cnt' is given twice ('max_rpc_cnt=100' and 'max_rpc_cnt=150'): give it once"),
    ("bf_busy_nodes,,max_rpc_cnt=150",
     "'bf_busy_nodes,,max_rpc_cnt=150' has an empty option: give options separated by single commas"),
], ids=["interval", "window-any-case", "max-job-test", "continue", "twice", "empty"])
def test_an_option_the_profile_may_not_add_is_refused_located(value: str, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        kind_dev(f"    config: {{SchedulerParameters: \"{value}\"}}\n")
    assert str(info.value).splitlines() == [f"<profile>:11:35: spec.slurm.config.SchedulerParameters: {message}"]


def test_a_generated_option_given_another_value_is_refused_located() -> None:
    with pytest.raises(ProfileError) as info:
        kind_dev('    config: {SlurmctldParameters: "idle_on_node_suspend=no"}\n')
    assert str(info.value).splitlines() == [
        "<profile>:11:35: spec.slurm.config.SlurmctldParameters: option 'idle_on_node_suspend=no': the generator "
        "writes SlurmctldParameters option 'idle_on_node_suspend'; leave it out"]


def test_every_scheduler_option_the_generator_writes_has_its_field_named() -> None:
    """A new option written from spec.scheduling must be listed, or a profile could set it twice."""
    for continue_ in ("true", "false"):
        conf = kind_dev("", f"  scheduling:\n    scheduler: {{continue: {continue_}}}\n").files["slurm.conf"]
        line = key_lines(conf, "SchedulerParameters")[0].split("=", 1)[1]
        names = {option_name(o) for o in line.split(",")}
        assert names <= set(TYPED_SLURM_OPTIONS["schedulerparameters"]), names
    assert "bf_continue" in {option_name(o) for o in GENERATED["SchedulerParameters"].split(",")}


def test_the_starters_config_example_uncommented_is_valid_and_added() -> None:
    text = STARTER.replace("    # config:", "    config:").replace("    #   SchedulerParameters:", "      SchedulerParameters:")
    assert text != STARTER
    conf = render(load_profile(text.encode())).files["slurm.conf"]
    assert key_lines(conf, "SchedulerParameters")[0].endswith(",bf_busy_nodes,max_rpc_cnt=150")


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
