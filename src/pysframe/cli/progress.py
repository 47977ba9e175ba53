"""A one-line progress bar on stderr for commands that go through many files."""

from __future__ import annotations

import os
import time
from typing import TextIO


class Progress:
    """``[#####.....] done/count seconds name``, redrawn at most ten times a second; counts
    of files, or of bytes shown in MB (``in_bytes``; a count of 0: unknown, no bar)."""

    def __init__(
        self, count: int, stream: TextIO, width: int = 30, *, in_bytes: bool = False
    ) -> None:
        self.count, self.stream, self.width = count, stream, width
        self.in_bytes = in_bytes
        self.began = time.monotonic()
        self.drawn = 0.0

    def update(self, done: int, path: str) -> None:
        now = time.monotonic()
        if (done < self.count or not self.count) and now - self.drawn < 0.1:
            return
        self.drawn = now
        filled = self.width * min(done, self.count) // max(self.count, 1)
        bar = "#" * filled + "." * (self.width - filled) if self.count else "?" * self.width
        if self.in_bytes:
            total = f"/{self.count / 2**20:.0f}" if self.count else ""
            figures = f"{done / 2**20:.0f}{total} MB"
        else:
            figures = f"{done}/{self.count}"
        name = os.path.basename(path)[:30]
        elapsed = now - self.began
        self.stream.write(f"\r[{bar}] {figures} {elapsed:6.1f}s {name:<30}")
        self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\r" + " " * (self.width + 60) + "\r")
        self.stream.flush()
