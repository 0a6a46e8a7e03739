"""Deterministic YAML: key order as built, multi-line strings as literal blocks."""

from __future__ import annotations

import re
from typing import Any, Iterable

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_STR, _INT, _BOOL, _NULL = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool",
                            "tag:yaml.org,2002:null")
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
# value -> tag, per implicit flag: the C emitter asks twice per scalar, and manifests repeat their words.
_PLAIN_TAGS: dict[str, str] = {}
_QUOTED_TAGS: dict[str, str] = {}


def _fast_resolve(base_resolve: Any):
    """The emitter's resolve as a plain function (no bound method, no attribute lookups): it is called
    twice per scalar (60,000 times for 10,000 nodes). A plain scalar's implicit tag depends on its text
    alone, and without path resolvers a sequence or mapping always takes the default tag."""
    def resolve(kind: Any, value: Any, implicit: Any, _scalar: type = ScalarNode, _mapping: type = MappingNode,
                _plain: dict = _PLAIN_TAGS, _quoted: dict = _QUOTED_TAGS) -> str:
        if kind is _scalar:
            tags = _plain if implicit[0] else _quoted
            tag = tags.get(value)
            if tag is None:
                tag = tags[value] = base_resolve(kind, value, implicit)
            return tag
        return _MAP if kind is _mapping else _SEQ
    return resolve


class _Dumper(_Base):  # type: ignore[misc, valid-type]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.yaml_path_resolvers:
            self.resolve = _fast_resolve(super().resolve)

    def ignore_aliases(self, data: Any) -> bool:
        # A dict reused by two builders must print twice, never as &id001/*id001.
        return True

    def represent_data(self, data: Any) -> Any:
        """The nodes PyYAML's representers build for these types (block style, no aliases, the
        literal-block strings below), built directly: about half of the dump time went to
        the generic dispatch. Any other type goes through PyYAML's own representers."""
        kind = type(data)
        if kind is str:
            return ScalarNode(_STR, data, style="|" if "\n" in data else None)
        if kind is dict:
            represent = self.represent_data
            return MappingNode(_MAP, [(represent(k), represent(v)) for k, v in data.items()], flow_style=False)
        if kind is list:
            represent = self.represent_data
            return SequenceNode(_SEQ, [represent(item) for item in data], flow_style=False)
        if kind is int:
            return ScalarNode(_INT, str(data), style=None)
        if kind is bool:
            return ScalarNode(_BOOL, "true" if data else "false", style=None)
        if data is None:
            return ScalarNode(_NULL, "null", style=None)
        return super().represent_data(data)

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        # The emitter calls these around every node; they track paths for path resolvers only.
        if self.yaml_path_resolvers:
            super().descend_resolver(current_node, current_index)

    def ascend_resolver(self) -> None:
        if self.yaml_path_resolvers:
            super().ascend_resolver()


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


class _NotSimple(Exception):
    """The document holds something the direct writer leaves to PyYAML."""


_WIDTH = 120  # libyaml folds a plain or single-quoted scalar at a space past this column
_MAX_SIMPLE_KEY = 128  # longer keys are written as complex keys (`? `)
# One line of printable ASCII: libyaml writes it plain, or single-quoted (quotes doubled), folded at
# single spaces past _WIDTH. Anything else (multi-line text, tabs, non-ASCII, double quotes,
# backslashes, spaces at an end or two in a row) goes through PyYAML.
_ONE_LINE = re.compile(r"[ !#-\[\]-~]+\Z").match
# libyaml refuses a plain scalar in block context with one of these first, with `-`, `?` or `:` first
# before a space or the end, with `: `, a final `:` or ` #`, or with a document marker at the start.
_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_FIXED: dict[str, str] = {}  # a string without spaces -> its text, the same at any column
# Letters, digits, `_./-`, a letter or `_` first: none of the cases above; plain unless it may read as
# a bool or null (its first character among _IMPLICIT_FIRST, then the full check below decides).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z").match
_PLAIN_RESOLVER = yaml.resolver.Resolver()
# The first characters PyYAML's implicit resolvers look at; a plain scalar starting otherwise is a string.
_IMPLICIT_FIRST = frozenset(yaml.resolver.Resolver.yaml_implicit_resolvers)
assert None not in _IMPLICIT_FIRST  # no resolver for any first character


def _fold(text: str, column: int, indent: int) -> str:
    """text written from `column`: a single space where the column is past _WIDTH starts a new line at indent."""
    if column + len(text) <= _WIDTH or " " not in text:
        return text
    parts = text.split(" ")
    out = [parts[0]]
    column += len(parts[0])
    for part in parts[1:]:
        if column > _WIDTH:
            out.append(f"\n{' ' * indent}{part}")
            column = indent + len(part)
        else:
            out.append(f" {part}")
            column += 1 + len(part)
    return "".join(out)


_LITERAL_TEXT = re.compile(r"[!-~][ -~]*(?:\n[ -~]*)*\Z").match


def _literal(text: str, indent: int) -> str:
    """Multi-line text as libyaml's literal block (`|` keeping one final newline, `|-` none), lines at
    indent; _NotSimple where libyaml adds an indentation or `+` indicator or refuses the block style."""
    if not _LITERAL_TEXT(text) or " \n" in text or text.endswith((" ", "\n\n")):
        raise _NotSimple
    keep = text.endswith("\n")
    pad = " " * indent
    body = "\n".join(f"{pad}{line}" if line else "" for line in (text[:-1] if keep else text).split("\n"))
    return f"{'|' if keep else '|-'}\n{body}"


def _scalar(value: Any, column: int, indent: int, key: bool = False) -> str:
    """A scalar as libyaml writes it in block style, starting at `column`, folded lines at `indent`
    (keys never fold); _NotSimple when PyYAML has to write it."""
    kind = type(value)
    if kind is str:
        text = _FIXED.get(value)
        if text is not None:
            return text
        if _NAME(value) and value[0] not in _IMPLICIT_FIRST:  # a name, e.g. one of 10,000 pods: plain as it is
            _FIXED[value] = value
            return value
        if not _ONE_LINE(value) or value[0] == " " or value[-1] == " " or "  " in value:
            if value == "":
                return "''"
            if "\n" in value and not key:
                return _literal(value, indent)
            raise _NotSimple
        first = value[0]
        plain = not (first in _INDICATORS or (first in "-?:" and value[1:2] in ("", " "))
                     or value.startswith(("---", "...")) or ": " in value or value[-1] == ":" or " #" in value)
        if plain and first in _IMPLICIT_FIRST:  # may read as a number, bool, null...: ask PyYAML's resolver
            tag = _PLAIN_TAGS.get(value)
            if tag is None:
                tag = _PLAIN_TAGS[value] = _PLAIN_RESOLVER.resolve(ScalarNode, value, (True, False))
            plain = tag == _STR
        if " " not in value:
            text = _FIXED[value] = value if plain else f"'{value.replace(chr(39), chr(39) * 2)}'"
            return text
        if plain:
            return value if key else _fold(value, column, indent)
        quoted = value.replace("'", "''")
        return f"'{quoted}'" if key else f"'{_fold(quoted, column + 1, indent)}'"
    if kind is int:
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is dict and not value:
        return "{}"
    if kind is list and not value:
        return "[]"
    raise _NotSimple


def _write_mapping(data: dict, first: str, indent: int, out: list[str]) -> None:
    """Block mapping: the first key after `first` (e.g. a sequence's "- "), the others at indent."""
    prefix = first
    fixed = _FIXED.get  # a word seen before: its text without a call (30,000 scalars for 10,000 nodes)
    for key, value in data.items():
        if type(key) is not str:
            raise _NotSimple
        key_text = fixed(key) or _scalar(key, len(prefix), indent, key=True)
        if len(key_text) > _MAX_SIMPLE_KEY:
            raise _NotSimple
        kind = type(value)
        if kind is str:
            text = fixed(value) or _scalar(value, len(prefix) + len(key_text) + 2, indent + 2)
            out.append(f"{prefix}{key_text}: {text}\n")
        elif kind is dict and value:
            out.append(f"{prefix}{key_text}:\n")
            _write_mapping(value, " " * (indent + 2), indent + 2, out)
        elif kind is list and value:
            out.append(f"{prefix}{key_text}:\n")
            _write_sequence(value, " " * indent, indent, out)  # libyaml does not indent a sequence in a mapping
        else:
            out.append(f"{prefix}{key_text}: {_scalar(value, len(prefix) + len(key_text) + 2, indent + 2)}\n")
        prefix = " " * indent


def _write_sequence(items: list, first: str, indent: int, out: list[str]) -> None:
    prefix = first
    fixed = _FIXED.get
    for item in items:
        kind = type(item)
        if kind is str:
            out.append(f"{prefix}- {fixed(item) or _scalar(item, len(prefix) + 2, indent + 2)}\n")
        elif kind is dict and item:
            _write_mapping(item, f"{prefix}- ", indent + 2, out)
        elif kind is list and item:
            _write_sequence(item, f"{prefix}- ", indent + 2, out)
        else:
            out.append(f"{prefix}- {_scalar(item, len(prefix) + 2, indent + 2)}\n")
        prefix = " " * indent


def _dump_pyyaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=_WIDTH, allow_unicode=True)


def dump(obj: Any) -> str:
    """One YAML document. A mapping of plain words, numbers and nested blocks (most manifests, and every
    per-node list) is written directly, in libyaml's layout; anything else, e.g. multi-line text, by
    PyYAML. Both give the same bytes (tests/output/test_yamlout_nodes.py compares them)."""
    if type(obj) is dict and obj:
        out: list[str] = []
        try:
            _write_mapping(obj, "", 0, out)
        except _NotSimple:
            return _dump_pyyaml(obj)
        return "".join(out)
    return _dump_pyyaml(obj)


def dump_all(objs: Iterable[Any]) -> str:
    """A multi-document stream, each document starting with ---."""
    return "".join(f"---\n{dump(o)}" for o in objs)
