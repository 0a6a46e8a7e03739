"""Values that end up in Kubernetes objects, checked by the API server's own rules.

A profile that validates must also be accepted by the API server, so the rules the API
server applies to these fields are applied here, with the same limits:
- label keys (nodeSelector, node labels, toleration keys): k8s.io/apimachinery
  validation.IsQualifiedName: [prefix/]name, prefix a DNS-1123 subdomain of at most 253
  characters, name at most 63 characters of [-A-Za-z0-9_.], alphanumeric at both ends;
- annotation keys: ValidateAnnotations: a label key once lowercased, so a prefix may have capitals;
  the annotations together (keys and values, in UTF-8 bytes) at most 256 KiB;
- label values: IsValidLabelValue: empty, or at most 63 such characters;
- tolerations: core validation's validateTolerations (an empty key needs operator Exists,
  Exists takes no value, Equal's value is a label value, tolerationSeconds only with NoExecute);
- CIDRs (NetworkPolicy ipBlock.cidr, Service loadBalancerSourceRanges): an IPv4 or IPv6 network with a
  prefix length;
- IP addresses (Service loadBalancerIP): IPv4 or IPv6, without an IPv6 zone;
- quantities: resource.Quantity (slurmk8s.quantity).
References: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set,
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
Pure: no I/O and no Kubernetes client.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from slurmk8s.quantity import MAX_QUANTITY, PATTERN, parse_quantity

_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NAME_PART, MAX_PREFIX, MAX_LABEL_VALUE = 63, 253, 63
MAX_ANNOTATIONS_BYTES = 256 * 1024
NAME_CHARS = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"


def label_key_problem(key: str, what: str = "label key", any_case: bool = False) -> str | None:
    """Why key is not a Kubernetes label key (qualified name), or None; any_case: the prefix's case is free
    (the API server lowercases annotation keys before this check)."""
    if not isinstance(key, str):
        return None  # the schema's type check speaks for it
    if key == "":
        return f"{_a(what)} must not be empty"
    prefix, slash, name = key.rpartition("/")
    if slash:
        if "/" in prefix:
            return f"{key!r} has more than one '/'; {_a(what)} is [prefix/]name"
        if prefix == "":
            return f"{key!r} has an empty prefix before '/'"
        if len(prefix) > MAX_PREFIX or not _DNS_SUBDOMAIN.fullmatch(prefix.lower() if any_case else prefix):
            return (f"the prefix {prefix[:80]!r} of {_a(what)} must be a DNS subdomain of at most {MAX_PREFIX} "
                    f"characters ({'' if any_case else 'lowercase '}letters, digits, '-' and '.')")
    if name == "":
        return f"{key!r} has an empty name after '/'"
    if len(name) > MAX_NAME_PART:
        return f"the name part of {what} {key[:80]!r} is {len(name)} characters; the maximum is {MAX_NAME_PART}"
    if not _NAME_PART.fullmatch(name):
        return f"{key[:80]!r} is not {_a(what)}: its name part must be {NAME_CHARS}"
    return None


def _a(what: str) -> str:
    return f"an {what}" if what[0] in "aeiou" else f"a {what}"


def annotation_key_problem(key: str) -> str | None:
    """Why key is not a Kubernetes annotation key, or None: the label key rule with the prefix in any case."""
    return label_key_problem(key, "annotation key", any_case=True)


def annotations_size_problem(annotations: dict[str, str]) -> str | None:
    """Why annotations exceed the API server's total (TotalAnnotationSizeLimitB), or None."""
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()
               if isinstance(k, str) and isinstance(v, str))
    if size <= MAX_ANNOTATIONS_BYTES:
        return None
    return (f"the annotations hold {size} bytes (keys and values, UTF-8); Kubernetes takes at most "
            f"{MAX_ANNOTATIONS_BYTES} (256 KiB) on one object")


def taint_key_problem(key: str) -> str | None:
    """Why key is not a toleration key (a label key, or empty for 'every key'), or None."""
    return None if key == "" else label_key_problem(key)


def label_value_problem(value: str) -> str | None:
    """Why value is not a Kubernetes label value, or None."""
    if not isinstance(value, str) or value == "":
        return None
    if len(value) > MAX_LABEL_VALUE:
        return f"a label value is at most {MAX_LABEL_VALUE} characters; this one has {len(value)}"
    if not _NAME_PART.fullmatch(value):
        return f"{value[:80]!r} is not a label value: it must be empty or {NAME_CHARS}"
    return None


def cidr_problem(text: str) -> str | None:
    """Why text is not a CIDR the API server takes for a NetworkPolicy ipBlock, or None."""
    if not isinstance(text, str):
        return None
    if "/" not in text:
        return f"{text[:60]!r} is not a CIDR: it needs a prefix length, such as 10.0.0.0/8 or fd00::/8"
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError as e:
        return f"{text[:60]!r} is not a CIDR ({e})"
    return None


def ip_problem(text: str) -> str | None:
    """Why text is not an IP address the API server takes (IPv4 or IPv6, no zone), or None."""
    if not isinstance(text, str):
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return f"{text[:60]!r} is not an IP address (such as 203.0.113.10 or 2001:db8::10)"
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        return f"{text[:60]!r} has an IPv6 zone (%{address.scope_id}); Kubernetes takes the address without it"
    return None


def quantity_problem(value: Any) -> str | None:
    """Why value is not a size Kubernetes accepts (syntax aside, which the schema's pattern words), or None."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None  # the schema's type check speaks for these
    if parse_quantity(value) is not None:
        return None
    if isinstance(value, int) and value < 0:
        return None  # the schema's minimum speaks for it
    if isinstance(value, str) and not _looks_like_quantity(value):
        return None  # the schema's pattern speaks for it
    return f"{str(value)[:40]} is more than Kubernetes can hold ({MAX_QUANTITY} bytes)"


def _looks_like_quantity(text: str) -> bool:
    return re.fullmatch(PATTERN, text) is not None


# JSON Schema formats (slurmk8s/profile/schema.json) -> the rule that checks them.
FORMATS = {
    "kubernetes-quantity": quantity_problem,
    "kubernetes-label-key": label_key_problem,
    "kubernetes-annotation-key": annotation_key_problem,
    "kubernetes-taint-key": taint_key_problem,
    "kubernetes-label-value": label_value_problem,
    "cidr": cidr_problem,
    "ip-address": ip_problem,
}


def toleration_problems(toleration: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each rule the API server applies across a toleration's fields."""
    out = []
    key, operator = toleration.get("key", ""), toleration.get("operator", "Equal")
    if key == "" and operator != "Exists":
        out.append(("operator" if "operator" in toleration else "key",
                    "a toleration without a key tolerates every taint and needs operator: Exists"))
    if operator == "Exists" and toleration.get("value", "") != "":
        out.append(("value", "must be empty with operator: Exists (Exists matches any value)"))
    if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
        out.append(("tolerationSeconds", "applies only to effect: NoExecute; set that effect or drop tolerationSeconds"))
    return out


def toleration_findings(document: Any) -> list[tuple[tuple, str]]:
    """(path, message) for every toleration rule broken in a parsed profile (read defensively: the
    schema may have found other problems in the same document)."""
    spec = document.get("spec") if isinstance(document, dict) else None
    pools = spec.get("pools") if isinstance(spec, dict) else None
    out = []
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        tolerations = pool.get("tolerations") if isinstance(pool, dict) else None
        for j, toleration in enumerate(tolerations if isinstance(tolerations, list) else []):
            if isinstance(toleration, dict) and all(isinstance(v, (str, int)) for v in toleration.values()):
                out += [(("spec", "pools", i, "tolerations", j, name), message)
                        for name, message in toleration_problems(toleration)]
    return out
