"""yamlout builds nodes itself for speed; the bytes must equal PyYAML's own representers'."""

from __future__ import annotations

import yaml

from slurmk8s.output import yamlout


class _Reference(yamlout._Base):  # type: ignore[misc, valid-type]
    """The dumper as it was: PyYAML's representers, no aliases, literal blocks for multi-line text."""

    def ignore_aliases(self, data):
        return True


_Reference.add_representer(str, yamlout._str)

TRICKY = ["", " ", "yes", "no", "on", "null", "~", "true", "1", "0o17", "0x1F", "1e3", "1.0", ".inf", "-", "- a",
          "a: b", "#x", "x #y", "'q'", '"dq"', "é ü 中", "tab\tin", "two\nlines\n", "trailing\n", "\nleading",
          "x" * 200, "a " * 80, "2026-12-01", "12:30", "*alias", "&anchor", "!tag", "%dir", "@at", "`tick", "[a]",
          "{a: 1}", "=", "<<", "?", "| bar", "> gt"]


def dump_reference(obj) -> str:
    return yaml.dump(obj, Dumper=_Reference, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def test_the_same_bytes_as_pyyaml_representers() -> None:
    shared = {"reused": [1, 2]}
    doc = {
        "strings": TRICKY, "keys": {s: s for s in TRICKY if s},
        "numbers": [0, -1, 2**70, 1.5, float("inf"), True, False, None],
        "nested": [[], {}, [[{"a": [None]}]], shared, shared],
        "tuple": (1, "x"), "bytes": b"\x00raw",
        3: "int key", None: "null key", True: "bool key",
    }
    for obj in (doc, TRICKY, "plain", 7, None, []):
        assert yamlout.dump(obj) == dump_reference(obj)
    assert "&id" not in yamlout.dump(doc)
