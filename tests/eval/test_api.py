"""`thinc_bench.evaluate` as a Python user meets it: a misspelt setting is named with the one meant
(issue 54: `evaluate(sample=1)` raised a bare TypeError that did not name `samples`)."""

from __future__ import annotations

import pytest

from thinc_bench import evaluate


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"sample": 1}, "evaluate() got an unknown setting sample=1; did you mean samples?"),
        ({"max_token": 64}, "evaluate() got an unknown setting max_token=64; did you mean max_tokens?"),
        (
            {"zzz": True},
            "evaluate() got an unknown setting zzz=True; the settings are eval's flags by field name",
        ),
    ],
)
def test_an_unknown_setting_is_a_type_error_naming_the_one_meant(
    setting: dict, message: str, tmp_path
) -> None:
    with pytest.raises(TypeError) as refused:
        evaluate("bundled-smollm2", "nano", out=str(tmp_path / "r"), **setting)
    assert str(refused.value) == message
    assert not (tmp_path / "r").exists()  # refused before anything is loaded or written
