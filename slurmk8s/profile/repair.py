"""One validation pass: a profile with schema errors still gets its cross-field checks.

The cross-field checks need a schema-valid document. So when the schema finds problems, a
copy of the document is repaired: every value the schema refused is taken out (a missing
or refused required field gets a neutral placeholder when its schema allows one, else the
object holding it goes too), until the copy is schema-valid. The cross-field checks then run
on the copy, and their problems are reported with the schema's, except those that touch a
repaired place (they could be echoes of the repair, not the user's mistakes).
Pure; positions and paths stay those of the document as written.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slurmk8s.profile.schema import SchemaFinding, is_schema_valid, profile_schema, schema_findings
from slurmk8s.profile.yamlpos import Positions

_GONE = object()
MAX_ROUNDS = 16  # each round removes at least one more place; deeper documents are refused anyway


@dataclass
class Repaired:
    """A schema-valid copy of a document, and the places changed to get it (paths of the original).

    places: values taken out (the default applies) or replaced by a placeholder. Unknown fields,
    dropped too, are not places: no check reads them. dropped: a list item or a whole object had
    to go, which can echo anywhere (a pool in no partition, a slot count short), so the caller
    runs no cross-field check at all. names: refused names, which other fields may refer to;
    aliases: each placeholder name and the name (or '?') it stands for in messages.
    """

    document: dict
    places: set[tuple] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    dropped: bool = False

    def touches(self, path: tuple, message: str) -> bool:
        """True when a problem at path (with message) may echo the repair rather than the profile.

        That is a problem inside a repaired place, one in the same list item (pool, domain...)
        as a repaired field that names that field (`... greater than maxReplicas 4` after maxReplicas was
        repaired), one whose message names a repaired field by its whole path (`set spec.metrics.enabled:
        true`), or one about a refused name (`unknown pool 'GPU'`).
        """
        for place in self.places:
            if path[:len(place)] == place:
                return True
            if all(isinstance(part, str) for part in place) and ".".join(place) in message:
                return True
            item = _item_of(place)
            if isinstance(place[-1], str) and path[:len(item)] == item and place[-1].lower() in message.lower():
                return True
        return any(f"'{name}'" in message for name in list(self.names) + list(self.aliases))

    def restore(self, message: str) -> str:
        """message with each placeholder name shown as the name it stands for."""
        for alias, original in self.aliases.items():
            message = message.replace(alias, original)
        return message


def repair(document: Any, findings: list[SchemaFinding], unsafe_paths: Sequence[tuple] = ()) -> Repaired | None:
    """A schema-valid copy of document without what findings (and unsafe_paths) point at; None if none exists."""
    if not isinstance(document, dict):
        return None
    removed: set[tuple] = set(unsafe_paths)
    unknown: set[tuple] = set()
    filled: dict[tuple, Any] = {}
    aliases: dict[str, str] = {}
    dropped = False
    positions = Positions()
    for _ in range(MAX_ROUNDS):
        built, index = _build(document, removed, filled)
        if built is _GONE or not isinstance(built, dict):
            return None
        if is_schema_valid(built):
            names = [_value_at(document, p) for p in removed if p and p[-1] == "name"]
            # A list item or a map entry (slots, node labels) gone changes sums and coverage elsewhere.
            dropped = dropped or any(not _is_field(p) and not _inert(p) for p in removed - unknown)
            return Repaired(built, (removed - unknown) | set(filled),
                            {n for n in names if isinstance(n, str)}, aliases, dropped)
        found = findings if not removed and not filled else schema_findings(built, positions)
        changed = False
        for finding in found:
            path = _original(finding.path, index)
            if path is None:
                return None
            target = path
            if finding.missing is not None:
                placeholder = _placeholder(finding.missing_schema or {})
                if finding.missing == "name" and placeholder is _GONE:
                    # The item keeps its place under a stand-in name, so what lists it (a partition's
                    # pools) still finds it; messages show the name as written.
                    placeholder = f"slurmk8s-repaired-{len(aliases)}"
                    original = _value_at(document, path + ("name",))
                    if not isinstance(original, str):
                        return _without_cross_checks(document, findings)  # what referred to it cannot be told
                    aliases[placeholder] = original if original.isprintable() else repr(original)
                if placeholder is not _GONE and path + (finding.missing,) not in filled:
                    filled[path + (finding.missing,)] = placeholder
                    changed = True
                    continue
                dropped = True  # no neutral value: the object holding the field goes
            if not target:
                return None
            if target not in removed:
                removed.add(target)
                if finding.unknown:
                    unknown.add(target)
                changed = True
            elif target in filled:
                del filled[target]
                changed = True
            else:  # already removed and still refused: its parent must go
                if not target[:-1]:
                    return None
                removed.add(target[:-1])
                dropped = changed = True
        if not changed:
            return None
    return None


def _without_cross_checks(document: Any, findings: list[SchemaFinding]) -> Repaired:
    """The answer when the cross-field checks cannot run without echoing the repair."""
    return Repaired(document, set(), set(), {}, dropped=True)


# Parts of a pool that only reach its pods: no cross-field check reads them.
_INERT = (("spec", "pools", int, "nodeSelector"), ("spec", "pools", int, "tolerations"))


def _inert(path: tuple) -> bool:
    return any(len(path) > len(prefix) and all(p == q or (q is int and isinstance(p, int))
                                               for p, q in zip(path, prefix)) for prefix in _INERT)


def _is_field(path: tuple) -> bool:
    """True when path ends at a named property of an object (its default applies when it is taken out),
    not at a list item or an entry of a free-form map."""
    if not path or isinstance(path[-1], int):
        return False
    schema = profile_schema()
    for part in path:
        schema = _deref(schema)
        if isinstance(part, int):
            schema = schema.get("items", {})
        elif part in schema.get("properties", {}):
            schema = schema["properties"][part]
        else:
            return False
    return True


def _deref(schema: dict) -> dict:
    ref = schema.get("$ref", "") if isinstance(schema, dict) else ""
    if ref.startswith("#/$defs/"):
        return {**profile_schema()["$defs"][ref.rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema if isinstance(schema, dict) else {}


def _item_of(place: tuple) -> tuple:
    """The list item (a pool, a domain, a shape) holding a place: up to its last list index, else its parent."""
    for i in range(len(place) - 1, 0, -1):
        if isinstance(place[i - 1], int):
            return place[:i]
    return place[:-1]


def _placeholder(schema: dict) -> Any:
    """A neutral valid value for a required field, or _GONE when its schema allows none."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types:
        return _GONE  # a text field (a name, a CPU list, a size) has no neutral value
    if "integer" in types:
        low = schema.get("minimum", 0)
        return low if low <= schema.get("maximum", low) else _GONE
    if "boolean" in types:
        return False
    return _GONE


def _build(node: Any, removed: set[tuple], filled: dict[tuple, Any], path: tuple = (),
           index: dict[tuple, list[int]] | None = None) -> tuple[Any, dict[tuple, list[int]]]:
    """The document without removed places and with filled ones; index maps each list's new positions to old ones."""
    index = {} if index is None else index
    if path in removed:
        return _GONE, index
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            built, _ = _build(value, removed, filled, path + (key,), index)
            if built is not _GONE:
                out[key] = built
        for place, value in filled.items():
            if place[:-1] == path and place[-1] not in out:
                out[place[-1]] = copy.deepcopy(value)
        return out, index
    if isinstance(node, list):
        out_list, kept = [], []
        for i, value in enumerate(node):
            built, _ = _build(value, removed, filled, path + (i,), index)
            if built is not _GONE:
                out_list.append(built)
                kept.append(i)
        index[path] = kept
        return out_list, index
    return node, index


def _original(path: tuple, index: dict[tuple, list[int]]) -> tuple | None:
    """A path of the repaired copy as a path of the original document."""
    out: tuple = ()
    for part in path:
        if isinstance(part, int) and out in index:
            kept = index[out]
            if not 0 <= part < len(kept):
                return None
            part = kept[part]
        out += (part,)
    return out


def _value_at(document: Any, path: tuple) -> Any:
    """The value at path in the document as written (None when the path is not there)."""
    node = document
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node
