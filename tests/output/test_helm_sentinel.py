"""Profile values that look like the Helm output's internal placeholders stay text (issue 16, F13)."""

from __future__ import annotations

from pathlib import Path

import yaml

from slurmk8s.profile.files import read_profile
from slurmk8s.actions.render import build_tree
from slurmk8s.render import render

ROOT = Path(__file__).resolve().parents[2]


def chart_for(tmp_path: Path, old: str, new: str) -> dict[str, str]:
    text = (ROOT / "profiles" / "kind-dev.yaml").read_text()
    assert old in text
    profile = tmp_path / "p.yaml"
    profile.write_text(text.replace(old, new, 1))
    return build_tree(render(read_profile(profile)), "helm")


def test_a_placeholder_lookalike_past_the_last_hole_does_not_crash(tmp_path: Path) -> None:
    """SlurmctldDebug: __helm_value_999__ raised IndexError."""
    chart = chart_for(tmp_path, '    version: "26.05"\n',
                      '    version: "26.05"\n    config: {SlurmctldDebug: "__helm_value_999__"}\n')
    config = yaml.safe_load(chart["templates/configmap-dev-slurm-config.yaml"])
    assert "SlurmctldDebug=__helm_value_999__" in config["data"]["slurm.conf"]


def test_a_placeholder_lookalike_is_not_replaced_by_a_template(tmp_path: Path) -> None:
    """nodeSelector {rack: __helm_value_0__} once became the image expression of another workload
    (a label value starts and ends with a letter or digit, so the lookalike sits inside one)."""
    chart = chart_for(tmp_path, "      features: [cpu]\n",
                      '      features: [cpu]\n      nodeSelector: {rack: "a__helm_value_0__z"}\n')
    text = chart["templates/statefulset-dev-cpu.yaml"]
    assert "rack: a__helm_value_0__z\n" in text
    assert '(index .Values.pools "cpu" "replicas")) }}' in text  # the real holes are still templated
    assert "__helm_value__" not in text  # no placeholder of ours left behind
