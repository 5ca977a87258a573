"""Reading the files a case consists of: regular files of bounded size, read without blocking.

A FIFO, a device or a directory is never read (opening a FIFO does not block either), a
file is never read past its limit (even if it grows while being read), and every
``OSError`` becomes a reason a user can act on.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_CASE_BYTES", "MAX_RULE_BYTES", "Unreadable", "os_reason", "read_limited",
           "too_large"]

#: The largest case file loaded (real cases are a few KB; this keeps validation within a
#: second or so and its memory small).
MAX_CASE_BYTES = 256 * 1024
#: The largest Byteman rule file a case may name (real rule files are a few KB).
MAX_RULE_BYTES = 256 * 1024

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

_HINTS = {
    errno.ENOENT: "check the path",
    errno.EACCES: "make {} readable and the directories above it searchable",
    errno.EPERM: "make {} readable and the directories above it searchable",
    errno.ENAMETOOLONG: "each part of a path may have at most 255 bytes",
    errno.ENOTDIR: "a part of the path before the last is not a directory",
    errno.ELOOP: "the path has a symbolic link loop",
}
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class Unreadable(Exception):
    """A file could not be read; ``str()`` says why and what to do (the caller adds where)."""


def os_reason(exc: OSError | ValueError, subject: str = "the file") -> str:
    """``Permission denied (make the file readable ...)``: an OSError as a user reads it."""
    if not isinstance(exc, OSError):
        return str(exc)  # ValueError: "embedded null byte"
    reason = exc.strerror or str(exc)
    hint = _HINTS.get(exc.errno or 0)
    return f"{reason} ({hint.format(subject)})" if hint else reason


def _check(mode: int, size: int, what: str, limit: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise Unreadable(f"{what} is {kind}, not a regular file (name a regular file)")
    if size > limit:
        raise Unreadable(too_large(what, f"{size} bytes", limit))


def too_large(what: str, size: str, limit: int) -> str:
    """Why a file (or text) of ``size`` (``"5242880 bytes"``) is refused."""
    return (f"{what} is too large ({size}): at most {limit} bytes ({limit // 1024} KiB) are "
            f"allowed; real ones have a few KB (is it the right file?)")


def read_limited(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the regular file at ``path`` if it has at most ``limit`` of them.

    ``what`` names the file in messages (``the case file``); any problem is an
    :class:`Unreadable`. The type and size are checked before the file is opened and
    again on the open file, and at most ``limit + 1`` bytes are read.
    """
    try:
        info = os.stat(path)
        _check(info.st_mode, info.st_size, what, limit)
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise Unreadable(f"cannot read {what}: {os_reason(exc)}") from None
    try:
        info = os.fstat(fd)  # the file opened may not be the one looked at
        _check(info.st_mode, info.st_size, what, limit)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read {what}: {os_reason(exc)}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise Unreadable(too_large(what, f"over {limit} bytes", limit))
    return b"".join(chunks)
