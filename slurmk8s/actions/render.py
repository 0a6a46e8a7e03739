"""`render`: profile -> files on disk or a YAML stream."""

from __future__ import annotations

import sys
from pathlib import Path

from slurmk8s.actions.files import read_profile
from slurmk8s.output.plain import plain_tree, write_tree
from slurmk8s.output.yamlout import dump_all
from slurmk8s.render import Bundle, render


def render_file(profile_path: str) -> Bundle:
    """Load a profile and render it."""
    return render(read_profile(profile_path))


def render_to(profile_path: str, out: str) -> list[str]:
    """Render into directory out, or to stdout when out is '-'."""
    bundle = render_file(profile_path)
    if out == "-":
        sys.stdout.write(dump_all(bundle.objects))
        return []
    return write_tree(plain_tree(bundle), Path(out))
