"""The Slurm templates compiled to Python (tools/compile_templates.py) render what Jinja renders.

Refresh with `python tools/compile_templates.py` (or `pytest tests/render/test_golden.py --update-golden`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jinja2
import pytest

from slurmk8s.profile.files import read_profile
from slurmk8s.render import compiled_templates, render, slurmfiles

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compile_templates", ROOT / "tools" / "compile_templates.py")
compile_templates = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_templates)


def jinja_render(template: str, data: dict) -> str:
    """The reference: Jinja with the render's settings."""
    return slurmfiles._env().get_template(template).render(**data)


def test_the_compiled_module_is_current() -> None:
    text, left = compile_templates.generate()
    assert left == [], left  # every template is compiled: none makes a render import Jinja
    assert (ROOT / "slurmk8s" / "render" / "compiled_templates.py").read_text() == text, \
        "run python tools/compile_templates.py"


def test_each_template_renders_as_jinja_does(example_profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every template call of every example profile's render, both ways."""
    calls: list[tuple[str, dict]] = []
    real = slurmfiles._render
    monkeypatch.setattr(slurmfiles, "_render", lambda template, **data: calls.append((template, data)) or real(template, **data))
    render(read_profile(str(example_profile)))
    assert calls
    for template, data in calls:
        assert slurmfiles._compiled(template) is not None, template
        assert slurmfiles._compiled(template)(data) == jinja_render(template, data), template


CASES = [
    # (template, context): attribute else item, method calls, join, conditional, comparison, nested
    # loops reusing a name (Jinja scopes each loop), values printed with str().
    ("{% for a, b in pairs %}{{ a }}={{ b }};{% endfor %}{{ a }}", {"pairs": [(1, None), ("x", True)], "a": "ctx"}),
    ("{% for x in xs %}{% for x in x %}[{{ x }}]{% endfor %}{{ x }}{% endfor %}", {"xs": [[1, 2], [3]]}),
    ("{{ d.name }} {{ d.get('k') }} {{ d.get('missing') }}{% if d.get('k') %} yes{% endif %}", {"d": {"name": "n", "k": 0}}),
    ("{{ d.items }}", {"d": {"items": 1}}),  # Jinja takes the attribute first: dict.items
    ("{{ xs | join(', ') }}|{{ xs | join }}|{{ '-' if n == 2 else '+' }}", {"xs": [1, "b", None], "n": 2}),
    ("{% if a %}A{% elif b %}B{% else %}C{% endif %}{% if not a and (b or c) %}!{% endif %}",
     {"a": 0, "b": [], "c": "x"}),
    ("  {% if x %}\n  indented\n  {% endif %}\nend\n", {"x": True}),
]


@pytest.mark.parametrize("source, data", CASES, ids=[str(i) for i in range(len(CASES))])
def test_constructs_render_as_jinja_does(source: str, data: dict) -> None:
    namespace: dict = {"_attr": compiled_templates._attr}
    exec(compile_templates.compile_template(source, "t"), namespace)
    assert namespace["t"](data) == compile_templates.environment().from_string(source).render(**data)


@pytest.mark.parametrize("source", ["{% for x in xs %}{{ loop.index }}{% endfor %}", "{{ x | upper }}",
                                    "{% macro m() %}{% endmacro %}", "{% set y = 1 %}"])
def test_other_constructs_are_left_to_jinja(source: str) -> None:
    with pytest.raises(compile_templates.Unsupported):
        compile_templates.compile_template(source, "t")


def test_a_missing_value_is_an_error_both_ways() -> None:
    namespace: dict = {"_attr": compiled_templates._attr}
    exec(compile_templates.compile_template("{{ d.x }}{{ y }}", "t"), namespace)
    with pytest.raises(KeyError):
        namespace["t"]({"d": {}, "y": 1})
    with pytest.raises(KeyError):
        namespace["t"]({"d": {"x": 1}})
    with pytest.raises(jinja2.UndefinedError):
        compile_templates.environment().from_string("{{ d.x }}").render(d={})


def test_a_changed_template_is_rendered_by_jinja(monkeypatch: pytest.MonkeyPatch) -> None:
    """A template edited after the compile: its function is not used, Jinja renders the file."""
    _, function = compiled_templates.TEMPLATES["cgroup.conf.j2"]
    monkeypatch.setitem(compiled_templates.TEMPLATES, "cgroup.conf.j2", ("0" * 64, function))
    slurmfiles._compiled.cache_clear()
    try:
        assert slurmfiles._compiled("cgroup.conf.j2") is None
        assert slurmfiles._render("cgroup.conf.j2", cluster="c") == jinja_render("cgroup.conf.j2", {"cluster": "c"})
    finally:
        slurmfiles._compiled.cache_clear()

