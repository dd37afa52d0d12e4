"""Which installed packages model code may import: the allowed distributions, their dependency
closure, and the files that make each one up.

Why an allowlist: a session's import path used to be the harness's site-packages, which holds
thinc_bench itself (its benchmark registry and the generators of every nano benchmark, golds
included), the Hub client and everything else installed. `resolve` turns the allowed names
(`SandboxConfig.packages`, plus whatever `SandboxConfig.preload` imports) into the top-level entries
of exactly those distributions and of the distributions they require, read from each one's RECORD
(`importlib.metadata`), so the jail can show those entries and nothing else of any site-packages.

Choices: a requirement counts when its environment marker holds with no extra (optional extras stay
out); one that is not installed is skipped (it was optional in practice, or the package fails
visibly on import, which the preload's warning reports). Entries outside the distribution's own
folder (`../../bin/isympy`), `__pycache__` and `.pth` files are left out (a `.pth` is only read in a
site directory, which the session's folder is not). thinc_bench is never visible, whatever depends
on it: asking for it is a ConfigError (config.py), and an entry that is or holds a copy of it is
dropped. A distribution without a RECORD (some system packages) is found through its
`top_level.txt` and the import system. Pure reads of installed metadata; it mounts nothing.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

HARNESS = "thinc-bench"
"""The harness's own distribution name (normalised): never visible to model code."""
HARNESS_PACKAGE = "thinc_bench"
# Per PEP 503: names compare case-insensitively with runs of -_. as one dash.
_NORMALISE = re.compile(r"[-_.]+")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return _NORMALISE.sub("-", name).lower()


@dataclass(frozen=True)
class Entry:
    """One top-level file or folder of an allowed distribution: `name` in the session's package
    folder, `source` on the host."""

    name: str
    source: str
    dist: str


@dataclass(frozen=True)
class Visible:
    """What model code may import besides the standard library: entries, and each distribution's
    version; `missing` names allowed distributions that are not installed here."""

    entries: tuple[Entry, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()


def harness_dirs() -> list[str]:
    """Every folder holding an importable thinc_bench package here (this one, and any other copy
    on the import path), resolved: the folders the jail must never show."""
    found = {os.path.realpath(os.path.dirname(os.path.dirname(__file__)))}
    for entry in sys.path:
        candidate = os.path.join(entry or ".", HARNESS_PACKAGE)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            found.add(os.path.realpath(candidate))
    return sorted(found)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@functools.lru_cache(maxsize=8)
def resolve(packages: tuple[str, ...], preload: tuple[str, ...]) -> Visible:
    """The entries model code may import: `packages` (distribution names) and the distributions of
    the non-stdlib modules in `preload`, each with its dependency closure."""
    roots = [normalise(p) for p in packages]
    roots += [d for module in preload for d in _distributions_of(module.partition(".")[0])]
    dists: dict[str, metadata.Distribution] = {}
    missing: list[str] = []
    queue = list(dict.fromkeys(roots))
    while queue:
        name = queue.pop(0)
        if name in dists or name == HARNESS:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if name in roots:
                missing.append(name)
            continue
        dists[name] = dist
        queue += [r for r in _requirements(dist) if r not in dists]
    forbidden = harness_dirs()
    entries: dict[str, Entry] = {}
    for name, dist in sorted(dists.items()):
        for entry_name, source in _entries(dist):
            real = os.path.realpath(source)
            if any(_inside(real, f) or _inside(f, real) for f in forbidden):
                continue  # a copy of the harness, or a folder holding one: never shown
            entries.setdefault(entry_name, Entry(entry_name, source, name))
    versions = {name: dist.version for name, dist in sorted(dists.items())}
    return Visible(tuple(entries.values()), versions, tuple(missing))


def _requirements(dist: metadata.Distribution) -> list[str]:
    """Names of the distributions `dist` needs without extras, on this interpreter."""
    out = []
    for text in dist.requires or ():
        name = _required(text)
        if name is not None:
            out.append(name)
    return out


def _required(text: str) -> str | None:
    """The normalised name a requirement line asks for, or None when its marker does not hold."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # packaging is a dependency of thinc_bench; a bare fallback all the same
        if ";" in text and "extra" in text.split(";", 1)[1]:
            return None
        match = _REQUIREMENT_NAME.match(text)
        return normalise(match.group(1)) if match else None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        return None
    return normalise(requirement.name)


def _entries(dist: metadata.Distribution) -> Iterable[tuple[str, str]]:
    """(name, host path) of each top-level file or folder that `dist` installed in its site folder."""
    site = str(dist.locate_file(""))
    files = dist.files
    if files is None:
        yield from _entries_without_record(dist)
        return
    seen: set[str] = set()
    for file in files:
        top = file.parts[0] if file.parts else ""
        if top in seen or top in ("", "..", "__pycache__") or top.endswith(".pth"):
            continue
        if top.startswith("__editable__"):
            continue
        seen.add(top)
        path = os.path.join(site, top)
        if os.path.lexists(path):
            yield top, path


def _entries_without_record(dist: metadata.Distribution) -> Iterable[tuple[str, str]]:
    names = (dist.read_text("top_level.txt") or "").split()
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        if spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                yield name, location
        elif spec.origin and os.path.isfile(spec.origin):
            yield os.path.basename(spec.origin), spec.origin


def _distributions_of(module: str) -> list[str]:
    """The distributions that install top-level module `module` ([] for the standard library)."""
    if module in sys.stdlib_module_names or module in sys.builtin_module_names:
        return []
    try:
        dist = metadata.distribution(module)
        if any(f.parts and f.parts[0] in (module, f"{module}.py") for f in dist.files or ()):
            return [normalise(module)]
    except metadata.PackageNotFoundError:
        pass
    return [normalise(d) for d in _module_index().get(module, [])]


@functools.lru_cache(maxsize=1)
def _module_index() -> dict[str, list[str]]:
    return dict(metadata.packages_distributions())
