"""Which modules a configuration may make the pipeline import (`replication.policy.class`).

Importing a module runs its code, so a dotted path in a config file is
imported only when it names a module written to hold a replication policy.
The rule, checked before anything is imported:

- never a module of Python's standard library (`sys.stdlib_module_names`:
  `this.X` must not print a poem, `antigravity.X` must not open a browser);
- never a module of an installed third-party distribution, unless that
  distribution is mirror-pipeline itself or one that requires it (a plugin
  package of policies);
- any other module the interpreter finds (the project's own code, a directory
  on PYTHONPATH) is the user's own, and is imported.

Only the top-level package is located (`importlib.util.find_spec` of a
top-level name runs no module code); the decision uses where it lies.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import site
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

from mirror_pipeline.model.errors import ConfigError

_DISTRIBUTION = "mirror-pipeline"


def import_user_module(module_name: str, spec: str) -> ModuleType:
    """The module `module_name` of policy `spec`, if the rule above lets it be imported."""
    top = module_name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "__main__":
        raise ConfigError(
            f"'{spec}' names a module of Python's standard library, which holds no "
            "replication policy; use DefaultReplicationPolicy, IdentityReplicationPolicy "
            "or a dotted path to your own module.Class"
        )
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(f"cannot import module '{module_name}' for policy '{spec}': No module named '{top}'")
    location = _location(found)
    if location is not None and _is_under(location, _stdlib_dirs()) and not _is_under(location, _site_dirs()):
        raise ConfigError(
            f"'{spec}' names a module of Python's standard library, which holds no "
            "replication policy; use a dotted path to your own module.Class"
        )
    if location is not None and _is_under(location, _site_dirs()) and not _is_plugin(top):
        raise ConfigError(
            f"'{spec}' names a module of an installed package that is not a "
            f"mirror-pipeline plugin; allowed: your own module (on the path or in a "
            f"package that requires {_DISTRIBUTION})"
        )
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module '{module_name}' for policy '{spec}': {exc}") from None
    except (Exception, SystemExit) as exc:
        # The module's own failure: its type only, the text may quote anything.
        raise ConfigError(
            f"cannot import module '{module_name}' for policy '{spec}': importing it raised {type(exc).__name__}"
        ) from None


def _location(found: importlib.machinery.ModuleSpec) -> Path | None:
    places: list[str | None] = list(found.submodule_search_locations or []) or (
        [found.origin] if found.has_location else []
    )
    return Path(places[0]).resolve() if places and places[0] else None


def _is_under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or root in path.parents for root in roots)


@functools.lru_cache(maxsize=1)
def _site_dirs() -> tuple[Path, ...]:
    paths = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    paths.update(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE:
        paths.add(site.getusersitepackages())
    return tuple(Path(p).resolve() for p in paths if p)


@functools.lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[Path, ...]:
    return tuple(Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib"))


@functools.lru_cache(maxsize=64)
def _is_plugin(top: str) -> bool:
    """True when `top` belongs to mirror-pipeline or to a distribution that requires it."""
    for dist_name in importlib.metadata.packages_distributions().get(top, []):
        if _normal(dist_name) == _DISTRIBUTION:
            return True
        try:
            requires = importlib.metadata.requires(dist_name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        if any(_normal(_requirement_name(r)) == _DISTRIBUTION for r in requires):
            return True
    return False


def _requirement_name(requirement: str) -> str:
    name = requirement.strip()
    for stop in " ;[<>=!~(":
        name = name.split(stop, 1)[0]
    return name


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
