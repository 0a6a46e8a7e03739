"""Kubernetes quantities: the API server's syntax, read exactly (no floats), as bytes or MiB.

Syntax (k8s.io/apimachinery resource.Quantity): <signedNumber><suffix>, where the number is
digits with an optional decimal point (`2`, `2.5`, `2.`, `.5`) and the suffix is a binary SI
suffix (Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m "" k M G T P E), or a decimal exponent
(`e3`, `E-2`). So `2G`, `2048M`, `1.5Gi`, `2e9` and a plain `2147483648` are all accepted, as
Kubernetes accepts them. Profiles hold sizes, so a sign is refused (Kubernetes refuses negative
requests and limits anyway), and, as in Kubernetes, no quantity exceeds 2^63-1.
Reference: https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

# The JSON Schema's pattern for a quantity string (slurmk8s/profile/schema.json keeps a copy; a test
# checks that they agree). A leading "+" is Kubernetes syntax too; "-" is not a size.
PATTERN = r"^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][-+]?[0-9]+|[numkMGTPE])?$"
_QUANTITY = re.compile(PATTERN)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
MAX_QUANTITY = 2**63 - 1
MIB = 2**20


def parse_quantity(value: str | int) -> Fraction | None:
    """The exact value of a quantity (a plain integer counts), or None when it is not one or exceeds 2^63-1."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value) if 0 <= value <= MAX_QUANTITY else None
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value)
    if m is None or value.endswith("\n"):
        return None
    number, suffix = m.group(1), m.group(3) or ""
    whole, _, frac = number.partition(".")
    mantissa = Fraction(int(whole or "0") * 10**len(frac) + int(frac or "0"), 10**len(frac))
    if suffix in _BINARY:
        return _bounded(mantissa, 1024 ** _BINARY[suffix])
    exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
    if mantissa == 0:
        return Fraction(0)
    # Bound the exponent before computing 10**exponent: `1e999999999` must not cost minutes.
    magnitude = len(whole.lstrip("0")) + exponent if whole.lstrip("0") else exponent - (len(frac) - len(frac.lstrip("0")))
    if magnitude > 20:
        return None
    if magnitude < -40:
        return Fraction(1, 10**40)  # positive and far below a byte: rounds up like any other fraction
    return _bounded(mantissa, Fraction(10) ** exponent)


def _bounded(mantissa: Fraction, scale: Fraction | int) -> Fraction | None:
    value = mantissa * scale
    return value if value <= MAX_QUANTITY else None


def is_quantity(value: object) -> bool:
    """True for a quantity Kubernetes would accept as a size (see parse_quantity)."""
    return parse_quantity(value) is not None  # type: ignore[arg-type]


def to_bytes(value: str | int) -> int:
    """A size quantity in bytes, rounded up to a whole byte as the kubelet does (ValueError if not a quantity)."""
    parsed = parse_quantity(value)
    if parsed is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return math.ceil(parsed)


def to_mib(value: str | int) -> int:
    """Whole MiB in a size quantity (rounded down: Slurm's RealMemory must not promise more than the pod has)."""
    return to_bytes(value) // MIB


def from_mib(mib: int) -> str:
    """The shortest exact quantity for a MiB count."""
    for suffix, power in (("Ti", 2), ("Gi", 1)):
        if mib and mib % 1024**power == 0:
            return f"{mib // 1024**power}{suffix}"
    return f"{mib}Mi"
