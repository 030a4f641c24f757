"""argparse's reading of a command line, as the reference the CLI's fast argument paths are
compared with (test_check_args.py, test_compile_args.py)."""

from __future__ import annotations


def parsed(parser, argv: list[str]):
    """The Namespace `parser` makes of `argv`, or "error" where argparse would exit."""

    def error(message):
        raise ValueError(message)
    parser.error = error
    try:
        return parser.parse_args(argv)
    except (ValueError, SystemExit):
        return "error"
