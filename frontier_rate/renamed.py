"""Old public names kept importable after a rename (one name per concept, issue 61): a module's
``__getattr__`` maps a retired name to its new one and warns once with a DeprecationWarning."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

WARNED: set[tuple[str, str]] = set()
"""(module, old name) pairs already warned about in this process."""


def current(module: str, name: str, renamed: dict[str, str], *, stacklevel: int = 3) -> str:
    """The name ``name`` now has in ``module`` (``renamed``: old -> new); the first use of an
    old name warns, naming the new one, so that code importing it learns what to write."""
    new = renamed.get(name)
    if new is None:
        return name
    if (module, name) not in WARNED:
        WARNED.add((module, name))
        warnings.warn(f"{module}.{name} is renamed {module}.{new}; {name} will be removed",
                      DeprecationWarning, stacklevel=stacklevel)
    return new


def resolve(module_globals: dict[str, Any], name: str, renamed: dict[str, str]) -> Any:
    """A module ``__getattr__``'s answer: the object an old ``name`` now goes by, or
    AttributeError for a name the module never had."""
    module = module_globals["__name__"]
    new = current(module, name, renamed, stacklevel=4)
    if new == name:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return module_globals[new]


def moved(old: str, *homes: ModuleType) -> Callable[[str], Any]:
    """A moved module's ``__getattr__`` (issue 59: detection left ``crawl/`` for
    ``detection/``): a name of the old path is looked up in ``homes``, in order, and its
    first use warns once, naming where it lives now, so that code importing the old path
    learns what to write."""

    def __getattr__(name: str) -> Any:
        for home in homes:
            if not name.startswith("__") and hasattr(home, name):
                if (old, name) not in WARNED:
                    WARNED.add((old, name))
                    warnings.warn(f"{old}.{name} is moved to {home.__name__}.{name}; {old} "
                                  "will be removed", DeprecationWarning, stacklevel=2)
                return getattr(home, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
