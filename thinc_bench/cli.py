"""What every command line of thinc_bench shares: a mistyped flag is one line and exit 2, not a traceback.

HfArgumentParser and TrlParser raise a ValueError listing unused arguments, and argparse prints its
usage block before the error; a user who typed `--num-samples` needs neither, only the flag that
exists (`did you mean --samples?`). `parse_dataclasses` and `parse_recipe` wrap the two parsers for
eval, build_sft, report and the recipes; `short_help` keeps a recipe's `--help` to its own flags (the
full TRL list, hundreds of lines, is behind `--help-all`); `grouped_help` orders a `--help` by purpose
under a few examples. No parser takes a prefix of a flag for the flag (`allow_abbrev=False`): `--sample 2`
is a typo to name, not `--samples 2`. An unknown flag is reported before any setting is checked, so
a typo is never hidden behind the error it causes. No other parsing logic lives here.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

__all__ = [
    "HelpFormatter",
    "choice_error",
    "closest_flag",
    "grouped_help",
    "one_line_errors",
    "ungrouped",
    "parse_dataclasses",
    "parse_recipe",
    "quiet_libraries",
    "reject_unknown",
]

EXIT_USAGE = 2
"""argparse's own exit status for a command-line mistake."""


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)  # noqa: T201 - the CLI owns the terminal
    raise SystemExit(EXIT_USAGE)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """HfArgumentParser's formatter for a reader: each flag once, in the spelling the docs use (dashes,
    `--max-tokens`; both spellings still parse), a one-line usage instead of every flag twice, and
    no "(default: None)": a None default means "see the help", which says what it resolves to."""

    spelling = "-"
    """The separator the docs write flags with: "-" for eval, build_sft and report, "_" for the
    recipes (TRL's own spelling)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """The description as written: its examples keep their lines (argparse would join them)."""
        return "".join(indent + line for line in text.splitlines(keepends=True))

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: Any = None) -> None:
        if usage is not argparse.SUPPRESS:
            super().add_usage(usage or "%(prog)s [--flag VALUE ...]", [], groups, prefix)

    def _get_default_metavar_for_optional(self, action: argparse.Action) -> str:
        """N for a number, the flag's name when short, else VALUE: `--max-tokens N`, not `--max-tokens
        MAX_TOKENS`, so a flag and its help share a line."""
        if action.type in (int, float):
            return "N"
        return action.dest.upper() if len(action.dest) <= 8 else "VALUE"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        long = [o for o in action.option_strings if o.startswith("--")]
        other = "_" if self.spelling == "-" else "-"
        shown = [o for o in long if other not in o[2:]] or long
        if len(shown) == len(action.option_strings) or not shown:
            return super()._format_action_invocation(action)
        short = [o for o in action.option_strings if not o.startswith("--")]
        options = [*short, shown[0]]
        if action.nargs == 0:
            return ", ".join(options)
        metavar = self._format_args(action, self._get_default_metavar_for_optional(action))
        return ", ".join(f"{o} {metavar}" for o in options)


class RecipeHelpFormatter(HelpFormatter):
    """The recipes' `--help`: TRL's underscore spelling (`--max_steps`), as their docs write it."""

    spelling = "_"


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make argparse's own errors (a bad value) one `error:` line, exit 2, its help free of
    "(default: None)" (`HelpFormatter`), and a prefix of a flag no flag (`allow_abbrev`)."""
    parser.error = _fail  # type: ignore[method-assign]
    parser.formatter_class = HelpFormatter
    parser.allow_abbrev = False
    return parser


def _shown_actions(parser: argparse.ArgumentParser) -> dict[str, list[argparse.Action]]:
    actions: dict[str, list[argparse.Action]] = {}
    for action in parser._actions:  # a bool flag has a second action, --no_NAME, of the same dest
        if action.option_strings and action.dest != "help" and action.help != argparse.SUPPRESS:
            actions.setdefault(action.dest, []).append(action)
    return actions


def ungrouped(
    parser: argparse.ArgumentParser, groups: Mapping[str, Sequence[str]]
) -> tuple[list[str], list[str]]:
    """(flags of the parser in no group, names of the groups that are no flag): both empty when the
    groups fit the parser (tests check it, so a new flag gets a heading)."""
    actions = _shown_actions(parser)
    named = [name for names in groups.values() for name in names]
    return sorted(set(actions) - set(named)), sorted(set(named) - set(actions))


def grouped_help(
    parser: argparse.ArgumentParser, groups: Mapping[str, Sequence[str]], examples: Sequence[str] = ()
) -> None:
    """Lay out `--help` by purpose: `groups` maps a heading to the flags (field names) under it, in
    order; `examples` (commands with a `# comment` each) go under the description, first thing read.
    A flag in no group stays under "options" (`ungrouped` tells a test which)."""
    actions = _shown_actions(parser)
    for title, names in groups.items():
        group = parser.add_argument_group(title)
        for action in (a for name in names for a in actions.get(name, [])):
            for holder in parser._action_groups:
                if action in holder._group_actions and holder is not group:
                    holder._group_actions.remove(action)
            group._group_actions.append(action)
    if examples:
        shown = "\n".join(f"  {line}" for line in examples)
        parser.description = f"{parser.description or ''}\n\nexamples:\n{shown}".lstrip("\n")


def choice_error(flag: str, value: object, choices: Iterable[str], what: str = "value") -> str:
    """One line for a value outside a closed set: the flag, the value, the choices and the closest
    one (`--backend hff: unknown backend; choose one of hf, vllm, openai, scripted (did you mean hf?)`)."""
    options = list(choices)
    close = difflib.get_close_matches(str(value), options, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{flag} {value}: unknown {what}; choose one of {', '.join(options)}{hint}"


def closest_flag(flag: str, parser: argparse.ArgumentParser) -> str | None:
    """The parser's option most like `flag` (ignoring a `=value`), or None when none is close."""
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    name = flag.split("=", 1)[0]
    typed_underscore = "_" in name
    normalized: dict[str, str] = {}
    for option in options:  # the spelling the user typed wins (--max-tokens / --learning_rate)
        key = option.replace("_", "-")
        if key not in normalized or ("_" in option) == typed_underscore:
            normalized[key] = option
    match = difflib.get_close_matches(name.replace("_", "-"), list(normalized), n=1, cutoff=0.6)
    return normalized[match[0]] if match else None


def reject_unknown(parser: argparse.ArgumentParser, rest: Iterable[str], what: str = "flag") -> None:
    """Exit with one line naming the first argument the parser did not use and the closest flag.

    Raises:
        SystemExit: status 2, when `rest` holds anything.
    """
    for arg in rest:
        if not arg.startswith("-"):
            _fail(f"unexpected argument {arg!r}; flags take the form --name value (see --help)")
        close = closest_flag(arg, parser)
        hint = f"; did you mean {close}?" if close else "; see --help"
        _fail(f"unknown {what} {arg.split('=', 1)[0]}{hint}")


def parse_dataclasses(parser: Any, argv: Sequence[str] | None) -> tuple[Any, ...]:
    """`parser.parse_args_into_dataclasses` (an HfArgumentParser) with one-line errors for a
    mistyped or unknown flag; returns the dataclasses. The flags are read before the dataclasses are
    made, so an unknown flag is named before a setting's own check (a demo without data) can fail."""
    one_line_errors(parser)
    args = list(sys.argv[1:] if argv is None else argv)
    _, rest = parser.parse_known_args(args)
    reject_unknown(parser, rest)
    *configs, rest = parser.parse_args_into_dataclasses(args=args, return_remaining_strings=True)
    reject_unknown(parser, rest)
    return tuple(configs)


RECIPE_FLAGS = (
    "model_name_or_path",
    "output_dir",
    "max_steps",
    "num_train_epochs",
    "learning_rate",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "seed",
    "report_to",
    "resume_from_checkpoint",
)
"""TRL/transformers flags a recipe's short `--help` keeps beside its own: the ones a first run changes."""


def short_help(parser: argparse.ArgumentParser, own: Iterable[str]) -> None:
    """Hide from `--help` every flag but `own` (the recipe's ScriptArgs) and `RECIPE_FLAGS`."""
    keep = {*own, *RECIPE_FLAGS, "help", "config", "help_all"}
    for action in parser._actions:
        if action.dest not in keep:
            action.help = argparse.SUPPRESS
    for group in parser._action_groups:  # drop the headings of groups left empty
        if all(a.help == argparse.SUPPRESS for a in group._group_actions):
            group.title = None


def parse_recipe(
    parser: Any,
    argv: Sequence[str],
    description: str,
    own: Iterable[str],
    examples: Sequence[str] = (),
    prog: str | None = None,
) -> tuple[Any, ...]:
    """A recipe's `TrlParser.parse_args_and_config` with a short `--help` (description, `examples`,
    `--config`, the recipe's own flags and the common TRL ones), `--help-all` for every TRL flag, and
    one-line errors for an unknown flag or config key (a flag before TRL's own checks run)."""
    own = list(own)
    parser.description = description
    if prog:
        parser.prog = prog
    parser.add_argument(  # TrlParser reads it before argparse does; declared here for --help
        "--config",
        default=argparse.SUPPRESS,
        help="YAML file of flag values (the command line overrides them).",
    )
    parser.add_argument("--help-all", action="help", help="Show every TRL and transformers flag too.")
    args = list(argv)
    if "--help-all" not in args:
        short_help(parser, own)
        shown = {a.dest for a in parser._actions if a.help != argparse.SUPPRESS and a.option_strings}
        shown -= {"help"}
        recipe = [n for n in ("config", *own, "help_all") if n in shown]
        common = sorted(shown - set(recipe), key=RECIPE_FLAGS.index)
        grouped_help(
            parser, {"the recipe": recipe, "common TRL flags (--help-all: every one)": common}, examples
        )
    one_line_errors(parser)
    parser.formatter_class = RecipeHelpFormatter
    if not {"-h", "--help", "--help-all"} & set(args):  # help after TrlParser applies the YAML's defaults
        _, rest = parser.parse_known_args(args)  # a mistyped flag, before TRL's checks of the settings
        reject_unknown(parser, [a for a in rest if a.startswith("-")], what="flag")
    try:
        *configs, rest = parser.parse_args_and_config(args, return_remaining_strings=True)
    except ValueError as exc:  # TrlParser's own checks of the YAML (not a mapping, a bad `env`)
        _fail(str(exc))
    reject_unknown(parser, rest, what="flag or config key")
    return tuple(configs)


_UNACTIONABLE_LOGS = {
    # deepspeed, imported by accelerate/transformers on a CPU machine, though nothing here uses it
    "DeepSpeed": ("Setting accelerator to CPU",),
}
"""Library log lines a user can do nothing about, by logger name and message start."""
_UNACTIONABLE_WARNINGS = (
    # TRL defaults the field under its old name; renaming it in our configs would break the vLLM
    # CPU venv's older transformers, which lacks the new one
    r"`gradient_checkpointing` is deprecated",
)
"""Library warnings (message regexes) a user can do nothing about."""


class _DropLines:
    def __init__(self, starts: tuple[str, ...]) -> None:
        self.starts = starts

    def filter(self, record: Any) -> bool:
        return not str(record.getMessage()).startswith(self.starts)


def quiet_libraries(verbose: bool = False) -> None:
    """A clean run prints its own lines only: libraries' loading bars off (transformers' and
    datasets'; kept with `verbose`, the debug or info log level; a trainer's own progress bar stays) and the few library messages nobody can act on dropped, by exact
    text, so every other warning still shows. What a run depends on is in config.json either way."""
    import logging
    import warnings

    for name, starts in _UNACTIONABLE_LOGS.items():
        logging.getLogger(name).addFilter(_DropLines(starts))  # survives the library's own setup
    for pattern in _UNACTIONABLE_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    if not verbose:
        import datasets
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        datasets.disable_progress_bars()  # TRL's per-step dataset passes ("Truncating train dataset")
