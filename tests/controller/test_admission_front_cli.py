"""`fleetplane controller admission-front`: its command line (serving is tested in
test_admission_front / the policies' race test)."""

from __future__ import annotations

import argparse

from controller import cli


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_the_command_needs_tls_and_opa() -> None:
    args = _parse(
        ["controller", "admission-front", "--tls-cert", "c", "--tls-key", "k", "--opa-url", "u"]
    )
    assert args.listen == "0.0.0.0:8443"
    assert args.opa_url == "u"


def test_a_listen_without_port_is_bad_usage() -> None:
    args = _parse(
        [
            "controller",
            "admission-front",
            "--listen",
            "nohost",
            "--tls-cert",
            "c",
            "--tls-key",
            "k",
            "--opa-url",
            "u",
        ]
    )
    assert args.run(args) == 2
