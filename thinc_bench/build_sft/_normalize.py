"""Normal forms of problem texts and answers, for finding the same problem written another way.

Deduplication (`problem_key`) and decontamination (`mask_numbers`, `maths_tokens`, `answer_key`,
`masked_maths`, `prose_words`) compare problems through these forms, never through raw text. Each
form forgets only what does not change the problem: `problem_key` drops case, all whitespace, `$` and
the `\\dfrac`/`\\tfrac` variants; `maths_tokens` keeps the maths (LaTeX commands, numbers,
single-letter symbols, operators) and drops the prose, whatever its language; `masked_maths` is that
with every number one placeholder (renumbering and re-asking change the numbers, not the formulas);
`prose_words` is the other half, the words alone. Pure string functions.
"""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")
_FRAC_VARIANT = re.compile(r"\\(?:dfrac|tfrac)(?![A-Za-z])")
_NUMBER = re.compile(r"\d+")
_INTEGER = re.compile(r"[+-]?\d+")
_MATHS_ALIASES = (
    # \df is a typo for \dfrac found in DAPO-Math-17k's Chinese problems
    (re.compile(r"\\(?:dfrac|tfrac|df)(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\(?:ldots|cdots|dots)(?![A-Za-z])|\.\.\."), r"\\dots"),
    (re.compile(r"\\le(?![A-Za-z])"), r"\\leq"),
    (re.compile(r"\\ge(?![A-Za-z])"), r"\\geq"),
    (re.compile(r"\\(?:left|right|displaystyle)(?![A-Za-z])|\\[,;:! ]"), " "),
)
_MATHS_TOKEN = re.compile(r"\\[A-Za-z]+|\d+|[A-Za-z]+|[-+=<>^_/*|!()]")
_DIAGRAM = re.compile(r"\[asy\].*?\[/asy\]|\\begin\{(tikzpicture|asy)\}.*?\\end\{\1\}", re.DOTALL)
_COMMAND = re.compile(r"\\[A-Za-z]+")
_PROSE_WORD = re.compile(r"[\u4e00-\u9fff]|[^\W\d_\u4e00-\u9fff]{2,}")
_DELIMITER = re.compile(r"\\[()\[\]]")
_UNICODE_MATHS = str.maketrans(
    {"≤": r" \leq ", "≥": r" \geq ", "≠": r" \neq ", "∈": r" \in ", "·": r" \cdot ", "×": r" \times "}
)
NUMBER_MASK = "0"
"""The one token every number becomes in `masked_maths`."""


def problem_key(text: str) -> str:
    """The form two copies of one problem share: case, whitespace, `$` and `\\dfrac`/`\\tfrac` dropped.

    All whitespace goes, not only inside maths: spacing never distinguishes two competition problems,
    and DAPO-Math-17k repeats problems with re-spaced maths and re-wrapped prose alike.
    """
    return _SPACE.sub("", _FRAC_VARIANT.sub(r"\\frac", text).replace("$", "")).casefold()


def mask_numbers(text: str) -> str:
    """The text with every digit run replaced by `0`, so a renumbered copy reads like its original."""
    return _NUMBER.sub(" 0 ", text)


def maths_tokens(text: str) -> list[str]:
    """The maths of a problem in order: LaTeX commands, numbers, single letters and operators.

    Words of two or more letters are prose and are dropped, and so is every non-Latin script, so a
    translation keeps the tokens of its original. Full-width forms are folded (NFKC) and notational
    variants (`\\dfrac`, `\\cdots`, `\\le`, `\\left(`, braces, `$`) are unified or ignored.
    """
    folded = unicodedata.normalize("NFKC", text)
    for pattern, replacement in _MATHS_ALIASES:
        folded = pattern.sub(replacement, folded)
    return [t for t in _MATHS_TOKEN.findall(folded) if not (t[0].isalpha() and len(t) > 1)]


def masked_maths(text: str) -> list[str]:
    """`maths_tokens` with every number one `NUMBER_MASK` and drawing code left out.

    A run of numbers with nothing between them (`1.5`, `1,000`: the separators are not maths tokens)
    is one mask, so writing any number in place of any other never changes the list. Maths delimiters
    (`\\(`, `\\[`; `$` is no token) and Unicode operators (`≥` for `\\geq`) are written either way
    in the same problem. Asymptote and TikZ pictures are coordinates, not the problem's maths, and
    would make every diagram match.
    """
    text = _DELIMITER.sub(" ", _DIAGRAM.sub(" ", text)).translate(_UNICODE_MATHS)
    masked: list[str] = []
    for token in maths_tokens(text):
        if token.isdigit():
            if masked and masked[-1] == NUMBER_MASK:
                continue
            token = NUMBER_MASK
        masked.append(token)
    return masked


def prose_words(text: str) -> list[str]:
    """The words of a problem without its maths: lower-case words of two or more letters, and CJK characters.

    LaTeX command names (`\\frac`), numbers, single letters (symbols) and drawing code are left to
    `masked_maths`, so the two lists are independent evidence: prose that shares no word with a
    translation, and maths that shares no token with a reworded sentence.
    """
    text = _COMMAND.sub(" ", _DIAGRAM.sub(" ", unicodedata.normalize("NFKC", text))).casefold()
    return _PROSE_WORD.findall(text)


def answer_key(answer: str) -> str:
    """The form two equal gold answers share: `$` and whitespace dropped, integers without leading zeros."""
    key = _SPACE.sub("", answer).replace("$", "")
    if _INTEGER.fullmatch(key) is None:
        return key.casefold()
    digits = key.lstrip("+-").lstrip("0") or "0"  # as digits: int() refuses more than 4,300 of them
    return "-" + digits if key.startswith("-") and digits != "0" else digits
