"""A golden journal's line kept where it is, in its file, instead of in memory (issue 28).

A line of many megabytes (a request carrying a long conversation) is validated when the
journal is read and then let go: replay compares a request with it, and writes it to the
observed journal, a megabyte at a time from the file. The file must not change meanwhile;
a read that finds it changed fails with one line (`GoldenChanged`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import JournalError

CHUNK = 1 << 20
"""How much of a line is read (and held) at a time."""


class GoldenChanged(JournalError):
    """The golden journal changed on disk while a replay still read from it: the machine's
    doing (a recording installed meanwhile, say), not the agent's, so an infrastructure error."""

    infrastructure = True


Stamp = tuple[int, int, int]
"""What tells a file from a changed one: its inode, size and modification time (ns)."""


def stamp_of(fd: int) -> Stamp:
    status = os.fstat(fd)
    return status.st_ino, status.st_size, status.st_mtime_ns


class DiskSlice:
    """Bytes `start` to `start + length` of a file, read when asked for.

    Offers what replay asks of a payload's text: its length, a search (`find`, `rfind`), a
    slice (read as bytes), a comparison with bytes (`same_as`) and its bytes a chunk at a time
    (`chunks`); `bytes()` reads it whole.
    """

    __slots__ = ("_length", "_path", "_stamp", "_start")

    def __init__(self, path: Path, start: int, length: int, stamp: Stamp) -> None:
        self._path, self._start, self._length, self._stamp = path, start, length, stamp

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"DiskSlice({self._path}, {self._start}, {self._length} bytes)"

    def sub(self, start: int, stop: int) -> DiskSlice:
        """Bytes `start` to `stop` of this slice (0 <= start <= stop <= len), not read."""
        return DiskSlice(self._path, self._start + start, stop - start, self._stamp)

    def __getitem__(self, index: slice) -> bytes:
        start, stop, step = index.indices(self._length)
        if step != 1:
            raise ValueError("a DiskSlice is read in order")
        return self.read(start, stop)

    def __bytes__(self) -> bytes:
        return self.read(0, self._length)

    def read(self, start: int, stop: int) -> bytes:
        with self._open() as file:
            file.seek(self._start + start)
            return file.read(max(0, stop - start))

    def chunks(self, start: int = 0, stop: int | None = None) -> Iterator[bytes]:
        """Bytes `start` to `stop` (the end) of the slice, a CHUNK at a time."""
        stop, size = self._length if stop is None else stop, CHUNK
        with self._open() as file:
            file.seek(self._start + start)
            while start < stop:
                chunk = file.read(min(size, stop - start))
                if not chunk:  # the stamp said otherwise: changed as it was read
                    raise self._changed()
                start += len(chunk)
                yield chunk

    def same_as(self, data: bytes) -> bool:
        """Whether `data` is byte for byte this slice (memcmp a chunk at a time)."""
        if len(data) != self._length:
            return False
        at = 0
        for chunk in self.chunks():
            if not data.startswith(chunk, at):
                return False
            at += len(chunk)
        return True

    def find(self, text: bytes, start: int = 0, stop: int | None = None) -> int:
        """bytes.find on the slice (non-negative `start` and `stop`), read a chunk at a time:
        each chunk keeps the end of the one before that a match could start in."""
        stop = self._length if stop is None else stop
        keep, at, tail = len(text) - 1, start, b""
        for chunk in self.chunks(start, stop):
            window = tail + chunk
            found = window.find(text)
            if found != -1:
                return at - len(tail) + found
            at += len(chunk)
            tail = window[len(window) - keep :] if keep else b""
        return -1

    def rfind(self, text: bytes, start: int = 0, stop: int | None = None) -> int:
        """bytes.rfind on the slice, read a chunk at a time from its end."""
        stop = self._length if stop is None else stop
        keep, end, head = len(text) - 1, stop, b""
        while end > start:
            begin = max(start, end - CHUNK)
            window = self.read(begin, end) + head
            found = window.rfind(text)
            if found != -1:
                return begin + found
            head, end = window[:keep], begin
        return -1

    def _open(self) -> BinaryIO:
        file = self._path.open("rb")
        if stamp_of(file.fileno()) != self._stamp:
            file.close()
            raise self._changed()
        return file

    def _changed(self) -> GoldenChanged:
        return GoldenChanged(
            f"{self._path}: changed on disk during the replay that reads it (it was "
            f"{self._stamp[1]} bytes when read); run the replay again"
        )
