"""Hostile bytes across the sandbox boundary: code no UTF-8 can carry, and forged control frames.

Model code reaches the interpreter as a JSON frame and the interpreter's verdict comes back as one;
neither side may turn into an exception in the harness (issue 37): a lone surrogate in the code runs
as far as Python can run it, and a "done" frame of the wrong shape kills the session as `killed`
with a message, like any other forged frame.
"""

from __future__ import annotations

import json
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinc_bench.sandbox import Session
from thinc_bench.sandbox.runtime import _wire


def _roundtrip(obj: dict[str, object]) -> dict[str, object]:
    a, b = socket.socketpair()
    with a, b:
        _wire.send_frame(a, obj)
        return _wire.FrameReader(b).read_frame()


@settings(max_examples=60, deadline=None, database=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40))
def test_any_python_string_crosses_the_wire_unchanged(code: str) -> None:
    # Surrogates included (the alphabet has no category filter): what the model wrote is what runs.
    assert _roundtrip({"op": "run", "code": code}) == {"op": "run", "code": code}


def test_a_frame_without_surrogates_is_plain_utf8() -> None:
    # The escape form is only the fallback: ordinary frames stay compact UTF-8.
    body = _wire.encode({"code": "print('π')"})[_wire.HEADER.size :]
    assert body.decode("utf-8") == json.dumps({"code": "print('π')"}, ensure_ascii=False)


def test_a_lone_surrogate_in_code_is_the_codes_error_not_the_harnesses(session: Session) -> None:
    # json.loads of a tool call's arguments turns the model's "\ud800" into a lone surrogate.
    code = json.loads('{"code": "x = \'\\ud800\'\\nprint(len(x))"}')["code"]
    result = session.run(code)
    # Python itself cannot compile source holding one (as `python -c` cannot): the code's error.
    assert result.status == "error" and "surrogates not allowed" in result.output
    assert session.run("print(6 * 7)").output.strip() == "42"  # the session goes on


def test_printed_lone_surrogates_come_back_as_storable_text(session: Session) -> None:
    result = session.run("print(chr(0xD800) + 'x')")
    assert result.status == "ok" and result.output.rstrip().endswith("x")
    result.output.encode("utf-8")  # the record's JSON line and parquet need valid UTF-8
    assert session.run("print(1 + 1)").output.strip() == "2"


# Code that finds this run's nonce in the notebook loop's frame and writes a "done" of the wrong shape
# on the control channel (fd 3) before the real one.
FORGE = """
import os, struct, sys, json
f = sys._getframe()
while f is not None and "nonce" not in f.f_locals:
    f = f.f_back
frame = {{"op": "done", "nonce": f.f_locals["nonce"], {fields}}}
body = json.dumps(frame).encode()
os.write(3, struct.pack(">I", len(body)) + body)
"""


@pytest.mark.parametrize(
    "fields",
    [
        '"status": ["ok"]',
        '"status": {"ok": 1}',
        '"status": None',
        '"status": 1',
        '"status": "ok", "threads": "0"',
        '"status": "ok", "threads": True',
        '"status": "ok", "threads": [0]',
        '"threads": 0',
    ],
)
def test_a_done_frame_of_the_wrong_shape_kills_the_session_with_a_message(
    session: Session, fields: str
) -> None:
    result = session.run(FORGE.format(fields=fields))
    assert result.status == "killed"
    assert "did not send" in result.notice_after
    assert session.run("print(3 * 3)").output.strip() == "9"  # a fresh process takes over


def test_a_nonce_of_the_wrong_type_is_a_forged_frame(session: Session) -> None:
    code = FORGE.replace('f.f_locals["nonce"]', '[f.f_locals["nonce"]]').format(fields='"status": "ok"')
    result = session.run(code)
    assert result.status == "killed" and "did not send" in result.notice_after
