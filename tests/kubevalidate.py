"""kubernetes_validate.validate, with each schema file parsed once per test process (a test helper).

kubernetes-validate reads and parses the JSON schema files on every call, the 1.5 MB
`_definitions.json` of the version included: that was nearly all the time of a strict check of
a rendered bundle. The files are data that never change during a run, so the parsed documents
are kept; the validation itself is kubernetes-validate's own, unchanged.
"""

from __future__ import annotations

import functools

import kubernetes_validate
from kubernetes_validate import utils
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from slurmk8s.kube.resources import NEWER_BUILTIN

if not hasattr(utils.schema_contents, "cache_info"):
    # validate() looks schema_contents up in its module at each call; nothing mutates what it returns
    utils.schema_contents = functools.lru_cache(maxsize=None)(utils.schema_contents)

validate = kubernetes_validate.validate

# Built-in kinds newer than the oldest minor claimed, by the minor that first serves them: the product's own
# table, from which `up` refuses them on an older cluster and names the profile setting that leaves them out.
SERVED_FROM = {key: minor for key, (minor, _setting) in NEWER_BUILTIN.items()}


def minor_serving(obj: dict, version: str) -> str:
    """version ("1.29.0"), or the first minor that serves obj's kind when version does not."""
    first = SERVED_FROM.get((obj["apiVersion"], obj["kind"]), 0)
    return version if int(version.split(".")[1]) >= first else f"1.{first}.0"


__all__ = ["validate", "ValidationError", "SchemaNotFoundError", "SERVED_FROM", "minor_serving"]
