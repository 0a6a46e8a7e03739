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


# Aliases can multiply a small file into a huge document ("billion laughs"); no real
# profile comes near this many values.
MAX_VALUES = 200_000
# The deepest real profile nests about 12 levels (a topology tree of 5 tiers); the schema
# validator recurses once per level, so nesting is bounded well below Python's stack.
MAX_DEPTH = 48


class _TooLarge(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, node: yaml.Node, path: Path):
        super().__init__()
        self.node, self.path = node, path


def parse(text: str) -> tuple[Any, Positions, list[FieldError]]:
    """Parse one YAML document; return (value, positions, errors)."""
    positions = Positions()
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = e.problem or e.context or "invalid YAML"
        if "expected a single document" in str(e.context or ""):
            problem = "expected one YAML document, found more than one"
        return None, positions, [FieldError(line, col, "", f"YAML syntax error: {problem}")]
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        col = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
        return None, positions, [FieldError(line, col, "", f"YAML error: character U+{_ord(e.character):04X} is not allowed in YAML")]
    except yaml.YAMLError as e:
        return None, positions, [FieldError(1, 1, "", f"YAML error: {str(e).splitlines()[0]}")]
    except RecursionError:
        return None, positions, [FieldError(1, 1, "", "YAML error: nesting is too deep")]
    if node is None:
        return None, positions, [FieldError(1, 1, "", "the file is empty: expected a ClusterProfile mapping")]
    errors: list[FieldError] = []
    constructor = yaml.SafeLoader("")
    try:
        value = _build(node, (), positions, errors, constructor, set(), [0])
    except RecursionError:
        return None, positions, [FieldError(1, 1, "", "YAML error: nesting is too deep")]
    except _TooLarge:
        return None, positions, [FieldError(1, 1, "", f"YAML error: more than {MAX_VALUES} values; no profile is "
                                            "that large (are aliases expanding?)")]
    except _TooDeep as e:
        shown = format_path(e.path[:6]) + "..."  # the full path would be one enormous line
        return None, positions, [FieldError(*_mark(e.node), shown,
                                            f"nested deeper than {MAX_DEPTH} levels; no profile needs that many")]
    return value, positions, errors


def _compose(text: str) -> yaml.Node | None:
    """The document's node tree: libyaml when present (4x faster on a large file), and the
    pure-Python loader whenever libyaml refuses, so every YAML error reads the same either way."""
    loaders: list[type[yaml.SafeLoader] | type[yaml.CSafeLoader]] = [yaml.SafeLoader]
    if getattr(yaml, "__with_libyaml__", False):
        loaders.insert(0, yaml.CSafeLoader)
    for i, loader_class in enumerate(loaders):
        loader = loader_class(text)
        try:
            return loader.get_single_node()
        except (yaml.YAMLError, RecursionError):
            if i == len(loaders) - 1:
                raise
        finally:
            loader.dispose()
    return None


def _ord(character: Any) -> int:
    return character if isinstance(character, int) else ord(character)


def _build(node: yaml.Node, path: Path, pos: Positions, errors: list[FieldError], c: yaml.SafeLoader,
           open_nodes: set[int], count: list[int]) -> Any:
    count[0] += 1
    if count[0] > MAX_VALUES:
        raise _TooLarge
    if len(path) > MAX_DEPTH:
        raise _TooDeep(node, path)
    pos.values.setdefault(path, _mark(node))
    if id(node) in open_nodes:
        errors.append(FieldError(*_mark(node), format_path(path), "a recursive alias (an anchor used inside itself)"))
        return None
    if isinstance(node, yaml.MappingNode):
        try:
            c.flatten_mapping(node)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or node.start_mark
            errors.append(FieldError(mark.line + 1, mark.column + 1, format_path(path), f"cannot merge: {e.problem}"))
            return {}
        open_nodes.add(id(node))
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                errors.append(FieldError(*_mark(key_node), format_path(path), "a mapping key must be a plain value"))
                continue
            key = _scalar(key_node, path, errors, c)
            if not isinstance(key, str):
                key = str(key)
            child = path + (key,)
            if key in out:
                first = pos.keys[child][0]
                errors.append(FieldError(*_mark(key_node), format_path(child), f"duplicate key (first at line {first})"))
                continue
            pos.keys[child] = _mark(key_node)
            out[key] = _build(value_node, child, pos, errors, c, open_nodes, count)
        open_nodes.discard(id(node))
        return out
    if isinstance(node, yaml.SequenceNode):
        open_nodes.add(id(node))
        items = [_build(item, path + (i,), pos, errors, c, open_nodes, count) for i, item in enumerate(node.value)]
        open_nodes.discard(id(node))
        return items
    return _scalar(node, path, errors, c)


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _scalar(node: yaml.Node, path: Path, errors: list[FieldError], c: yaml.SafeLoader) -> Any:
    if node.tag in _NUMBER_TAGS and ":" in str(node.value) and isinstance(node, yaml.ScalarNode) and not node.style:
        # YAML 1.1 reads 12:00:00 as the base-60 number 43200: never what a profile means.
        value = c.construct_object(node, deep=True)
        errors.append(FieldError(*_mark(node), format_path(path), f"{node.value} is read by YAML as the base-60 "
                                 f"number {value}; quote it: \"{node.value}\""))
        return value
    try:
        return c.construct_object(node, deep=True)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        errors.append(FieldError(*_mark(node), format_path(path), f"cannot read value: {problem}"))
    except (ValueError, OverflowError) as e:  # a timestamp like 2001-99-99
        errors.append(FieldError(*_mark(node), format_path(path), f"cannot read value: {e}"))
    return None


def format_path(path: Path) -> str:
    """`spec.pools[0].replicas` from ('spec', 'pools', 0, 'replicas')."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and str(part).isprintable() and not any(ch.isspace() for ch in str(part)):
            out += ("." if out else "") + str(part)
        else:  # keep one problem on one line, and an odd key visible
            out += f"[{str(part)!r}]"
    return out
