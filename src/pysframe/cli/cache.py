"""``pysframe cache``: where the cache of generated SFrame and tables is, how large it may
grow, and what it holds, folder by folder and kind by kind; ``--clear`` removes every entry
(:mod:`pysframe.sources.cache`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .report import line


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show or clear the cache of generated SFrame and tables",
        description="Print the cache's directory, its largest size and its entries by folder "
        "(one per version of pysframe) and by kind. PYSFRAME_CACHE_DIR names the directory "
        "(empty: no cache), PYSFRAME_CACHE_MAX_SIZE its largest size (bytes, or with K, M, G "
        "or T; default 1G): past it, a write removes the entries used least recently.",
    )
    parser.add_argument(
        "--clear", action="store_true", help="remove every entry of the cache (every version's)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sources.cache import (
        CACHE_ENVIRONMENT,
        ENTRY_KINDS,
        TEMPORARY,
        cache_usage,
        clear_cache,
        size_text,
    )

    if args.clear:
        cleared = clear_cache()
        if cleared is None:
            print(f"no cache ({CACHE_ENVIRONMENT} is empty)")
            return 0
        print(f"removed {cleared.removed} entries ({size_text(cleared.size)}) from "
              f"{cleared.directory}")  # fmt: skip
        if cleared.failed:
            line(f"{cleared.directory}: {cleared.failed} entries could not be removed")
            return 1
        return 0
    usage = cache_usage()
    if usage is None:
        print(f"no cache ({CACHE_ENVIRONMENT} is empty)")
        return 0
    out = sys.stdout
    out.write(f"directory: {usage.directory}\n")
    out.write(f"size: {size_text(usage.size)} of at most {size_text(usage.max_size)}\n")
    rows = [("folder", "entries", "size", "last used")]
    for folder in usage.folders:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(folder.last_used))
        mark = " (this pysframe)" if folder.current else ""
        rows.append((folder.name, str(folder.entries), size_text(folder.size), when + mark))
    rows.append(("kind", "entries", "size", ""))
    for kind in (*ENTRY_KINDS, TEMPORARY):
        counts = [folder.kinds[kind] for folder in usage.folders if kind in folder.kinds]
        if counts:
            total = (sum(c for c, _ in counts), sum(s for _, s in counts))
            rows.append((kind, str(total[0]), size_text(total[1]), ""))
    rows.append(("total", str(sum(f.entries for f in usage.folders)), size_text(usage.size), ""))
    width = max(len(row[0]) for row in rows)
    for name, count, size, when in rows:
        if name == "kind":
            out.write("\n")
        out.write(f"{name:<{width}}  {count:>7}  {size:>10}  {when}".rstrip() + "\n")
    return 0
