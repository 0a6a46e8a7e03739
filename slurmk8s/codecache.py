"""The standard `dataclass`, its generated methods compiled once and kept beside the bytecode.

dataclasses writes each class's __init__, __repr__, __eq__, __hash__, __setattr__ and __delattr__
as source text and compiles it with exec() at every import: about 0.4 ms a frozen class, 20 ms of
a render's start for the profile model and the render's records (issue 17). `dataclass` here is
the standard one; only its exec() finds the compiled code in a cache keyed by that exact text, so
a changed class misses and is compiled as before. A module's cache sits in __pycache__ beside its
.pyc (`<module>.<tag>.dataclasses`) and is written as Python writes bytecode: not under
PYTHONDONTWRITEBYTECODE, nowhere Python could not write its .pyc. A Python whose dataclasses does
not call exec() by name simply never consults it.
"""

from __future__ import annotations

import atexit
import dataclasses
import marshal
import os
import sys
from importlib.util import cache_from_source
from _thread import RLock
from types import CodeType
from typing import Any, Callable

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


def _exec_from(path: str) -> Callable[..., None]:
    """An exec() for dataclasses that takes the code of a text from the cache at path."""
    cache = _caches.get(path)
    if cache is None:
        cache = _caches[path] = _read(path)
    used = _used.setdefault(path, {})

    def cached_exec(text: str, globals: dict[str, Any], locals: dict[str, Any]) -> None:
        global misses
        code = cache.get(text) if type(text) is str else None
        if code is None:
            if type(text) is not str:
                exec(text, globals, locals)
                return
            # As exec() compiles a text: no __future__ flags of this module.
            code = compile(text, "<string>", "exec", dont_inherit=True)
            misses += 1
            _stale.add(path)
        used[text] = code
        exec(code, globals, locals)
    return cached_exec


def dataclass(cls: type | None = None, /, **options: Any) -> Any:
    """dataclasses.dataclass with the same options and result; its generated code cached (above)."""
    def wrap(cls: type) -> type:
        module = sys.modules.get(cls.__module__)
        path = cache_path(module.__file__) if module is not None and getattr(module, "__file__", None) else None
        if path is None:
            return dataclasses.dataclass(cls, **options)
        with _lock:
            previous = dataclasses.__dict__.get("exec")
            dataclasses.exec = _exec_from(path)  # type: ignore[attr-defined]
            try:
                return dataclasses.dataclass(cls, **options)
            finally:
                if previous is None:
                    del dataclasses.exec  # type: ignore[attr-defined]
                else:
                    dataclasses.exec = previous  # type: ignore[attr-defined]
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

