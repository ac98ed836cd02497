"""`fleetplane render`: the data document OPA and the controller read, from a stack's
configuration."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_CODES = "exit status: 0 rendered; 2 the stack file is missing or its configuration is invalid."


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `render` to a command line's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "render",
        help="print a stack's OPA data document (data.fleetplane.config)",
        description="Print the OPA data document (data.fleetplane.config) of a stack: every "
        f"default filled in, the shape of docs/contracts.md. {EXIT_CODES}",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--stack", help="stack name: stacks/Pulumi.<stack>.yaml of the project you stand in"
    )
    source.add_argument("--stack-file", type=Path, help="a stack configuration file")
    parser.add_argument("--out", type=Path, help="write to this file instead of stdout")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from fleet.config import ConfigError, load_stack_config
    from fleet.project import stack_file
    from fleet.render import render_opa_data

    path = args.stack_file or stack_file(args.stack)
    try:
        config = load_stack_config(path)
    except FileNotFoundError:
        print(f"render: no such stack file: {path}", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"render: {error}", file=sys.stderr)
        return 2
    text = json.dumps(render_opa_data(config), indent=2) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
