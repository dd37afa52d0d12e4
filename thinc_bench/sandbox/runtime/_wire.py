"""Length-prefixed JSON frames over Unix stream sockets, shared by the harness and the jailed server.

Contract: a frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (an
object). File descriptors may ride along with a frame (SCM_RIGHTS), but only a reader built with
`accept_fds=True` (the server, reading the harness) takes them; every other reader receives without
an ancillary buffer, so the kernel closes whatever descriptors a peer sends. A reader built with
`credentials=True` (the harness, reading a session's first frame on a socket with SO_PASSCRED set)
records the sender's pid as the kernel states it in the reader's own PID namespace; descriptors
that came along are closed. A reader's buffer never
holds more than one partial frame of at most `max_frame_bytes` plus one receive. This module imports
only the standard library because it also runs inside the jail. It does not retry, time out or log.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from typing import Any

HEADER = struct.Struct(">I")
# Code blocks and control messages are kilobytes; a larger length means a corrupt or hostile stream.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# What a session process sends the harness ("ready", "done") is under a hundred bytes.
SESSION_FRAME_BYTES = 4096
# One recv() worth of bytes; frames are small, so this rarely splits one.
RECV_CHUNK_BYTES = 65536
# Exit code of a session process whose loop found fd 1, 2 or 3 no longer the pipe and socket it
# was given: it cannot report on channels a cell may have handed to another process, so it ends.
CHANNEL_LOST_EXIT = 122
# A spawn request carries two descriptors (session socket, output pipe); anything more is refused.
MAX_FDS_PER_FRAME = 4
# struct ucred: pid, uid, gid.
UCRED = struct.Struct("3i")


class WireError(Exception):
    """The peer closed the stream or sent bytes that are not a valid frame."""


def encode(obj: dict[str, Any]) -> bytes:
    """Serialise one frame (header + JSON body).

    A string holding a lone surrogate (`json.loads` makes one of a model's `"\\ud800"` tool-call
    argument) has no UTF-8 form; such a frame is written with JSON's `\\uXXXX` escapes instead, which
    the reader turns back into the very same string. So the code reaches the interpreter exactly as the
    model wrote it, and Python, not the harness, says what it makes of it.
    """
    text = json.dumps(obj, ensure_ascii=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        body = json.dumps(obj, ensure_ascii=True).encode("ascii")
    return HEADER.pack(len(body)) + body


def send_frame(sock: socket.socket, obj: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send one frame, optionally passing file descriptors with its first byte.

    Raises:
        OSError: the peer is gone (EPIPE, ECONNRESET) or the socket is closed.
    """
    data = encode(obj)
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    if data:
        sock.sendall(data)


class FrameReader:
    """Incremental frame parser for one socket; keeps one partial frame (and, if asked, descriptors)."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        accept_fds: bool = False,
        credentials: bool = False,
    ) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.accept_fds = accept_fds
        self.credentials = credentials
        self.sender_pid: int | None = None  # with `credentials`: the pid of the last bytes' sender
        self._buffer = bytearray()
        self._fds: list[int] = []
        self.eof = False

    def feed_from_socket(self, flags: int = 0) -> None:
        """Read what the socket has now (blocking if it is blocking); sets `eof` on end of stream.

        Raises:
            BlockingIOError: `flags` has MSG_DONTWAIT (or the socket is non-blocking) and nothing is there.
        """
        try:
            if self.accept_fds:
                data, fds, _flags, _addr = socket.recv_fds(
                    self.sock, RECV_CHUNK_BYTES, MAX_FDS_PER_FRAME, flags | socket.MSG_CMSG_CLOEXEC
                )
                self._fds.extend(fds)
            elif self.credentials:
                data = self._recv_with_credentials(flags)
            else:
                data = self.sock.recv(RECV_CHUNK_BYTES, flags)  # no ancillary buffer: sent fds are closed
        except ConnectionResetError:
            data = b""  # the peer died with our last frame unread: same as end of stream
        if not data:
            self.eof = True
        self._buffer.extend(data)

    def _recv_with_credentials(self, flags: int) -> bytes:
        space = socket.CMSG_SPACE(UCRED.size) + socket.CMSG_SPACE(MAX_FDS_PER_FRAME * 4)
        data, ancillary, _flags, _addr = self.sock.recvmsg(
            RECV_CHUNK_BYTES, space, flags | socket.MSG_CMSG_CLOEXEC
        )
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= UCRED.size:
                self.sender_pid = UCRED.unpack_from(payload)[0]
            elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                for i in range(len(payload) // 4):  # nobody asked for them
                    os.close(int.from_bytes(payload[4 * i : 4 * i + 4], sys.byteorder))
        return data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame."""
        return len(self._buffer)

    def next_frame(self) -> dict[str, Any] | None:
        """Return the next complete frame already buffered, or None.

        Raises:
            WireError: the buffered bytes are not a valid frame.
        """
        if len(self._buffer) < HEADER.size:
            return None
        (length,) = HEADER.unpack_from(self._buffer)
        if length > self.max_frame_bytes:
            raise WireError(f"a frame of {length} bytes exceeds the {self.max_frame_bytes}-byte bound")
        if len(self._buffer) < HEADER.size + length:
            return None
        body = bytes(self._buffer[HEADER.size : HEADER.size + length])
        del self._buffer[: HEADER.size + length]
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError) as exc:  # RecursionError: "[[[[..." nested past the limit
            raise WireError(f"frame is not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise WireError(f"frame is a {type(obj).__name__}, not an object")
        return obj

    def take_fds(self) -> list[int]:
        """Hand over (and forget) the descriptors received so far."""
        fds, self._fds = self._fds, []
        return fds

    def read_frame(self) -> dict[str, Any]:
        """Block until one whole frame is available and return it.

        Raises:
            WireError: end of stream before a whole frame, or a malformed frame.
        """
        while True:
            frame = self.next_frame()
            if frame is not None:
                return frame
            if self.eof:
                raise WireError("stream closed")
            self.feed_from_socket()
