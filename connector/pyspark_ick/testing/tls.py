"""A throwaway TLS-only Redis (``tls_redis_server()``, ``rediss://``) with a CA made for it,
and whether a server binary can serve TLS at all (docs/security.md)."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from ..errors import IckError
from .servers import (
    HOST,
    THROWAWAY,
    RedisServer,
    free_port,
    running,
    server_binary,
    start_binary,
    wait_until,
)


def make_certificates(directory: str | Path) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost (openssl CLI).

    Returns the paths: ``ca`` (the CA certificate clients trust), ``cert`` and ``key``.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise IckError("the openssl command is needed to make test certificates")
    d = Path(directory)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (d / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
    )
    steps = [
        [
            "req",
            "-x509",
            *ec,
            "-days",
            "2",
            "-subj",
            "/CN=pyspark-ick test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
        ["req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr"],
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    ]
    for step in steps:
        done = subprocess.run([openssl, *step], cwd=d, capture_output=True, text=True)
        if done.returncode:
            raise IckError(f"openssl {step[0]} failed: {done.stderr.strip()[-300:]}")
    return {"ca": str(d / "ca.crt"), "cert": str(d / "server.crt"), "key": str(d / "server.key")}


def tls_only(port: int, certs: dict[str, str]) -> list[str]:
    """The arguments of a server that listens on TLS ``port`` only, with ``certs``."""
    files = {"--tls-cert-file": "cert", "--tls-key-file": "key", "--tls-ca-cert-file": "ca"}
    return [
        "--port",
        "0",
        "--tls-port",
        str(port),
        *(x for f in files for x in (f, certs[files[f]])),
    ]


def tls_supported(binary: str | None = None) -> bool:
    """True when ``binary`` (default: ``server_binary()``) can serve TLS: started with only a
    TLS port, it listens. A build without TLS refuses the ``tls-port`` setting (6.2) or
    exits with "Failed finding TLS support" (7.2+ and Valkey built with TLS as a module that
    is not loaded); any other exit is an error."""
    binary = binary or server_binary()
    with tempfile.TemporaryDirectory(prefix="pyspark-ick-tls-probe-") as directory:
        certs = make_certificates(directory)
        port = free_port()
        process = subprocess.Popen(
            [binary, *tls_only(port, certs), "--bind", HOST, *THROWAWAY, "--dir", directory],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

        def settled() -> str | None:
            if process.poll() is not None:
                return "exited"
            with socket.socket() as s:
                s.settimeout(0.5)
                return "listening" if s.connect_ex((HOST, port)) == 0 else None

        try:
            state = wait_until(settled, timeout=15, what=f"{binary} with a TLS port")
        finally:
            if process.poll() is None:
                process.kill()
            output = process.communicate(timeout=10)[0].decode(errors="replace")
    if state == "listening":
        return True
    if re.search(r"TLS support|connection type tls|'tls-port", output):
        return False
    raise IckError(f"{binary} exited when started with a TLS port: {output[-500:]}")


def start_tls(binary: str | None = None) -> RedisServer:
    """A redis-server that speaks only TLS (``rediss://``), with a CA made for it.

    Clients need no certificate of their own; ``server.extra["ssl_ca_certs"]`` is the CA
    file a client must trust.
    """
    certs_dir = tempfile.mkdtemp(prefix="pyspark-ick-tls-")
    try:
        certs = make_certificates(certs_dir)
        port = free_port()
        server = start_binary(
            binary,
            *tls_only(port, certs),
            "--tls-auth-clients",
            "no",
            port=port,
            scheme="rediss",
            extra={"ssl": True, "ssl_ca_certs": certs["ca"]},
        )
    except BaseException:
        shutil.rmtree(certs_dir, ignore_errors=True)
        raise
    server.stopper = lambda: shutil.rmtree(certs_dir, ignore_errors=True)
    return server


def tls_redis_server() -> contextlib.AbstractContextManager[RedisServer]:
    """A throwaway TLS-only Redis for the duration of the block."""
    return running(start_tls)
