"""The standard `dataclass`, its generated methods compiled once and kept beside the bytecode.

dataclasses writes each class's __init__, __repr__, __eq__, __hash__, __setattr__ and __delattr__
as source text and compiles it with exec() at every import: about 0.4 ms a frozen class, 20 ms of
a render's start for the profile model and the render's records (issue 17). `dataclass` here is
the standard one; only its exec() finds the compiled code in a cache keyed by that exact text, so
a changed class misses and is compiled as before. A module's cache sits in __pycache__ beside its
.pyc (`<module>.<tag>.dataclasses`) and is written as Python writes bytecode: not under
PYTHONDONTWRITEBYTECODE, nowhere Python could not write its .pyc. Like a .pyc it is code Python runs,
trusted as the .pyc beside it is. A Python whose dataclasses does not call exec() by name simply
never consults it.
"""

from __future__ import annotations

import atexit
import dataclasses
import marshal
import os
import sys
from _thread import RLock
from importlib.util import cache_from_source
from types import CodeType
from typing import Any

SUFFIX = ".dataclasses"
_lock = RLock()
_caches: dict[str, dict[str, CodeType]] = {}  # cache file -> text -> code, as read
_used: dict[str, dict[str, CodeType]] = {}  # cache file -> what this process's classes compiled or found
_stale: set[str] = set()  # cache files with a miss: rewritten at exit
misses = 0  # compilations this process did (tests)


def cache_path(module_file: str) -> str | None:
    """Where a module's generated code is kept: its .pyc's name with SUFFIX (None: no bytecode cache)."""
    try:
        pyc = cache_from_source(module_file)
    except (NotImplementedError, ValueError):
        return None
    return pyc.removesuffix(".pyc") + SUFFIX


def _read(path: str) -> dict[str, CodeType]:
    try:
        with open(path, "rb") as f:
            found = marshal.loads(f.read())  # marshal.load(f) reads a piece at a time: slower
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, CodeType)}


_paths: dict[str, str | None] = {}  # module file -> its cache file


def _cached_exec(text: Any, globals: dict[str, Any], locals: dict[str, Any] | None = None) -> None:
    """exec() for dataclasses: the code of a text from the cache of the module it is for (dataclasses
    passes that module's globals), compiled and noted on a miss."""
    global misses
    file = globals.get("__file__") if type(text) is str else None
    path = _paths.get(file) if file in _paths else _paths.setdefault(file, cache_path(file) if file else None)
    if path is None:
        exec(text, globals, locals)
        return
    cache = _caches.get(path)
    if cache is None:
        cache = _caches[path] = _read(path)
    code = cache.get(text)
    if code is None:
        # As exec() compiles a text: no __future__ flags of this module.
        code = compile(text, "<string>", "exec", dont_inherit=True)
        misses += 1
        _stale.add(path)
    _used.setdefault(path, {})[text] = code
    exec(code, globals, locals)


class caching:
    """Within this block every dataclass made (e.g. by a library's import) takes its code from the cache."""

    def __enter__(self) -> None:
        _lock.acquire()
        self.previous = dataclasses.__dict__.get("exec")
        dataclasses.exec = _cached_exec  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        try:
            if self.previous is None:
                del dataclasses.exec  # type: ignore[attr-defined]
            else:
                dataclasses.exec = self.previous  # type: ignore[attr-defined]
        finally:
            _lock.release()


def dataclass(cls: type | None = None, /, **options: Any) -> Any:
    """dataclasses.dataclass with the same options and result; its generated code cached (above)."""
    def wrap(cls: type) -> type:
        with caching():
            return dataclasses.dataclass(cls, **options)
    return wrap if cls is None else wrap(cls)


@atexit.register
def write_caches() -> None:
    """Rewrite each cache that missed with what this process used (stale texts drop out)."""
    if sys.dont_write_bytecode:
        return
    for path in sorted(_stale):
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(temporary, "wb") as f:
                marshal.dump(_used[path], f)
            os.replace(temporary, path)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
    _stale.clear()

