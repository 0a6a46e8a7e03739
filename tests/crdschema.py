"""Strict validation of the custom resources our outputs emit, against the upstream CRD schemas in tests/crdschemas/.

Test-only: the schemas are most of the package's size and no command needs them."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parent / "crdschemas"
# (apiVersion, kind) -> schema file under tests/crdschemas/.
SCHEMA_FILES = {
    ("argoproj.io/v1alpha1", "Application"): "argoproj.io/application_v1alpha1.json",
    ("argoproj.io/v1alpha1", "ApplicationSet"): "argoproj.io/applicationset_v1alpha1.json",
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): "kustomize.config.k8s.io/kustomization_v1beta1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh/scaledobject_v1alpha1.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com/servicemonitor_v1.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "monitoring.coreos.com/podmonitor_v1.json",
}

# The CRDs leave metadata open ({"type": "object"}); we hold it to the ObjectMeta fields we write.
_OBJECT_META = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 253},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
}


def _close(schema: Any) -> Any:
    """Make every object schema with listed properties reject unknown fields, unless it says it preserves them."""
    if isinstance(schema, dict):
        out = {k: _close(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_close(v) for v in schema]
    return schema


@lru_cache(maxsize=None)
def strict_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The shipped schema of a kind, closed against unknown fields; KeyError for a kind we do not ship."""
    rel = SCHEMA_FILES[(api_version, kind)]
    raw = json.loads(SCHEMAS.joinpath(*rel.split("/")).read_text())
    schema = _close(raw)
    if "metadata" in schema.get("properties", {}):
        schema["properties"]["metadata"] = copy.deepcopy(_OBJECT_META)
    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind"})
    return schema


def validate_custom_resource(obj: dict[str, Any]) -> list[str]:
    """Every schema error of obj as `Kind/name: /json/path: message`; an unknown kind is an error too."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    name = (obj.get("metadata") or {}).get("name", "?")
    if (api_version, kind) not in SCHEMA_FILES:
        return [f"{kind}/{name}: no schema for apiVersion {api_version!r} kind {kind!r}"]
    schema = strict_schema(api_version, kind)
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{kind}/{name}: /{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors]
