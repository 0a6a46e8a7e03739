"""Every rendered object validates strictly against the Kubernetes schemas of each minor we claim."""

from __future__ import annotations

from pathlib import Path

from functools import lru_cache

import pytest
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError, all_versions

import kubevalidate
from slurmk8s.actions.render import render_file
from slurmk8s.render import Bundle
from crdschema import SCHEMA_FILES, validate_custom_resource

# The minors we claim (issue 2: at least 1.29 through 1.34), as kubernetes-validate names them.
KUBERNETES_VERSIONS = [f"1.{minor}.0" for minor in range(29, 35)]


@lru_cache(maxsize=None)
def rendered(profile: Path) -> Bundle:
    """Each example profile rendered once for all the versions (the checks only read the bundle)."""
    return render_file(profile)


def test_kubernetes_validate_has_every_claimed_version() -> None:
    assert set(KUBERNETES_VERSIONS) <= set(all_versions())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_validates_strictly(example_profile: Path, version: str) -> None:
    bundle = rendered(example_profile)
    assert bundle.objects
    failures = []
    for obj in bundle.objects + bundle.hooks:  # the hooks (the account tree's Job) too
        if (obj["apiVersion"], obj["kind"]) in SCHEMA_FILES:  # a custom resource: its CRD schema, strict
            failures += [f"{obj['kind']}/{obj['metadata']['name']}: {e}" for e in validate_custom_resource(obj)]
            continue
        if kubevalidate.minor_serving(obj, version) != version:
            with pytest.raises(SchemaNotFoundError):  # truly absent from that minor: checked on the later ones
                kubevalidate.validate(obj, version, strict=True)
            continue
        try:
            kubevalidate.validate(obj, version, strict=True)
        except (ValidationError, SchemaNotFoundError) as e:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {type(e).__name__}: {e}")
    assert failures == []


@pytest.mark.parametrize("obj, error", [
    ({"apiVersion": "v1", "kind": "SlurmCluster", "metadata": {"name": "x"}}, SchemaNotFoundError),
    ({"apiVersion": "slurmk8s.io/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, SchemaNotFoundError),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dataa": {}}, ValidationError),
], ids=["unknown-kind", "unknown-apiversion", "unknown-field-strict"])
def test_the_check_itself_can_fail(obj: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        kubevalidate.validate(obj, KUBERNETES_VERSIONS[0], strict=True)


def test_a_scaledobject_outside_its_crd_schema_fails() -> None:
    bad = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "x"},
           "spec": {"scaleTargetRef": {"name": "x"}, "triggers": [{"type": "prometheus", "metadata": {}}],
                    "maxReplicas": 3}}
    assert any("maxReplicas" in e for e in validate_custom_resource(bad))
