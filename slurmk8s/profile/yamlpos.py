"""YAML parsing that remembers where every value came from (line, column)."""

from __future__ import annotations

from typing import Any

import yaml

from slurmk8s.errors import FieldError

Path = tuple[Any, ...]


class Positions:
    """Maps a field path to the 1-based (line, col) of its value and of its key."""

    def __init__(self) -> None:
        self.values: dict[Path, tuple[int, int]] = {}
        self.keys: dict[Path, tuple[int, int]] = {}

    def of(self, path: Path, key: bool = False) -> tuple[int, int]:
        """Position of path, falling back to its nearest known ancestor."""
        table = self.keys if key else self.values
        while path:
            if path in table:
                return table[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.values.get((), (1, 1))


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def parse(text: str) -> tuple[Any, Positions, list[FieldError]]:
    """Parse one YAML document; return (value, positions, errors)."""
    positions = Positions()
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = e.problem or e.context or "invalid YAML"
        if "expected a single document" in str(e.context or ""):
            problem = "expected one YAML document, found more than one"
        return None, positions, [FieldError(line, col, "", f"YAML syntax error: {problem}")]
    except yaml.YAMLError as e:  # reader errors (control characters) carry no mark
        return None, positions, [FieldError(1, 1, "", f"YAML error: {e}")]
    if node is None:
        return None, positions, [FieldError(1, 1, "", "the file is empty: expected a ClusterProfile mapping")]
    errors: list[FieldError] = []
    constructor = yaml.SafeLoader("")
    value = _build(node, (), positions, errors, constructor)
    return value, positions, errors


def _build(node: yaml.Node, path: Path, pos: Positions, errors: list[FieldError], c: yaml.SafeLoader) -> Any:
    pos.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        c.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                errors.append(FieldError(*_mark(key_node), format_path(path), "a mapping key must be a plain value"))
                continue
            key = c.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            child = path + (key,)
            if key in out:
                errors.append(FieldError(*_mark(key_node), format_path(child), "duplicate key"))
                continue
            pos.keys[child] = _mark(key_node)
            out[key] = _build(value_node, child, pos, errors, c)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, path + (i,), pos, errors, c) for i, item in enumerate(node.value)]
    try:
        return c.construct_object(node)
    except yaml.YAMLError as e:
        errors.append(FieldError(*_mark(node), format_path(path), f"cannot read value: {getattr(e, 'problem', e)}"))
        return None


def format_path(path: Path) -> str:
    """`spec.pools[0].replicas` from ('spec', 'pools', 0, 'replicas')."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
