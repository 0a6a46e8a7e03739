"""Where the fields of a loaded profile were written, for problems found after loading.

The render's own checks (render/apirules.py: names, the API server's uniqueness rules) see the
model, whose lists are sorted by name; this maps a name back to the document's item and its
file position, so `validate` and `render` report them as FILE:LINE:COL like any other check.
"""

from __future__ import annotations

from typing import Any

from slurmk8s.errors import FieldError
from slurmk8s.profile.yamlpos import Positions, format_path


class Locator:
    """The document as written and the position of each of its fields."""

    def __init__(self, document: dict[str, Any], positions: Positions) -> None:
        self._document = document
        self._positions = positions

    def named(self, section: tuple, name: str, *rest: Any) -> tuple:
        """The path of the item called name in the list at section, then rest; section when no item is."""
        items: Any = self._document
        for part in section:
            items = items.get(part) if isinstance(items, dict) else None
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and item.get("name") == name:
                return (*section, i, *rest)
        return section

    def written(self, path: tuple) -> bool:
        """Whether the document itself sets path (a default does not count): the parser saw a value there."""
        return tuple(path) in self._positions.values

    def error(self, path: tuple, message: str, key: bool = False) -> FieldError:
        """A FieldError at path's position (the nearest written ancestor's when path itself was not written)."""
        return FieldError(*self._positions.of(path, key=key), format_path(path), message)


def field_error(locator: Locator | None, path: tuple, message: str, key: bool = False) -> FieldError:
    """A located FieldError; named by its path alone for a profile built in code (no file to point into)."""
    if locator is None:
        return FieldError(0, 0, format_path(path), message)
    return locator.error(path, message, key)


def named_path(locator: Locator | None, section: tuple, name: str, *rest: Any) -> tuple:
    """Locator.named, or section when there is no document to look in."""
    return locator.named(section, name, *rest) if locator is not None else section
