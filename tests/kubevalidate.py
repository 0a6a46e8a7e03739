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

if not hasattr(utils.schema_contents, "cache_info"):
    # validate() looks schema_contents up in its module at each call; nothing mutates what it returns
    utils.schema_contents = functools.lru_cache(maxsize=None)(utils.schema_contents)

validate = kubernetes_validate.validate

__all__ = ["validate", "ValidationError", "SchemaNotFoundError"]
