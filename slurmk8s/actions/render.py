"""`render`: profile -> files on disk (plain, kustomize, helm, argocd) or a YAML stream."""

from __future__ import annotations

import os
import posixpath
import sys
from pathlib import Path

from slurmk8s.profile.files import read_profile
from slurmk8s.errors import OutputError, UsageError
from slurmk8s.output.argocd import argocd_tree, waved_objects
from slurmk8s.output.helm import helm_tree
from slurmk8s.output.kustomize import kustomize_tree
from slurmk8s.output.plain import plain_tree, write_tree
from slurmk8s.output.yamlout import dump_all
from slurmk8s.render import Bundle, render

FORMATS = ("plain", "kustomize", "helm", "argocd")


def render_file(profile_path: str, namespace: str | None = None) -> Bundle:
    """Load a profile and render it (into namespace, when given, instead of the profile's)."""
    return render(read_profile(profile_path, namespace))


def build_tree(bundle: Bundle, fmt: str, repo_url: str | None = None, revision: str = "HEAD",
               repo_path: str | None = None) -> dict[str, str]:
    """Relative path -> content of the rendering in format fmt (see FORMATS)."""
    if fmt == "plain":
        return plain_tree(bundle)
    if fmt == "kustomize":
        return kustomize_tree(bundle)
    if fmt == "helm":
        return helm_tree(bundle)
    if fmt == "argocd":
        if not repo_url:
            raise UsageError("--format argocd needs --repo-url: the git repository Argo CD reads this tree from")
        if not repo_path or repo_path.startswith("/") or ".." in repo_path.split("/"):
            raise UsageError(f"--repo-path {repo_path!r}: give the tree's path inside the repository, relative, "
                             "without '..'")
        return argocd_tree(bundle, repo_url, revision, posixpath.normpath(repo_path))
    raise UsageError(f"--format {fmt!r}: unknown format; available: {', '.join(FORMATS)}")


def write_stdout(text: str, what: str) -> None:
    """Write text to standard output, or fail with one line (closed stdout, full disk, closed pipe)."""
    if sys.stdout is None:
        raise OutputError(f"cannot write {what}: standard output is closed")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        # Point stdout at /dev/null, or Python's own flush at exit fails again with a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise OutputError(f"cannot write {what} to standard output: {e.strerror or e}") from None


def render_to(profile_path: str, out: str, fmt: str = "plain", repo_url: str | None = None,
              revision: str = "HEAD", repo_path: str | None = None) -> list[str]:
    """Render into directory out, or to stdout when out is '-' (plain objects, or with sync waves for argocd)."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: unknown format; available: {', '.join(FORMATS)}")
    bundle = render_file(profile_path)
    if out == "-":
        if fmt == "argocd":  # what the Argo CD plugin prints
            write_stdout(dump_all(waved_objects(bundle)), "the YAML stream")
        elif fmt == "plain":
            write_stdout(dump_all(bundle.objects), "the YAML stream")
        else:
            raise UsageError(f"--format {fmt} writes a directory; -o - prints only plain or argocd")
        return []
    if fmt == "argocd" and repo_path is None:
        repo_path = Path(out).as_posix()
    return write_tree(build_tree(bundle, fmt, repo_url, revision, repo_path), Path(out))
