"""Deterministic YAML: key order as built, multi-line strings as literal blocks, no aliases."""

from __future__ import annotations

from typing import Any, Iterable

import yaml

# libyaml's emitter where PyYAML was built with it (the usual wheels): several times the pure-Python speed.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc, valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        # A dict reused by two builders must print twice, never as &id001/*id001.
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Any) -> str:
    """One YAML document, block style, lines folded past column 120."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def dump_all(objs: Iterable[Any]) -> str:
    """A multi-document stream, each document starting with ---."""
    return "".join(f"---\n{dump(o)}" for o in objs)
