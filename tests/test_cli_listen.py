"""The CLI's servers (``web``, ``metrics``) when the OS refuses them: a port in use, an
address that is not this machine's, a token file that cannot be read; each is one line
on stderr and exit 1, never a traceback. And the address they print, IPv6 in brackets.
The failures run in this process (``main``): nothing is served."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest
from support import cli_command

from pyspark_ick.cli import main
from pyspark_ick.listen import host_port, loopback
from pyspark_ick.testing import free_port


def one_line(capsys: pytest.CaptureFixture[str], code: int, *argv: str) -> str:
    """The one line ``pyspark-ick ARGV`` printed on stderr, exiting ``code``."""
    try:
        assert main(list(argv)) == code
    except SystemExit as exc:  # argparse's bad usage
        assert exc.code == code
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert code == 2 or "\n" not in err, err
    return err


@pytest.fixture
def held_port() -> Iterator[int]:
    """A 127.0.0.1 port this test listens on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("command", ["web", "metrics"])
def test_a_port_in_use_is_one_line(redis_url, capsys, held_port, command):
    said = one_line(capsys, 1, "--url", redis_url, command, "--port", str(held_port))
    assert f"cannot listen on 127.0.0.1:{held_port}" in said, said
    assert "in use" in said and "--port" in said, said


@pytest.mark.parametrize("command", ["web", "metrics"])
@pytest.mark.parametrize("address", ["192.0.2.1", "999.1.1.1"])
def test_an_address_not_of_this_machine_is_one_line(redis_url, capsys, command, address):
    said = one_line(capsys, 1, "--url", redis_url, command, "--port", "8642", "--bind", address)
    assert f"--bind {address!r} is no address of this machine" in said, said


def test_a_port_out_of_range_is_bad_usage(capsys):
    for command in ("web", "metrics"):
        assert "expected a port from 1 to 65535" in one_line(capsys, 2, command, "--port", "70000")


def test_an_unreadable_token_file_is_one_line(redis_url, capsys, tmp_path):
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00token")
    for path, needle in ((tmp_path, "Is a directory"), (tmp_path / "binary", "not UTF-8")):
        said = one_line(capsys, 1, "--url", redis_url, "web", "--token-file", str(path))
        assert said.startswith("pyspark-ick: error: --token-file:") and needle in said, said


def test_an_ipv6_address_is_printed_in_brackets(redis_url):
    assert host_port("::1", 9464) == "[::1]:9464"  # metrics' line
    assert host_port("127.0.0.1", 9464) == "127.0.0.1:9464"
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    process = subprocess.Popen(
        cli_command("web", "--bind", "::1", "--port", str(free_port()), url=redis_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the line it prints once it listens (or EOF)
        assert "http://[::1]:" in line, (line, process.stderr.read() if not line else "")
        port = int(line.split("http://[::1]:", 1)[1].split("/", 1)[0])
        with socket.create_connection(("::1", port), timeout=10):
            pass  # it listens where it says
    finally:
        process.terminate()
        process.wait(20)


def test_loopback_is_127_0_0_0_8_and_ipv6_and_localhost(redis_url, capsys, held_port):
    assert all(map(loopback, ("127.0.0.1", "127.0.0.2", "::1", "localhost", "LOCALHOST")))
    assert not any(map(loopback, ("0.0.0.0", "::", "10.0.0.1", "example.com")))
    for command in ("web", "metrics"):  # both read every name's recorded count
        argv = ("--url", redis_url, command, "--shards", "2", "--port", str(held_port))
        assert "unrecognized arguments: --shards" in one_line(capsys, 2, *argv)
