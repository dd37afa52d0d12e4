"""The notebook loop of one session process: receive code, execute it, report a status.

Contract: state (one globals dict) persists across cells; the value of a bare last expression is
printed with repr(); stdout and stderr both go straight (unbuffered) to the output pipe on fds 1
and 2, so prints, warnings, subprocess output and tracebacks arrive in order. An exception prints a
traceback whose first frame is the user's cell (this module's and the parser's frames are cut: a
cell that does not parse shows its SyntaxError's location only, as CPython does) and yields status
"error" ("memory" for MemoryError), sent back with the run's nonce. `SystemExit` ends the cell,
not the session. It does not enforce limits or read output back: the harness times runs and
collects the pipe, and trusts nothing a cell could write on fd 3 in the loop's place.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import linecache
import os
import socket
import sys
import traceback
import types
from typing import Any, NoReturn

from . import _wire

CellStatus = str  # "ok" | "error" | "memory"; kept a plain str because it crosses the wire


def _stream(fd: int) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True)


def _fresh_namespace() -> dict[str, Any]:
    return {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}


def _print_user_traceback(exc: BaseException, filename: str) -> None:
    """The traceback from the cell's own first frame on: the loop's frames, and the parser's when the
    cell does not even parse (a SyntaxError then prints only its location, as CPython does), are cut."""
    tb: types.TracebackType | None = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc.with_traceback(tb), tb, file=sys.stderr)


def run_cell(
    code: str,
    namespace: dict[str, Any],
    number: int,
    *,
    _parse: Any = ast.parse,
    _compile: Any = compile,
    _exec: Any = exec,
    _eval: Any = eval,
    _expr: Any = ast.Expr,
    _expression: Any = ast.Expression,
) -> CellStatus:
    """Execute one cell in `namespace`; print its last expression's value or its traceback.

    The loop's own tools are bound when this module loads (the keyword defaults), so a cell that
    replaces `builtins.exec`, `ast.parse` or this module's functions changes only its own run.
    """
    filename = f"<cell-{number}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        tree = _parse(code, filename, "exec")
        last = None
        if tree.body and type(tree.body[-1]) is _expr:
            last = _expression(tree.body[-1].value)
            del tree.body[-1]
        _exec(_compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = _eval(_compile(last, filename, "eval"), namespace)
            if value is not None:
                sys.stdout.write(repr(value) + "\n")
        return "ok"
    except SystemExit as exc:
        # Notebook semantics: sys.exit() ends the cell; a non-zero code is reported like an error.
        if exc.code in (None, 0):
            return "ok"
        sys.stderr.write(f"SystemExit: {exc.code}\n")
        return "error"
    except MemoryError as exc:
        _print_user_traceback(exc, filename)
        return "memory"
    except (Exception, KeyboardInterrupt) as exc:  # user code's failures are data (process boundary)
        with contextlib.suppress(Exception):  # a cell may have broken traceback: the status stands
            _print_user_traceback(exc, filename)
        return "error"


def _done_frame(status: str, nonce: object, threads: int, *, _pack: Any = _wire.HEADER.pack) -> bytes:
    """The "done" frame, built without json (a cell may replace json's or _wire's functions)."""
    hexdigits = "0123456789abcdef"
    safe = nonce if type(nonce) is str and len(nonce) <= 64 and all(c in hexdigits for c in nonce) else ""
    body = f'{{"op": "done", "status": "{status}", "nonce": "{safe}", "threads": {int(threads)}}}'.encode()
    header: bytes = _pack(len(body))
    return header + body


def _channel_ids(*, _fstat: Any = os.fstat) -> tuple[tuple[int, int], ...] | None:
    """(device, inode) of fds 1, 2 and 3; None if one is closed."""
    try:
        return tuple((st.st_dev, st.st_ino) for st in map(_fstat, (1, 2, 3)))
    except OSError:
        return None


def serve(
    sock: socket.socket,
    *,
    _run: Any = run_cell,
    _ids: Any = _channel_ids,
    _lost: int = _wire.CHANNEL_LOST_EXIT,
    _done: Any = _done_frame,
    _write: Any = os.write,
    _exit: Any = os._exit,
    _frames: Any = sys._current_frames,
    _settrace: Any = sys.settrace,
    _setprofile: Any = sys.setprofile,
    _stdin: Any = io.StringIO,
) -> NoReturn:
    """Answer run requests on `sock` until the harness closes it, then exit the process.

    What decides a run's status is bound here when the module loads (keyword defaults), so a cell
    that replaces this module's functions, `os.write` or `os._exit` changes only its own run; a
    tracer an earlier cell set is removed before each cell; "done" says how many other threads
    are alive (the harness gives the next run a fresh process if any are: they could forge it).
    After each cell fds 1, 2 and 3 must still be the pipe and socket the loop was given (same
    device and inode): a cell that put another pipe or socket there (a relay process on the far
    end could rewrite every later run) ends the process with CHANNEL_LOST_EXIT, whereupon its
    namespace's reaper ends too and takes every other process of the session with it.
    """
    out, err = _stream(1), _stream(2)
    namespace = _fresh_namespace()
    reader = _wire.FrameReader(sock)
    _wire.send_frame(sock, {"op": "ready", "pid": os.getpid()})
    number = 0
    fd = sock.fileno()
    channels = _ids()
    while True:
        try:
            request = reader.read_frame()
        except _wire.WireError:
            _exit(0)
        cell = request.get("cell")  # the harness numbers cells: an injected failure takes one too
        number = cell if type(cell) is int and 0 < cell < 1 << 31 else number + 1
        nonce = request.get("nonce")  # echoed in "done": the harness accepts no other
        code = str(request.get("code", ""))
        stdin = request.get("stdin")  # a tool's stdin argument (rStar2-Agent's `input`), else none
        del request
        sys.stdout, sys.stderr = out, err
        sys.stdin = _stdin(stdin) if type(stdin) is str else sys.__stdin__
        _settrace(None)  # an earlier cell's tracer could jump over this cell's failing lines
        _setprofile(None)
        status = _run(code, namespace, number)
        if status not in ("ok", "error", "memory"):
            status = "error"
        for stream in (out, err):
            try:
                stream.flush()
            except (OSError, ValueError) as exc:  # user code may have closed fd 1 or 2
                _write(2, f"[sandbox] could not flush output: {exc!r}\n".encode())
        if _ids() != channels:  # never report on a channel someone else may now hold
            _exit(_lost)
        frame = _done(status, nonce, len(_frames()) - 1)  # other Python threads still alive
        try:
            while frame:
                frame = frame[_write(fd, frame) :]
        except OSError:
            _exit(0)
