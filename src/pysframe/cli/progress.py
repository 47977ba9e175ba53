"""A one-line progress bar on stderr for commands that go through many files."""

from __future__ import annotations

import os
import time
from typing import TextIO


class Progress:
    """``[#####.....] done/count seconds name``, redrawn at most ten times a second."""

    def __init__(self, count: int, stream: TextIO, width: int = 30) -> None:
        self.count, self.stream, self.width = count, stream, width
        self.began = time.monotonic()
        self.drawn = 0.0

    def update(self, done: int, path: str) -> None:
        now = time.monotonic()
        if done < self.count and now - self.drawn < 0.1:
            return
        self.drawn = now
        filled = self.width * done // max(self.count, 1)
        bar = "#" * filled + "." * (self.width - filled)
        name = os.path.basename(path)[:30]
        elapsed = now - self.began
        self.stream.write(f"\r[{bar}] {done}/{self.count} {elapsed:6.1f}s {name:<30}")
        self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\r" + " " * (self.width + 60) + "\r")
        self.stream.flush()
