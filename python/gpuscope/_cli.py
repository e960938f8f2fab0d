"""The gpuscope command line: ``gpuscope COMMAND ...``, also ``python -m
gpuscope COMMAND ...``.

    gpuscope doctor [--json] [--save FILE] [--baseline FILE]
    gpuscope compare [options] BASE NEW
    gpuscope run [options] (script.py | -m module) [args...]
    gpuscope analyze [options] TRACE
    gpuscope prometheus {rules ... | dashboard ...}

One argparse parser with a subcommand each; ``gpuscope COMMAND --help``
gives the options, what the command does and its exit status. Each
command's options are defined beside what it does: doctor's and compare's
in ``_commands.py`` (``gpuscope run --baseline`` takes compare's from
there), run's in ``_runner.py``. ``__main__`` only calls main(); nothing
imports this module back.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from . import _analyze, _commands, _runner
from .prometheus import _cli as _prometheus_cli
from ._text import printable

COMMANDS = ("doctor", "compare", "run", "analyze", "prometheus")  # in the usage's order

DESCRIPTION = "gpuscope: where a training loop's step time goes and why the GPU is idle."
EPILOG = "gpuscope COMMAND --help gives a command's options and exit status."


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line: one subcommand per COMMANDS."""
    parser = argparse.ArgumentParser(prog="gpuscope", description=DESCRIPTION, epilog=EPILOG, allow_abbrev=False)
    # prog given: argparse would otherwise build the subcommands' prog from
    # this parser's usage, which is set below.
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True,
                                prog="gpuscope")
    specs = {
        "doctor": (_commands.DOCTOR_HELP, _commands.DOCTOR_EPILOG, _commands.DOCTOR_USAGE,
                   _commands.add_doctor_arguments, _commands.doctor),
        "compare": (_commands.COMPARE_HELP, _commands.COMPARE_EPILOG, _commands.COMPARE_USAGE,
                    _commands.add_compare_arguments, _commands.compare),
        "run": (_runner.HELP, _runner.EPILOG, _runner.USAGE, _runner.add_arguments, _runner.run),
        "analyze": (_analyze.HELP, _analyze.EPILOG, _analyze.USAGE, _analyze.add_arguments, _analyze.run),
        "prometheus": (_prometheus_cli.HELP, _prometheus_cli.EPILOG, _prometheus_cli.USAGE,
                       _prometheus_cli.add_arguments, _prometheus_cli.run),
    }
    usages = []
    for name in COMMANDS:
        help_text, epilog, usage, add_arguments, func = specs[name]
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog,
                           usage=f"%(prog)s {usage}", formatter_class=argparse.RawDescriptionHelpFormatter,
                           # run takes whole option names only, as it always has. With
                           # abbreviations on, argparse (Python 3.11 at least) also checks
                           # the script's arguments, and one such as --p (--peak-flops or
                           # --prometheus?) would stop the run as ambiguous.
                           allow_abbrev=name != "run")
        add_arguments(p)
        p.set_defaults(func=func, command_parser=p)
        usages.append(f"gpuscope {name} {usage}")
    parser.usage = "\n       ".join(usages)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line (``sys.argv[1:]`` when ``argv`` is None) and
    returns the exit status: usage errors 2, ``--help`` 0, otherwise the
    command's own."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args_list:
        parser.print_usage(sys.stderr)
        return 2
    first = args_list[0]
    if first not in COMMANDS and first not in ("-h", "--help"):
        # Said here rather than by argparse: the commands named, and what to do.
        what = "option" if first.startswith("-") else "command"
        print(f"gpuscope: unknown {what} {printable(first)!r}; the commands are {', '.join(COMMANDS)}, "
              "each with its options after it (gpuscope COMMAND --help)", file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 2
    try:
        args, extras = parser.parse_known_args(args_list)
        if extras:  # the command's (it came first): with its usage, not the whole parser's
            args.command_parser.error(f"unrecognized arguments: {' '.join(printable(a) for a in extras)}")
    except SystemExit as e:  # argparse: --help (0) or a usage error (2, its message printed)
        return e.code if isinstance(e.code, int) else 2
    if args.command == "run":
        # The script's exit status, output and exceptions are its own: none
        # of the handling below applies.
        return _runner.run(args)
    return _commands.guarded(args.command, args.func, args)
