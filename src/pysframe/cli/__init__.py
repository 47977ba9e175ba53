"""The ``pysframe`` command: one sub-command per module of this package.

Each sub-command module defines ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed arguments and returning the exit status.
Exit status: 0 success, 1 failure (bad input, findings), 2 usage error.

The sub-commands: ``dump``, ``info``, ``lookup``, ``check``, ``verify``, ``generate``,
``compact``, ``repair``, ``stats``, ``stack``, ``perf`` (with ``perf script``, ``report``
and ``stats``) and ``cache`` (what the cache holds; ``--clear``).  Beside them: ``options``
(the options several sub-commands share, declared once), ``report`` (every line written on
stderr: errors, warnings, notes), ``usage`` (usage errors), ``progress`` (the progress bar)
and ``shell_files`` (the man page and shell completions, generated from the parser).
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from ..errors import SFrameError
from . import report
from .usage import CommandParser, UsageError

#: The variable that sets how many threads numpy's BLAS starts (OpenBLAS, which numpy's
#: wheels ship: driver/others/openblas_env.c reads it and memory.c, blas_get_cpu_number,
#: starts that many threads when the library loads, that is when numpy is first imported).
#: Each thread spins a while before it sleeps: about 0.1 s of CPU at each command's start on
#: a 2-CPU machine, for nothing (pysframe does no linear algebra).
BLAS_THREADS = "OPENBLAS_NUM_THREADS"

#: The number of new container objects after which Python's cyclic collector runs during a
#: command (Python's own is 700).  A command makes many objects that live as long as it
#: (modules, classes, tables) and few reference cycles: each run of the collector traverses
#: the objects made since the last, twice over their first runs, for nothing; at 700 that is
#: some 20 ms of CPU of a small report (8 of them in numpy's import), 5 to 7% of a report of
#: 30,000 samples.  Cycles are still collected, 100,000 objects apart.
GC_THRESHOLD = 100_000

#: Sub-command modules, in the order ``--help`` lists them.
COMMANDS = (
    "dump", "info", "lookup", "generate", "check", "stack", "stats", "verify", "compact", "repair",
    "perf", "cache",
)  # fmt: skip


def build_parser(
    command: str | None = None, subcommand: str | None = None
) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``command`` alone (its module only is imported),
    and of its ``subcommand`` alone where its module names it among its ``SUBCOMMANDS``
    (``perf script``: the parsers of ``perf report`` and ``perf stats`` are not made)."""
    parser = CommandParser(
        prog="pysframe", description="Read, write, generate and use SFrame stack-trace sections."
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"pysframe {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if command is None else (command,):
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            continue
        if subcommand is not None and subcommand in getattr(module, "SUBCOMMANDS", ()):
            module.register(subparsers, subcommand)
        else:
            module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pysframe`` with ``argv``; the exit status: 0, 1 failure, 2 usage, 130 Ctrl-C.

    Every error that stops a command is one ``pysframe: ...`` line on stderr, written by
    :mod:`pysframe.cli.report` (as are the errors of single files a command goes on after).

    numpy's BLAS is asked for one thread (:data:`BLAS_THREADS`) when numpy is not imported yet
    and the user set no number; the processes a command starts (its workers, the demangler)
    inherit it.  A program that uses pysframe as a library is left alone.  Python's cyclic
    collector runs less often while the command runs (:data:`GC_THRESHOLD`)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS, "1")
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
    try:
        return _main(argv)
    except KeyboardInterrupt:  # at any point, start-up included: no traceback
        return 130
    except UsageError as error:
        report.line(str(error))
        return 2
    except MemoryError:
        report.line("out of memory")
        return 1
    except Exception as error:  # a defect of pysframe: still one line, and how to report it
        report.line(
            f"internal error: {type(error).__name__}: {error} (please report this, with the "
            "command and its input)"
        )
        return 1
    finally:
        gc.set_threshold(*thresholds)  # as it was, for a program that called main()


def command() -> int:
    """The ``pysframe`` program (``python -m pysframe`` and the installed command): :func:`main`
    of the process's arguments, then every object left frozen for Python's cyclic collector
    (:func:`gc.freeze`), which would otherwise traverse them all, several times over, as the
    interpreter exits (some 0.03 s of a small report's CPU time); the exit itself, its
    ``atexit`` functions and finalizers, goes on as before."""
    status = main()
    gc.freeze()
    return status


def _main(argv: Sequence[str] | None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    # The first word not starting with "-" names the sub-command (the top-level options take
    # no value): import that module alone, which saves a large part of the start-up time.
    at = next((at for at, word in enumerate(arguments) if not word.startswith("-")), None)
    first = arguments[at] if at is not None else None
    if first in COMMANDS:  # and the word after it: its own sub-command, if it has them
        assert at is not None
        parser = build_parser(first, arguments[at + 1] if at + 1 < len(arguments) else None)
    else:
        parser = build_parser()
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    _drop_earlier_cache_warnings()
    try:
        _refuse_standard_output_over_inputs(args)
        status: int = args.func(args)
        sys.stdout.flush()
    except SFrameError as error:
        _cache_warnings()
        report.report_error(error.at(path=_only_input(args, error)), args)
        return 1
    except BrokenPipeError:
        _quiet_broken_pipe()
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        if error.errno == errno.EPIPE:
            _quiet_broken_pipe()
            return 0
        report.line(f"{error.filename or _output_name(args)}: {error.strerror or error}")
        return 1
    _cache_warnings()
    return status


def _refuse_standard_output_over_inputs(args: argparse.Namespace) -> None:
    """OutputError when standard output is redirected onto one of the command's input files
    (``pysframe dump prog >> prog``): text written there would damage it
    (:func:`pysframe.output.refuse_inputs`)."""
    from ..output import STDOUT, refuse_inputs

    refuse_inputs(STDOUT, _inputs(args))


def _drop_earlier_cache_warnings() -> None:
    """Forget the cache's warnings that wait from before this command (library calls earlier
    in this process): a command warns of what it met itself."""
    cache = sys.modules.get("pysframe.sources.cache")
    if cache is not None:
        cache.take_warnings()


def _cache_warnings() -> None:
    """Warn with what the cache of generated SFrame found wrong (an entry not used, a directory
    not trusted), once each; nothing to say when the command did not use the cache."""
    cache = sys.modules.get("pysframe.sources.cache")
    if cache is not None:
        for warning in cache.take_warnings():
            report.warn(warning)


def _output_name(args: argparse.Namespace) -> str:
    """What a write error that names no file was writing: the ``-o`` file, else standard
    output (the files pysframe opens by name raise errors that carry it)."""
    output = getattr(args, "output", None)
    return str(output) if isinstance(output, str) and output != "-" else "standard output"


def _only_input(args: argparse.Namespace, error: SFrameError) -> str | None:
    """The command's input file when it has exactly one (an error that names no file is about
    it: ``pysframe: FILE: what``), else None."""
    inputs = _inputs(args)
    if len(inputs) != 1 or error.message.startswith(f"{inputs[0]}:"):
        return None
    return str(inputs[0])


def _inputs(args: argparse.Namespace) -> list[str]:
    """The input files named on the command line (``FILE`` or ``FILE...``)."""
    given = getattr(args, "files", None)
    return [args.file] if isinstance(getattr(args, "file", None), str) else list(given or [])


def _quiet_broken_pipe() -> None:
    """Output went into a closed pipe (``| head``): end quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(command())
