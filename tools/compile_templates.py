"""Compile the Slurm templates (slurmk8s/render/templates/*.j2) to plain Python, once, at build.

    python tools/compile_templates.py          # rewrite slurmk8s/render/compiled_templates.py
    python tools/compile_templates.py --check  # exit 1 when that file is not current

Jinja stays the templates' language and their reference: this reads each template with Jinja's own
parser (the render's settings: trim_blocks, lstrip_blocks, keep_trailing_newline) and writes the
layout it describes as a Python function, with Jinja's own meaning for `a.b` (attribute, else item),
`{{ x }}` (str(x)) and `join`. A template using anything else (macros, `loop`, other filters, ...)
is left out and Jinja renders it. The module records each template's digest: at render, a template
whose file differs is rendered by Jinja (render/slurmfiles.py). Importing and compiling Jinja is
about a tenth of a 10,000-node render (issue 17). `pytest tests/render/test_golden.py --update-golden`
runs this too; tests/render/test_compiled_templates.py checks the file is current and renders each
template both ways.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import jinja2
from jinja2 import nodes

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "slurmk8s" / "render" / "templates"
TARGET = ROOT / "slurmk8s" / "render" / "compiled_templates.py"
OPERATORS = {"eq": "==", "ne": "!="}


class Unsupported(Exception):
    """A construct this compiler leaves to Jinja."""


def environment() -> jinja2.Environment:
    """The render's settings (render/slurmfiles.py): they decide the whitespace of the text parts."""
    return jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True, autoescape=False)


class Compiler:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.loops = 0

    def expr(self, node: nodes.Node, scope: dict[str, str]) -> str:
        if isinstance(node, nodes.Name):
            return scope.get(node.name) or f"ctx[{node.name!r}]"
        if isinstance(node, nodes.Const) and type(node.value) in (str, int, bool, type(None)):
            return repr(node.value)
        if isinstance(node, nodes.Getattr):
            return f"_attr({self.expr(node.node, scope)}, {node.attr!r})"
        if isinstance(node, nodes.Call) and not (node.kwargs or node.dyn_args or node.dyn_kwargs):
            return f"{self.expr(node.node, scope)}({', '.join(self.expr(a, scope) for a in node.args)})"
        if (isinstance(node, nodes.Filter) and node.name == "join" and node.node is not None and not node.kwargs
                and not node.dyn_args and not node.dyn_kwargs and len(node.args) <= 1):
            sep = self.expr(node.args[0], scope) if node.args else "''"
            return f"str({sep}).join(map(str, {self.expr(node.node, scope)}))"
        if isinstance(node, nodes.CondExpr) and node.expr2 is not None:
            return (f"({self.expr(node.expr1, scope)} if {self.expr(node.test, scope)} "
                    f"else {self.expr(node.expr2, scope)})")
        if isinstance(node, nodes.Compare) and len(node.ops) == 1 and node.ops[0].op in OPERATORS:
            return f"({self.expr(node.expr, scope)} {OPERATORS[node.ops[0].op]} {self.expr(node.ops[0].expr, scope)})"
        if isinstance(node, nodes.Not):
            return f"(not {self.expr(node.node, scope)})"
        if isinstance(node, (nodes.And, nodes.Or)):
            op = "and" if isinstance(node, nodes.And) else "or"
            return f"({self.expr(node.left, scope)} {op} {self.expr(node.right, scope)})"
        raise Unsupported(type(node).__name__)

    def body(self, body: list[nodes.Node], scope: dict[str, str], depth: int) -> None:
        pad = "    " * depth
        start = len(self.lines)
        for node in body:
            if isinstance(node, nodes.Output):
                for child in node.nodes:
                    text = repr(child.data) if isinstance(child, nodes.TemplateData) else f"str({self.expr(child, scope)})"
                    self.lines.append(f"{pad}out({text})")
            elif isinstance(node, nodes.If):
                keyword = "if"
                for branch in [node, *node.elif_]:
                    self.lines.append(f"{pad}{keyword} {self.expr(branch.test, scope)}:")
                    self.body(branch.body, scope, depth + 1)
                    keyword = "elif"
                if node.else_:
                    self.lines.append(f"{pad}else:")
                    self.body(node.else_, scope, depth + 1)
            elif isinstance(node, nodes.For):
                if node.else_ or node.test is not None or node.recursive:
                    raise Unsupported("for with else, a filter or recursion")
                if any(n.name == "loop" for n in node.find_all(nodes.Name)):
                    raise Unsupported("the loop variable")
                targets = node.target.items if isinstance(node.target, nodes.Tuple) else [node.target]
                if not all(isinstance(t, nodes.Name) for t in targets):
                    raise Unsupported("for target")
                self.loops += 1
                # Each loop's names are its own, as in Jinja: nothing leaks out or shadows the context.
                inner = {**scope, **{t.name: f"l{self.loops}_{t.name}" for t in targets}}
                names = ", ".join(inner[t.name] for t in targets)
                target = f"({names},)" if isinstance(node.target, nodes.Tuple) else names
                self.lines.append(f"{pad}for {target} in {self.expr(node.iter, scope)}:")
                self.body(node.body, inner, depth + 1)
            else:
                raise Unsupported(type(node).__name__)
        if len(self.lines) == start:
            self.lines.append(f"{pad}pass")


def compile_template(source: str, function: str) -> str:
    """Python source of `def function(ctx) -> str` laying out what the template does; Unsupported if it cannot."""
    compiler = Compiler()
    compiler.body(environment().parse(source).body, {}, 1)
    return "\n".join([f"def {function}(ctx):", "    parts = []", "    out = parts.append", *compiler.lines,
                      "    return ''.join(parts)"])


HEADER = '''"""The Slurm templates as plain Python. Generated by tools/compile_templates.py: do not edit.

Each entry: the SHA-256 of the template's file when compiled, and its function. render/slurmfiles.py
uses a function only while the template's file still has that digest; otherwise Jinja renders it.
"""

# ruff: noqa


def _attr(obj, name):
    """Jinja's `obj.name`: the attribute, else the item (StrictUndefined: neither is an error)."""
    try:
        return getattr(obj, name)
    except AttributeError:
        pass
    try:
        return obj[name]
    except (TypeError, LookupError, AttributeError):
        raise KeyError(f"{type(obj).__name__} has no attribute or item {name!r}") from None
'''


def generate() -> tuple[str, list[str]]:
    """(the module's text, the templates left to Jinja)."""
    parts, entries, skipped = [HEADER], [], []
    for index, path in enumerate(sorted(TEMPLATES.rglob("*.j2"))):
        name = path.relative_to(TEMPLATES).as_posix()
        source = path.read_bytes().decode("utf-8")
        try:
            code = compile_template(source, f"_template_{index}")
        except Unsupported as e:
            skipped.append(f"{name}: {e}")
            continue
        parts.append(f"\n\n{code}\n")
        entries.append(f"    {name!r}: ({hashlib.sha256(path.read_bytes()).hexdigest()!r}, _template_{index}),")
    parts.append("\n\nTEMPLATES = {\n" + "\n".join(entries) + "\n}\n")
    return "".join(parts), skipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the compiled module is not current")
    args = parser.parse_args()
    text, skipped = generate()
    for line in skipped:
        print(f"left to Jinja: {line}", file=sys.stderr)
    current = TARGET.read_text() if TARGET.exists() else None
    if args.check:
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is not current: run python tools/compile_templates.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
