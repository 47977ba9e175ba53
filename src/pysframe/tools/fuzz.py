"""Fuzzing harness: every reader of pysframe over mutated SFrame sections.

Invariants checked on each input (:func:`check_input`):

* only :class:`pysframe.errors.SFrameError` escapes decode, iteration, row decoding, scalar and
  batch lookups, re-encoding, validation, the dump and the unwinder walking pseudo-random
  memory;
* no hang: one input takes at most ``time_limit`` seconds;
* bounded memory: the peak traced allocation is at most ``memory_factor`` (default
  ``MEMORY_FACTOR``) times the input size plus ``memory_slack`` (``MEMORY_SLACK``) bytes
  (checked with tracemalloc, which numpy reports to).

Two engines:

* ``random`` (default, pure Python, deterministic per ``--seed``): structure-aware mutations of
  the seed sections (header fields, FDE fields, FRE bytes, truncation, splicing);
* ``atheris`` (coverage-guided libFuzzer, when the ``atheris`` package imports).

Seeds are the .sframe sections of the test corpus (tests/data/fuzz-seeds/*.sframe, extracted
with ``python -m pysframe.tools.fuzz --extract-seeds``) plus small built-in ones.

Long run::

    python -m pysframe.tools.fuzz --runs 2000000 --time 1200          # random engine
    python -m pysframe.tools.fuzz --engine atheris --time 1200        # coverage-guided
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Literal

from ..dataclass import dataclass
from ..errors import SFrameError
from ..format.constants import SFRAME_MAGIC, Version
from ..format.layout import (
    FDE_FIELDS,
    FDE_SIZE,
    HEADER_FIELDS,
    HEADER_NAMES,
    HEADER_SIZE,
    fde_struct,
    field_spans,
    header_struct,
    v3_attr_struct,
)
from ..format.model import Function
from ..format.section import SFrameSection
from . import dump

#: Peak traced memory allowed per input byte, plus a constant slack.
MEMORY_FACTOR = 512
MEMORY_SLACK = 4 << 20
#: Lookups tried per input (function boundaries, rows, and a few pseudo-random PCs).
MAX_PCS = 64
#: Frames the unwinder may walk per input.
MAX_FRAMES = 64
#: Section addresses each input is decoded at: zero, and one that makes addresses wrap.
SECTION_ADDRESSES = (0, 0xFFFF_FFFF_FFFF_F000)
#: Default directory of seed sections (a source checkout).
SEEDS_DIR = Path(__file__).resolve().parents[3] / "tests" / "data" / "fuzz-seeds"


class InvariantError(Exception):
    """An input broke an invariant: an exception other than SFrameError, a hang or memory."""


# ---------------------------------------------------------------------------------------------
# The target


def _stage(action: Callable[[], object]) -> object | None:
    """Run one reader; an SFrameError is an acceptable answer to bad input."""
    try:
        return action()
    except SFrameError:
        return None


def _pcs(section: SFrameSection, data: bytes) -> list[int]:
    """PCs worth looking up: each function's edges and rows, then pseudo-random ones."""
    pcs: list[int] = []
    for index in range(min(len(section), MAX_PCS // 4)):
        start = int(section.starts[index])
        function = _stage(lambda i=index: section[i])  # type: ignore[misc]
        size = function.size if isinstance(function, Function) else 1
        pcs += [start, start + size - 1, start + size, start + size // 2]
    digest = hashlib.blake2b(data, digest_size=64).digest()
    pcs += [int.from_bytes(digest[i : i + 8], "little") for i in range(0, 64, 8)]
    return [pc % (1 << 64) for pc in pcs[:MAX_PCS]]


def _exercise_section(section: SFrameSection, data: bytes) -> None:
    from .validate import validate_section

    validate_section(section)
    validate_section(section, kernel=True, text_ranges=[(0, 1 << 63)])

    def rows_by_index() -> None:
        # One function at a time, each read and checked alone, as lookups read them.  Each
        # function's rows are bounded by the input size, but not their sum (only the
        # whole-table checks bound that), so a bounded number of functions.
        for index in range(min(len(section), MAX_PCS // 4)):
            _stage(lambda i=index: section[i].rows)  # type: ignore[misc]

    def rows_by_iteration() -> None:  # every FDE read and checked at once first
        for function in section:
            _stage(lambda f=function: f.rows)  # type: ignore[misc]

    rows_by_index()
    _stage(rows_by_iteration)
    pcs = _pcs(section, data)
    for pc in pcs:
        _stage(lambda pc=pc: section.find_row(pc))  # type: ignore[misc]
        _stage(lambda pc=pc: section.find_function(pc))  # type: ignore[misc]
    _stage(lambda: section.find_rows(pcs))
    _stage(section.to_bytes)
    _dump(section)
    _unwind(section, data, pcs)


def _dump(section: SFrameSection) -> None:
    """objdump-style text, readelf-style text and JSON of the section."""
    _stage(lambda: dump.section_text(section))
    _stage(lambda: dump.section_json(section))
    _stage(lambda: dump.readelf_text(".sframe", section))


def _unwind(section: SFrameSection, data: bytes, pcs: Sequence[int]) -> None:
    from ..unwind.core import Registers, single_module, unwind

    seed = hashlib.blake2b(data, digest_size=16).digest()

    def read_memory(address: int, size: int) -> bytes:
        """Pseudo-random memory; unmapped (ValueError) for one address in 16."""
        block = hashlib.blake2b(address.to_bytes(8, "little") + seed, digest_size=64).digest()
        if block[0] & 0xF == 0 or size > 4096:
            raise ValueError("unmapped")
        return (block * (size // 64 + 1))[:size]

    for pc in pcs[:4]:
        registers = Registers(pc=pc, sp=0x7FFF_0000 + (pc & 0xFF0), fp=0x7FFF_1000, lr=pc + 4)
        _stage(
            lambda r=registers: unwind(  # type: ignore[misc]
                section.abi, r, read_memory, single_module(section), max_frames=MAX_FRAMES
            )
        )


def exercise(data: bytes) -> None:
    """Feed ``data`` to every reader; raises only what is not an SFrameError."""
    from .validate import validate_bytes

    validate_bytes(data)
    for address in SECTION_ADDRESSES:
        section = _stage(lambda a=address: SFrameSection.from_bytes(data, a))  # type: ignore[misc]
        if isinstance(section, SFrameSection):
            _exercise_section(section, data)


def check_input(
    data: bytes,
    *,
    time_limit: float = 10.0,
    memory: bool = True,
    memory_factor: int = MEMORY_FACTOR,
    memory_slack: int = MEMORY_SLACK,
    target: Callable[[bytes], object] | None = None,
) -> None:
    """Run ``target`` (default: :func:`exercise`) on ``data`` and check the invariants; raise
    InvariantError.  With ``memory``, the peak traced memory may be at most ``memory_factor``
    times the input size plus ``memory_slack`` bytes."""
    run_target = exercise if target is None else target
    if memory:
        tracemalloc.start()
    began = time.perf_counter()
    try:
        run_target(data)
    except Exception as error:
        raise InvariantError(
            f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
        ) from error
    finally:
        elapsed = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1] if memory else 0
        if memory:
            tracemalloc.stop()
    if elapsed > time_limit:
        raise InvariantError(f"took {elapsed:.1f} s (limit {time_limit} s)")
    allowed = memory_factor * len(data) + memory_slack
    if peak > allowed:
        raise InvariantError(f"peak memory {peak} bytes for a {len(data)}-byte input")


# ---------------------------------------------------------------------------------------------
# Seeds


def builtin_seeds() -> list[bytes]:
    """Small hand-built sections: V1 AMD64, V2 AArch64 big-endian, V3 FLEX."""
    v1_fres = bytes([0x00, 0x03, 0x08, 0x01, 0x05, 0x10, 0xF0, 0x04, 0x04, 0x10, 0xF0])
    v1_fde = fde_struct(Version.V1, False).pack(-0x1000, 0x20, 0, 3, 0x00)
    v1 = _header("<", 1, 1, 3, 0, -8, 1, 3, len(v1_fres), 0, len(v1_fde)) + v1_fde + v1_fres
    v2_fres = bytes([0x00, 0x03, 0x00, 0x04, 0x07, 0x10, 0xF8, 0xF0])
    v2_fde = fde_struct(Version.V2, True).pack(0x100, 0x40, 0, 2, 0x00, 0, 0)
    v2 = _header(">", 2, 1, 1, 0, 0, 1, 2, len(v2_fres), 0, len(v2_fde)) + v2_fde + v2_fres
    # V3 FLEX: attribute record (2 FREs, ADDR1, FLEX), CFA=*(r6+16), then CFA=sp+8 RA at c-8.
    v3_fres = v3_attr_struct(False).pack(2, 0x00, 0x01, 0) + bytes(
        [0x00, 0x05, 0x33, 0x10, 0x01, 0x09, 0x39, 0x08, 0x02, 0xF8]
    )
    v3_fde = fde_struct(Version.V3, False).pack(0x1000, 0x20, 0)
    v3 = _header("<", 3, 5, 3, 0, -8, 1, 2, len(v3_fres), 0, len(v3_fde)) + v3_fde + v3_fres
    return [v1, v2, v3]


def _header(order: str, *fields: int) -> bytes:
    version, flags, abi, fixed_fp, fixed_ra, num_fdes, num_fres, fre_len, fde_off, fre_off = fields
    return header_struct(order == ">").pack(
        SFRAME_MAGIC,
        version,
        flags,
        abi,
        fixed_fp,
        fixed_ra,
        0,
        num_fdes,
        num_fres,
        fre_len,
        fde_off,
        fre_off,
    )


def load_seeds(directory: Path | None = None) -> list[bytes]:
    """Seed sections from ``directory`` (default: the checkout's tests/data/fuzz-seeds)."""
    folder = SEEDS_DIR if directory is None else directory
    seeds = [p.read_bytes() for p in sorted(folder.glob("*.sframe"))] if folder.is_dir() else []
    return seeds + builtin_seeds()


def extract_seeds(corpus: Path, out: Path) -> int:
    """Write the SFrame section (as stored) of every ELF file under ``corpus`` to ``out``."""
    from ..elf.reader import ElfReader, is_elf_file
    from ..elf.sframe import find_sframe

    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.suffix in (".txt", ".c", ".cc") or not is_elf_file(path):
            continue
        with ElfReader.open(str(path)) as image:
            found = find_sframe(image)
            if found is None:
                continue
            name = "-".join(path.relative_to(corpus).parts)
            (out / f"{name}.sframe").write_bytes(found.stored)
            count += 1
    return count


# ---------------------------------------------------------------------------------------------
# Random engine: structure-aware mutations


_INTERESTING32 = (0, 1, 2, 4, 5, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF)
#: Relative weights of the mutations in :func:`mutate` (FRE bytes most, truncation least).
_WEIGHTS = (3, 3, 1, 1, 0.5, 1, 1, 1, 5)
_INTERESTING8 = (0, 1, 2, 3, 4, 0x0F, 0x10, 0x1F, 0x20, 0x40, 0x60, 0x7F, 0x80, 0xFE, 0xFF)


_HEADER_SPANS = field_spans(HEADER_FIELDS)
_MAGIC_SIZE = _HEADER_SPANS[0][1]


def _fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, width) of the header and FDE fields of a seed that looks like a section."""
    fields = list(_HEADER_SPANS[1:])  # every header field but the magic
    version_at = _MAGIC_SIZE
    if len(data) < HEADER_SIZE or data[version_at] not in Version._value2member_map_:
        return fields
    version = Version(data[version_at])
    big_endian = int.from_bytes(data[:version_at], "little") != SFRAME_MAGIC
    header = dict(zip(HEADER_NAMES, header_struct(big_endian).unpack_from(data), strict=True))
    num_fdes = header["num_fdes"]
    base = HEADER_SIZE + header["auxhdr_len"] + header["fde_off"]
    layout = field_spans(FDE_FIELDS[version])
    for index in range(min(num_fdes, 64)):
        at = base + index * FDE_SIZE[version]
        fields += [(at + off, width) for off, width in layout if at + off + width <= len(data)]
    return fields


def mutate(data: bytes, rng: random.Random, seeds: Sequence[bytes]) -> bytes:
    """One to four random mutations of ``data``."""
    out = bytearray(data)
    for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 4)):
        choice = rng.choices(range(9), _WEIGHTS)[0]
        if choice == 0 and out:  # flip a bit
            at = rng.randrange(len(out))
            out[at] ^= 1 << rng.randrange(8)
        elif choice == 1 and out:  # interesting byte
            out[rng.randrange(len(out))] = rng.choice(_INTERESTING8)
        elif choice in (2, 3):  # a header or FDE field gets an interesting or nearby value
            fields = [f for f in _fields(bytes(out)) if f[0] + f[1] <= len(out)]
            if fields:
                at, width = rng.choice(fields)
                _set_field(out, at, width, rng)
        elif choice == 4 and out:  # truncate
            del out[rng.randrange(len(out)) :]
        elif choice == 5:  # append random bytes
            out += rng.randbytes(rng.randint(1, 32))
        elif choice == 6 and out:  # overwrite a range with bytes from another seed
            other = rng.choice(seeds)
            if other:
                at, src = rng.randrange(len(out)), rng.randrange(len(other))
                chunk = other[src : src + rng.randint(1, 32)]
                out[at : at + len(chunk)] = chunk
        elif choice == 7 and len(out) > 2:  # delete or duplicate a chunk
            at = rng.randrange(len(out))
            length = rng.randint(1, 16)
            if rng.random() < 0.5:
                del out[at : at + length]
            else:
                out[at:at] = out[at : at + length]
        elif choice == 8 and out:  # random byte in the FRE area (the tail)
            at = len(out) - 1 - rng.randrange(min(len(out), 256))
            out[at] = rng.randrange(256)
    return bytes(out)


def _set_field(out: bytearray, at: int, width: int, rng: random.Random) -> None:
    little = int.from_bytes(out[:_MAGIC_SIZE], "little") == SFRAME_MAGIC
    order: Literal["little", "big"] = "little" if little else "big"
    old = int.from_bytes(out[at : at + width], order)
    mask = (1 << (8 * width)) - 1
    pick = rng.randrange(4)
    if pick == 0:
        value = rng.choice(_INTERESTING32)
    elif pick == 1:
        value = old + rng.randint(-17, 17)
    elif pick == 2:
        value = len(out) + rng.randint(-40, 40)
    else:
        value = rng.getrandbits(8 * width)
    out[at : at + width] = (value & mask).to_bytes(width, order)


@dataclass
class Report:
    """What a fuzzing run did."""

    inputs: int = 0
    seconds: float = 0.0
    failures: list[tuple[bytes, str]] = field(default_factory=list)
    slowest: float = 0.0
    worst_memory_ratio: float = 0.0


Mutator = Callable[[bytes, random.Random, Sequence[bytes]], bytes]


def generate(
    seeds: Sequence[bytes], rng: random.Random, mutator: Mutator | None = None
) -> Iterator[bytes]:
    """Endless inputs: each seed once, then mutations of seeds and of earlier mutants."""
    change = mutate if mutator is None else mutator
    yield from seeds
    pool = list(seeds)
    while True:
        parent = rng.choice(pool)
        child = change(parent, rng, seeds)
        if len(pool) < 4096 and rng.random() < 0.05:
            pool.append(child)
        yield child


def run(
    runs: int,
    *,
    seed: int = 0,
    seeds: Sequence[bytes] | None = None,
    time_budget: float | None = None,
    memory_every: int = 1,
    stop_on_failure: bool = False,
    log: Callable[[str], None] | None = None,
    target: str = "section",
) -> Report:
    """Try ``runs`` inputs (or until ``time_budget`` seconds pass) with the random engine.

    ``target``: ``section`` (SFrame sections, :func:`exercise`), ``elf`` or ``cfi`` (see
    :mod:`pysframe.tools.fuzz_targets`); ``seeds`` default to that target's."""
    exercise_target, mutator, default_seeds = _target(target)
    if seeds is None:
        seeds = default_seeds()
    rng = random.Random(seed)
    report = Report()
    began = time.perf_counter()
    seen: set[str] = set()
    for number, data in enumerate(generate(seeds, rng, mutator)):
        out_of_time = time_budget is not None and time.perf_counter() - began > time_budget
        if number >= runs or out_of_time:
            break
        one = time.perf_counter()
        try:
            check_input(
                data,
                memory=memory_every > 0 and number % memory_every == 0,
                target=exercise_target,
            )
        except InvariantError as error:
            key = str(error).splitlines()[-1] if "\n" in str(error) else str(error)[:60]
            if key not in seen:
                seen.add(key)
                report.failures.append((data, str(error)))
                if log:
                    log(f"FAILURE on input {number} ({len(data)} bytes): {error}")
            if stop_on_failure:
                report.inputs = number + 1
                break
        report.slowest = max(report.slowest, time.perf_counter() - one)
        report.inputs = number + 1
        if log and number and number % 10000 == 0:
            log(f"{number} inputs, {time.perf_counter() - began:.0f} s")
    report.seconds = time.perf_counter() - began
    return report


def _target(name: str) -> tuple[Callable[[bytes], object], Mutator, Callable[[], list[bytes]]]:
    """The function, the mutator and the seeds of a target."""
    if name == "section":
        return exercise, mutate, load_seeds
    from .fuzz_targets import TARGETS

    if name not in TARGETS:
        raise ValueError(f"unknown fuzz target {name!r}")
    return TARGETS[name]


# ---------------------------------------------------------------------------------------------
# atheris engine


def run_atheris(argv: list[str], crash_dir: Path) -> None:  # pragma: no cover - long runs only
    """Coverage-guided fuzzing with atheris; invariant failures are saved, not fatal."""
    import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

    crash_dir.mkdir(parents=True, exist_ok=True)
    counter = [0]
    seen: set[str] = set()

    def one_input(data: bytes) -> None:
        counter[0] += 1
        try:
            check_input(data, memory=counter[0] % 16 == 0)
        except InvariantError as error:
            key = str(error).splitlines()[-1]
            if key not in seen:
                seen.add(key)
                name = hashlib.sha1(data).hexdigest()
                (crash_dir / f"{name}.bin").write_bytes(data)
                (crash_dir / f"{name}.txt").write_text(str(error))
                print(f"INVARIANT FAILURE saved as {name}: {key}", flush=True)

    atheris.instrument_all()
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pysframe.tools.fuzz", description=__doc__)
    parser.add_argument("--engine", choices=("random", "atheris"), default="random")
    parser.add_argument(
        "--target",
        choices=("section", "elf", "cfi"),
        default="section",
        help="SFrame sections (default), ELF files or .eh_frame bytes (random engine)",
    )
    parser.add_argument("--runs", type=int, default=100_000, help="inputs to try (random)")
    parser.add_argument("--time", type=float, default=None, help="seconds to run at most")
    parser.add_argument("--seed", type=int, default=0, help="random engine seed")
    parser.add_argument("--seeds", type=Path, default=None, help="directory of *.sframe seeds")
    parser.add_argument("--memory-every", type=int, default=8, help="trace memory every N inputs")
    parser.add_argument("--failures", type=Path, default=Path("fuzz-failures"))
    parser.add_argument("--extract-seeds", type=Path, metavar="CORPUS", default=None)
    args, rest = parser.parse_known_args(argv)
    if args.extract_seeds is not None:
        out = args.seeds or SEEDS_DIR
        print(f"{extract_seeds(args.extract_seeds, out)} seed sections written to {out}")
        return 0
    if args.engine == "atheris":
        # libFuzzer writes new inputs to the first directory; the seeds stay read-only.
        work = args.failures / "corpus"
        work.mkdir(parents=True, exist_ok=True)
        seeds_dir = args.seeds or SEEDS_DIR
        options = [f"-max_total_time={int(args.time)}"] if args.time else []
        limits = ["-max_len=65536", "-timeout=20", "-rss_limit_mb=4096"]
        run_atheris(
            [sys.argv[0], *options, *limits, *rest, str(work), str(seeds_dir)], args.failures
        )
        return 0
    seeds = load_seeds(args.seeds) if args.target == "section" or args.seeds else None
    if seeds is not None and args.target != "section":
        seeds = [p.read_bytes() for p in sorted(args.seeds.iterdir()) if p.is_file()]
    report = run(
        args.runs,
        seed=args.seed,
        seeds=seeds,
        time_budget=args.time,
        memory_every=args.memory_every,
        log=lambda line: print(line, flush=True),
        target=args.target,
    )
    args.failures.mkdir(parents=True, exist_ok=True) if report.failures else None
    for data, message in report.failures:
        name = hashlib.sha1(data).hexdigest()
        (args.failures / f"{name}.bin").write_bytes(data)
        (args.failures / f"{name}.txt").write_text(message)
    print(
        f"{report.inputs} inputs in {report.seconds:.0f} s, {len(report.failures)} distinct "
        f"failures, slowest input {report.slowest:.2f} s"
    )
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
