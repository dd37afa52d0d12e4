"""Where a number or setting comes from: the one table of source classes, and what each is.

The project knows the ThinC paper (arXiv 2605.07237) only through its sources in `../shared/sources/`:
its abstract, and two AI-generated explainers that say they were not written or endorsed by the
authors. Every published number (report/reference.yaml) and every default setting (docs/settings.md)
carries one of these classes, so a reader can tell a number the paper states from one a summary of it
states, from arithmetic on those, from a write-up nobody has checked, from another project's own
source, and from our own choice. Pure data: reports, docs and tests read it; nothing here reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

SourceClass = Literal["abstract", "explainer", "derived", "secondary", "external", "inference"]
SOURCE_CLASSES: tuple[SourceClass, ...] = get_args(SourceClass)

CLASS_LABELS: dict[SourceClass, str] = {
    "abstract": "the paper's abstract",
    "explainer": "an AI-generated summary of the paper, not written by its authors",
    "derived": "derived: arithmetic on published numbers",
    "secondary": "an unverified secondary write-up (a blog analysis or an agent-written review)",
    "external": "another project's own source (a baseline's paper or code, a model card)",
    "inference": "our inference or choice: no source states it",
}
"""Each class in words, as reports, the settings page and the dataset card print it."""
CLASS_SHORT: dict[SourceClass, str] = {
    "abstract": "paper abstract",
    "explainer": "AI summary of the paper, not by its authors",
    "derived": "derived",
    "secondary": "unverified secondary write-up",
    "external": "external source",
    "inference": "our inference",
}
"""Each class in a few words, where space is short (a figure's legend)."""

CLASS_MEANINGS: dict[SourceClass, str] = {
    "abstract": "stated in the paper's arXiv abstract (../shared/sources/abstract.txt)",
    "explainer": "stated in both AI-generated explainers of the paper (../shared/sources/explainer-*.txt), "
    "which say they were not written or endorsed by the authors: a summary, not the paper",
    "derived": "computed from numbers of the classes above; the formula is given with it",
    "secondary": "found only in a secondary write-up quoted to the project (a blog analysis, an "
    "agent-written literature review), in none of ../shared/sources: unverified until checked "
    "against the paper",
    "external": "from a source other than the ThinC paper that speaks for itself: a baseline's paper or "
    "public code, a model's card or chat template, a library's default",
    "inference": "chosen or inferred by thinc_bench where no source speaks; the reason is given with it",
}
"""What belongs in each class (docs/settings.md prints this table)."""


@dataclass(frozen=True)
class Source:
    """Where one number or setting comes from.

    Attributes:
        cls: the source class.
        source: which source and where in it, or, for `inference`, the reason for the choice.
        formula: for `derived`, the arithmetic (e.g. "42.8 - 10.6").
    """

    cls: SourceClass
    source: str
    formula: str | None = None

    def __post_init__(self) -> None:
        if self.cls not in SOURCE_CLASSES:
            raise ValueError(f"source class {self.cls!r}: use one of {', '.join(SOURCE_CLASSES)}")
        if (self.cls == "derived") != (self.formula is not None):
            raise ValueError(f"{self.source!r}: a derived number needs its formula, and only a derived one")

    @property
    def label(self) -> str:
        """The class in words, with the formula of a derived number."""
        text = CLASS_LABELS[self.cls]
        return f"{text} ({self.formula})" if self.formula else text

    @property
    def short(self) -> str:
        """The class in a few words (`CLASS_SHORT`), with the formula of a derived number."""
        text = CLASS_SHORT[self.cls]
        return f"{text}: {self.formula}" if self.formula else text
