"""checkov over the plain output (and the GitOps hooks) of every profile: no failed check, and every skip annotation
is needed and explained."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from slurmk8s.actions.render import render_file
from slurmk8s.output.plain import plain_tree, write_tree
from slurmk8s.output.yamlout import dump
from slurmk8s.render.k8s.security import SKIP_ANNOTATION_PREFIX

from tests.conftest import EXAMPLE_PROFILES

CHECKOV = os.environ.get("SLURMK8S_CHECKOV", "/opt/slurmk8s-checkov/bin/checkov")
pytestmark = pytest.mark.skipif(not os.access(CHECKOV, os.X_OK),
                                reason=f"checkov not found at {CHECKOV} (tools/install-checkov.sh, or set SLURMK8S_CHECKOV)")


Findings = tuple[set[tuple[str, str]], set[tuple[str, str]], list[dict]]


def scan(directory: Path) -> dict[str, Findings]:
    """For each top directory of directory: (failed, skipped) as (resource, check id), and the skipped results
    themselves. One checkov run for all of them: its start alone takes seconds."""
    run = subprocess.run([CHECKOV, "-d", str(directory), "--framework", "kubernetes", "--skip-download",
                          "-o", "json", "--compact"], capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    report = json.loads(run.stdout)
    results = (report[0] if isinstance(report, list) else report)["results"]

    def top(check: dict) -> str:
        return check["file_path"].lstrip("/").split("/", 1)[0]

    found: dict[str, Findings] = {d.name: (set(), set(), []) for d in directory.iterdir() if d.is_dir()}
    for f in results.get("failed_checks", []):
        found[top(f)][0].add((f["resource"], f["check_id"]))
    for s in results.get("skipped_checks", []):
        found[top(s)][1].add((s["resource"], s["check_id"]))
        found[top(s)][2].append(s)
    return found


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Findings]:
    """Every profile's plain manifests, one directory each, under annotated/; the same without our skip
    annotations under stripped/; checkov's findings for each."""
    root = tmp_path_factory.mktemp("checkov")
    rendered = root / "annotated"
    for profile in EXAMPLE_PROFILES:
        bundle = render_file(profile)
        tree = plain_tree(bundle)
        # and the GitOps hooks (the account tree's Job), which only the GitOps formats hold
        tree.update({f"manifests/hook-{h['kind'].lower()}-{h['metadata']['name']}.yaml": dump(h) for h in bundle.hooks})
        write_tree({k: v for k, v in tree.items() if k.startswith("manifests/") and k.endswith(".yaml")},
                   rendered / profile.stem)
    for manifest in rendered.rglob("*.yaml"):
        obj = yaml.safe_load(manifest.read_text())
        annotations = obj["metadata"].get("annotations", {})
        for key in [k for k in annotations if k.startswith(SKIP_ANNOTATION_PREFIX)]:
            del annotations[key]
        out = root / "stripped" / manifest.relative_to(rendered)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(obj))
    found = scan(root)
    assert sorted(found) == ["annotated", "stripped"]
    return found


def test_no_failed_check_and_every_skip_has_a_reason(scanned: dict[str, Findings]) -> None:
    failed, skipped, results = scanned["annotated"]
    assert sorted(failed) == [], "fix these in the renderer or accept them in render/k8s/security.py"
    assert skipped, "the scan saw none of our skip annotations"
    no_reason = [(s["resource"], s["check_id"]) for s in results
                 if s["check_result"].get("suppress_comment", "No comment provided") in ("", "No comment provided")]
    assert no_reason == []


def test_every_skip_annotation_is_needed(scanned: dict[str, Findings]) -> None:
    """Without our annotations exactly the skipped checks fail: no stale or blanket skips."""
    _, skipped, _ = scanned["annotated"]
    failed_without, skipped_without, _ = scanned["stripped"]
    assert failed_without, "the scan saw no manifest without annotations"
    assert skipped_without == set()
    assert sorted(failed_without - skipped) == [] and sorted(skipped - failed_without) == []
