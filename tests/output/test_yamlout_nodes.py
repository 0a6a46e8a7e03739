"""yamlout builds nodes itself for speed; the bytes must equal PyYAML's own representers'."""

from __future__ import annotations

import pytest
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


# Pieces that sit at the edges of the direct writer's rules: indicators, `: ` and ` #`, quotes, document
# markers, booleans and numbers, runs of spaces, blank and indented lines, tabs, non-ASCII.
PIECES = ["a", "b", "word", "x" * 30, " ", "  ", ":", ": ", "#", " #", "-", "- ", "--", "---", "...", "'", '"', "\n",
          "\n\n", "\t", "?", "|", ">", "@", "`", "%", "!", "&", "*", ",", "[", "]", "{", "}", "=", "~", "é", "1", "0.5",
          "true", "null", "yes", "/etc/slurm", "CKV_K8S_15=images", "key=value;", "(x)", "\\", "2026-12-01"]


def random_text(rng) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.choice([0, 1, 1, 2, 3, 5, 12, 40])))


def random_value(rng, depth: int):
    roll = rng.random()
    if depth > 3 or roll < 0.55:
        return rng.choice([random_text(rng), random_text(rng), rng.randint(-5, 10**6), True, None, [], {}])
    if roll < 0.8:
        return {random_text(rng) or "k": random_value(rng, depth + 1) for _ in range(rng.randint(1, 4))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(1, 4))]


def test_the_direct_writer_gives_pyyaml_s_bytes_for_random_documents() -> None:
    import random
    rng = random.Random(17)
    direct = 0
    for _ in range(4000):
        doc = {random_text(rng) or "k": random_value(rng, 0) for _ in range(rng.randint(1, 4))}
        assert yamlout.dump(doc) == dump_reference(doc), doc
        try:
            yamlout._write_mapping(doc, "", 0, [])
            direct += 1
        except yamlout._NotSimple:
            pass
    assert direct > 400  # the direct writer, not only the fallback, was compared


def test_long_text_folds_where_libyaml_folds_it() -> None:
    words = ["w" * n for n in (3, 9, 1, 17, 30, 2, 11, 5, 8, 21, 4, 13, 7, 26, 6, 10, 2, 19, 3, 15)] * 3
    for cut in range(1, len(words)):
        text = " ".join(words[:cut])
        for doc in ({"k": text}, {"outer": {"inner": [text, {"key": text}]}}, {"k": text + ": colon"},
                    {"k": "'" + text}, {"k": [[text]]}):
            assert yamlout.dump(doc) == dump_reference(doc)


@pytest.mark.parametrize("doc", [
    {"": 1}, {"": ""}, {"a": {"": [""]}}, {"x" * 127: 1}, {"x" * 128: 1}, {"x" * 129: 1}, {"a b" * 50: "c"},
    {"k": ["", [""], [[]]]}, {"-": "-a"}, {"k": "x\n"}, {"k": "x\n\n"}, {"k": " x\ny"}, {"k": "x\n y\n"},
    {"k": "---x"}, {"k": "a:b"}, {"k": ":a"}, {"k": "a #b"}, {"k": "a#b"}, {"k": "it's"}, {"k": "0755"}, {"k": "Yes"},
], ids=repr)
def test_edges_of_the_direct_writer(doc) -> None:
    assert yamlout.dump(doc) == dump_reference(doc)
