"""Open a section and build its lookup index: pysframe against GNU libsframe's sframe_decode.

Both get the same bytes.  libsframe (``$LIBSFRAME``, else the system's) is called through
ctypes: ``sframe_decode`` then ``sframe_decoder_free``.  pysframe is timed four ways:

* ``open``: ``SFrameSection.from_bytes``: the header, and the lookup index (every function's
  absolute start address, its order checked when the section is flagged sorted), the
  counterpart of ``sframe_decode``;
* ``open + lookup``: the same plus one ``lookup`` (that function's FDE read and checked, its
  rows decoded), to show the index is complete;
* ``open + FDE table``: the same plus every FDE read into columns and checked (what iteration,
  dump, validation and the batch lookup use);
* ``open + batch index``: the same plus the columnar row table ``find_rows`` builds.

A libsframe that cannot read a version (binutils 2.40's reads V1 only) is reported, and the
pysframe figure is printed alone; every input is therefore also measured in V1.

    python benchmarks/bench_open.py [--quick] [--runs N] [--functions N] [--libraries N]
"""

from __future__ import annotations

import sys
from functools import partial

import common

from pysframe import SFrameSection, Version


def main() -> int:
    config = common.settings(common.parser(__doc__ or "").parse_args())
    lib = common.load_libsframe()
    print(f"libsframe: {lib.path if lib else 'none'}; median of {config.runs} runs")
    for item in common.inputs(config, (Version.V3, Version.V2, Version.V1)):
        data = item.data
        section = item.section()
        common.heading(
            f"{item.label}: {len(data):,} bytes, {len(section):,} functions, "
            f"{section.num_rows:,} rows"
        )
        reference: float | None = None
        if lib is not None:
            if lib.decode_and_free(data):
                reference = common.median_seconds(partial(lib.decode_and_free, data), config.runs)
            else:
                print(f"  libsframe ({lib.path}) cannot read SFrame V{int(item.version)}")
        opened = common.median_seconds(partial(SFrameSection.from_bytes, data), config.runs)
        common.print_ratio("  open (sframe_decode)", opened, reference, "libsframe")
        middle = int(section.starts[len(section) // 2]) if len(section) else 0

        def open_and_lookup(d: bytes = data, pc: int = middle) -> None:
            SFrameSection.from_bytes(d).find_row(pc)

        looked_up = common.median_seconds(open_and_lookup, config.runs)
        common.print_ratio("  open + lookup", looked_up, reference, "libsframe")

        def open_and_table(d: bytes = data) -> None:
            SFrameSection.from_bytes(d).table  # noqa: B018

        tabled = common.median_seconds(open_and_table, config.runs)
        common.print_ratio("  open + FDE table", tabled, reference, "libsframe")

        def open_and_index(d: bytes = data) -> None:
            SFrameSection.from_bytes(d).find_rows([])

        indexed = common.median_seconds(open_and_index, max(1, min(config.runs, 3)))
        common.print_ratio(
            "  open + batch index (find_rows table)", indexed, reference, "libsframe"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
