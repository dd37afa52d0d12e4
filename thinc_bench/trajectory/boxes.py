"""Where a text boxes its answer: the one scanner the grader and the ThinC conformance checks share.

The grader reads an answer from the final text with `joined_answer`; the conformance check
`answer_after_last_output` asks the same function whether there is one, so an unclosed or empty last
box is "no answer" to both (it was "answer" to the check while a local regex stood in for this).
Pure and linear in its input; no normalisation (that is `grading`).
"""

import re

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# `\boxed 42`: LaTeX would box only "4", but models mean the whole number; `\boxed 3.5.` ends a sentence.
_BARE_BOX_NUMBER = re.compile(r"\s+([+-]?\d+(?:\.\d+)?)(?!\w|\.\d)")
_WS = re.compile(r"\s*")
# What may stand between boxes that answer together: `\boxed{1}, \boxed{2} and $\boxed{3}$`. Every
# alternative starts with its own characters and `\text{ and }` has one blank run unless a word splits
# it, so a failed match reads the gap once (`\text{` and 100k spaces took 80 s with two `\s*`).
_BOX_JOINER = re.compile(
    r"(?:\s|\$|,|;|&|\band\b|\bor\b|\\[,;: ]|\\q?quad\b|\\[()\[\]]|\\text\{\s*(?:(?:and|or|,)\s*)?\})*"
)


def _boxes(text: str) -> list[tuple[int, int, str | None]]:
    """Every box opener in `text` as (start, end, content); content None for an empty/unclosed box.

    A box that holds another box ends (unclosed) at the inner opener, which is then scanned as its
    own box, so the whole scan is linear and the innermost, last opener decides.
    """
    found: list[tuple[int, int, str | None]] = []
    pos, n = 0, len(text)
    while (m := _BOX_OPEN.search(text, pos)) is not None:
        ws = _WS.match(text, m.end())
        i = ws.end() if ws is not None else m.end()
        if i >= n or text[i] != "{":
            bare = _BARE_BOX_NUMBER.match(text, m.end())
            pos = bare.end() if bare is not None else m.end()
            found.append((m.start(), pos, bare.group(1) if bare is not None else None))
            continue
        depth, start, end = 0, i, None
        while i < n:
            ch = text[i]
            if ch == "\\":
                if _BOX_OPEN.match(text, i):
                    break
                i += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
            i += 1
        if end is None:
            found.append((m.start(), i, None))
            pos = max(i, m.end())
            continue
        found.append((m.start(), end, text[start + 1 : end - 1].strip() or None))
        pos = end
    return found


def extract_answer(text: str) -> str | None:
    """Return the content of the last `\\boxed{...}` / `\\fbox{...}` in `text`, or None.

    The last box opener decides: `\\boxed{\\boxed{x}}` gives `x`, and an empty or unclosed last box
    (a response cut off mid-answer) is no answer rather than a fallback to an earlier box. Braces
    nest; `\\{` and `\\}` are literal. `\\boxed 42` (no braces) gives `42`, also before a full stop
    (`\\boxed 3.5.`). Linear time. This reads any one text; the answer of a *response* is
    `final_answer`, which reads only the final text and joins a final run of boxes.

    Args:
        text: any text.

    Returns:
        The stripped box content, or None when there is no usable box.
    """
    boxes = _boxes(text)
    return boxes[-1][2] if boxes else None


def joined_answer(text: str) -> str | None:
    """The answer boxed in `text`: its last box, or a final run of boxes joined as one list.

    `\\boxed{1}, \\boxed{2} and \\boxed{3}` answers "1, 2, 3": boxes separated only by commas,
    `and`/`or`, semicolons, `\\quad`, `$` and spaces answer together (math-verify joins them the same
    way). `\\boxed{3}, then on reflection \\boxed{5}` answers "5": words between boxes are a revision.
    """
    boxes = _boxes(text)
    if not boxes or boxes[-1][2] is None:
        return None
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if box[2] is None or _BOX_JOINER.fullmatch(text, box[1], run[0][0]) is None:
            break
        run.insert(0, box)
    return ", ".join(str(b[2]) for b in run)
