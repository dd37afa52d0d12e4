"""The renderer's stamp: a hash of the report code and templates, written into every page.

A committed example report is a claim about what the renderer shows today; one rendered by older
code silently keeps old mistakes (a published number without its source class, a page that opens on
the settings). Every page carries the hash of the code that rendered it (`<meta name="generator">`),
so a test can tell a committed report older than the renderer and name the command that rebuilds it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_SOURCES = ("*.py", "*.yaml", "templates/*")
_META = re.compile(r'<meta name="generator" content="thinc_bench report renderer ([0-9a-f]+)">')


@functools.cache
def renderer_id() -> str:
    """12 hex digits of sha256 over the report package's code, templates and reference numbers."""
    digest = hashlib.sha256()
    files = sorted({f for pattern in _SOURCES for f in PACKAGE.glob(pattern) if f.is_file()})
    for file in files:
        digest.update(file.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(file.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()[:12]


def stamp_of(html: str) -> str | None:
    """The renderer id a page was rendered by, or None for a page from before stamps."""
    match = _META.search(html)
    return match.group(1) if match else None
