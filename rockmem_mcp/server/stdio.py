"""MCP over stdio without a thread hop per line.

The SDK's `stdio_server` wraps stdin and stdout in `anyio.wrap_file`: every line read, every write and every
flush is handed to a worker thread and back. At 100k memories that was ~19% of a search's time over stdio
(py-spy: the writer 14%, the reader 5%). Here both ends of the pipe are driven by the event loop itself
(asyncio's pipe transports), and the SDK's `stdio_server` is given them as its streams, so its framing,
parsing and session handling are unchanged.

As the SDK does, the server keeps private copies of fd 0 and 1 and points fd 0 at the null device and fd 1 at
stderr while it serves: a stray `print` or a child process can neither read the client's requests nor write
into the protocol. Where the event loop cannot drive the descriptors (a terminal or regular file, Windows,
one socket as both ends, stderr merged into stdout), the SDK's own transport serves instead.

A line that is no JSON-RPC message is answered, as over HTTP, where the SDK's stdio transport drops it silently:
-32700 Parse error (id null) when it does not parse, -32600 Invalid Request when it is JSON but no message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 16
CLOSE_FLUSH_S = 10.0
INVALID_REQUEST_TEXT = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"


class PipeLines:
    """The lines of a pipe as bytes, newline included (no length limit: a message is one line however long)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> bytes:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            chunk = await self._reader.read(READ_CHUNK)
            if not chunk:  # EOF: a last line without its newline still counts
                if not self._buffer:
                    raise StopAsyncIteration
                line, self._buffer = bytes(self._buffer), bytearray()
                self._scanned = 0
                return line
            self._buffer += chunk


class MessageLines:
    """The lines the SDK's transport is given as text: JSON-RPC messages only. The SDK drops a line it cannot
    read without a word, so its client waits for its own timeout; here such a line is answered as JSON-RPC 2.0
    asks (`refusal`) and never handed on. Blank lines carry nothing and are skipped."""

    def __init__(self, lines: AsyncIterator[bytes], out: PipeWriter) -> None:
        self._lines, self._out = lines, out

    def __aiter__(self) -> MessageLines:
        return self

    async def __anext__(self) -> str:
        async for line in self._lines:
            if not line.strip():
                continue
            refused = refusal(line)
            if refused is None:
                return line.decode("utf-8")  # refusal found it UTF-8
            log.warning("stdin: a line that is no JSON-RPC message answered with %s", refused.error.message)
            await self._out.write(refused.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
            await self._out.flush()
        raise StopAsyncIteration


def refusal(line: bytes) -> JSONRPCError | None:
    """The error a line of stdin is answered with, or None when it is a JSON-RPC message (the SDK's own check).

    A line that does not parse (not UTF-8, not JSON, a lone surrogate escape, cut short) gets -32700 with id null,
    as over HTTP. JSON that is no message gets -32600 Invalid Request, with the request's id when it has one to
    read, so its client can fail that request at once; a malformed response gets id null (its id is the server's
    own, and naming it would fail the client's request of that number)."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValidationError:
        pass
    try:
        value = pydantic_core.from_json(line.rstrip(b"\r\n"))  # "cut short at column 28", not "line 2 column 0"
    except ValueError as exc:
        return _error(None, PARSE_ERROR, f"Parse error: {exc}")
    request_id = value.get("id") if isinstance(value, dict) and "method" in value else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    return _error(request_id, INVALID_REQUEST, INVALID_REQUEST_TEXT)


class AnsweredReads:
    """The read stream of the SDK's own transport (the fallback), minus the lines it could not read: it hands each on
    as an exception, which the session drops without a word; here each is answered instead, with id null (the line
    is gone by then, so no id can be read from it). Blank lines are skipped, as `MessageLines` skips them."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner, self._write = inner, write

    @property
    def last_context(self) -> Any:  # the sender's context, which the SDK's dispatcher runs each message in
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            errors = item.errors() if isinstance(item, ValidationError) else []
            unparsed = [e for e in errors if e["type"] == "json_invalid"]
            if unparsed and not str(unparsed[0]["input"]).strip():
                continue
            if unparsed:
                refused = _error(None, PARSE_ERROR, f"Parse error: {unparsed[0]['ctx']['error']}")
            else:
                refused = _error(None, INVALID_REQUEST, INVALID_REQUEST_TEXT)
            log.warning("stdin: a line that is no JSON-RPC message answered with %s", refused.error.message)
            await self._write.send(SessionMessage(refused))

    def __aiter__(self) -> AnsweredReads:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweredReads:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


class PipeWriter:
    """Text written to a pipe by the event loop; `flush` waits until the pipe has taken it (back-pressure)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@contextlib.contextmanager
def claimed_std_fds() -> Iterator[tuple[int, int]]:
    """Private duplicates of fd 0 and 1 (close-on-exec, above 2); meanwhile fd 0 reads the null device and fd 1
    writes to stderr (or the null device when stderr is closed). Both are put back on exit, blocking as they
    were: asyncio makes the pipes non-blocking, and the next program on them must not inherit that."""
    import fcntl

    private_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    private_out = -1
    blocking: list[tuple[int, bool]] = []
    try:
        private_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        blocking = [(private_in, os.get_blocking(private_in)), (private_out, os.get_blocking(private_out))]
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:  # stderr closed
            sink = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(sink, 1)
            finally:
                os.close(sink)
        yield private_in, private_out
    finally:
        for fd, was_blocking in blocking:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was_blocking)
        os.dup2(private_in, 0)
        os.close(private_in)
        if private_out >= 0:
            os.dup2(private_out, 1)
            os.close(private_out)


class LoopPipes:
    """fd `read_fd` and `write_fd` driven by the event loop, as the SDK transport's text streams."""

    def __init__(
        self, lines: PipeLines, out: PipeWriter, reading: asyncio.ReadTransport, writing: asyncio.WriteTransport
    ) -> None:
        self.lines, self.out = lines, out
        self._reading, self._writing = reading, writing

    @classmethod
    async def open(cls, read_fd: int, write_fd: int) -> LoopPipes:
        """OSError/ValueError where the loop cannot drive them (epoll refuses /dev/null and regular files)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        # closefd=False: the descriptors are the claim's to close, after the transports are gone.
        read_file = os.fdopen(read_fd, "rb", buffering=0, closefd=False)
        write_file = os.fdopen(write_fd, "wb", buffering=0, closefd=False)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), read_file)
        try:
            write_transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop=loop), write_file
            )
        except BaseException:
            read_transport.close()
            raise
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        return cls(PipeLines(reader), PipeWriter(writer), read_transport, write_transport)

    async def close(self) -> None:
        """Send what the last replies left in the write buffer (the loop ends with this process: a reply still
        buffered then would be lost), for up to CLOSE_FLUSH_S if the client stopped reading; then close."""
        try:
            if self._writing.get_write_buffer_size():
                self._writing.set_write_buffer_limits(high=0)  # drain() now waits for an empty buffer
                with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                    await asyncio.wait_for(self.out.flush(), CLOSE_FLUSH_S)
        finally:
            if self._writing.get_write_buffer_size():
                self._writing.abort()  # nothing may stay registered on a descriptor the claim closes
            else:
                self._writing.close()
            self._reading.close()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve `server` over this process's stdin and stdout until stdin ends."""
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async does exactly this with its transport
    why_not = "Windows" if sys.platform == "win32" else _loop_can_serve()
    if why_not is None:
        with claimed_std_fds() as (read_fd, write_fd):
            try:
                pipes = await LoopPipes.open(read_fd, write_fd)
            except (OSError, ValueError, NotImplementedError) as exc:
                why_not = f"the event loop cannot drive them: {exc}"
            else:
                try:
                    lines = MessageLines(pipes.lines, pipes.out)
                    async with stdio_server(lines, pipes.out) as (read_stream, write_stream):  # type: ignore[arg-type]
                        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
                finally:
                    await pipes.close()
                return
    log.info("stdio served through the SDK's reader and writer threads (%s)", why_not)
    async with stdio_server() as (read_stream, write_stream):  # as the SDK's run_stdio_async, lines it drops answered
        reads = AnsweredReads(read_stream, write_stream)
        await lowlevel.run(reads, write_stream, lowlevel.create_initialization_options())


def _loop_can_serve() -> str | None:
    """Why the event loop should not drive fd 0 and 1 (None: it can). Pipes and sockets only: epoll refuses
    /dev/null and regular files; a terminal would be left non-blocking for the shell; one socket as both ends
    reads as "peer closed" to asyncio's write side; and stderr sharing stdout's pipe (a client's `2>&1`) would
    become non-blocking too, so a log line into a full pipe could fail."""
    import stat

    try:
        ends = [os.fstat(fd) for fd in (0, 1)]
    except OSError as exc:
        return f"stdin or stdout is not open ({exc.strerror})"
    if not all(stat.S_ISFIFO(end.st_mode) or stat.S_ISSOCK(end.st_mode) for end in ends):
        return "stdin or stdout is not a pipe or socket"
    if os.path.samestat(ends[0], ends[1]):
        return "stdin and stdout are one socket"
    with contextlib.suppress(OSError):
        if os.path.samestat(ends[1], os.fstat(2)):
            return "stderr is stdout's pipe"
    return None
