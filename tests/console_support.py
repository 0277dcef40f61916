"""What the console's tests share: a console started by the CLI (``pyspark-ick web``) as a
process of this test, an HTTP session that keeps its cookie, dead letters made by the
plain client, and Chromium driven by Selenium (Debian's chromium and chromium-driver)."""

from __future__ import annotations

import http.cookiejar
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support import cli_command

from pyspark_ick import ShardedIck
from pyspark_ick.retries import RetryPolicy
from pyspark_ick.testing import free_port, wait_until

TOKEN = "console-test-token-0123456789"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
)


class Console:
    """A running ``pyspark-ick web``: its base URL and its process (ours)."""

    def __init__(self, base: str, process: subprocess.Popen[str], log: Path) -> None:
        self.base, self.process, self.log = base, process, log

    def url(self, path: str) -> str:
        return self.base + path

    def output(self) -> str:
        """What the console printed so far (stdout and stderr)."""
        return self.log.read_text()


@contextmanager
def console(
    redis_url: str, tmp_path: Path, *flags: str, token: str | None = None
) -> Iterator[Console]:
    """Start ``pyspark-ick --url REDIS_URL web`` on a free port with ``flags`` (the token,
    if any, in a file: never on the command line); stopped (its process, by handle) after."""
    port = free_port()
    log = tmp_path / f"console-{port}.log"
    args = ["web", "--port", str(port), "--sample-every", "0.5", *flags]
    if token is not None:
        (tmp_path / "token").write_text(token + "\n")
        args += ["--token-file", str(tmp_path / "token")]
    with log.open("w") as out:
        process = subprocess.Popen(
            cli_command(*args, url=redis_url), stdout=out, stderr=subprocess.STDOUT, text=True
        )
    found = Console(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until(
            lambda: process.poll() is not None or status(found.url("/")) is not None,
            timeout=60,
            what="the console to answer",
        )
        assert process.poll() is None, found.output()
        yield found
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def status(url: str) -> int | None:
    """The HTTP status of GET ``url``; None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


class Session:
    """An HTTP client of one console that keeps its session cookie, as a browser would."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect()
        )

    def get(self, path: str) -> tuple[int, str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(
        self, path: str, fields: list[tuple[str, str]], headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        body = urllib.parse.urlencode(fields).encode()
        return self._open(
            urllib.request.Request(self.base + path, data=body, headers=headers or {})
        )

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=30) as reply:
                return int(reply.status), reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def csrf(self, path: str = "/signin") -> str:
        """The CSRF token this session's pages carry."""
        _, page = self.get(path)
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found, page
        return found[1]

    def sign_in(self, token: str) -> int:
        return self.post("/signin", [("csrf", self.csrf()), ("token", token)])[0]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Leave a 303 as it is: the test reads it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def bury(ick: ShardedIck, errors: dict[str, str], score: float = 1.0) -> None:
    """Make dead letters of ``errors``' members (member -> error): added, reserved, failed
    on their one allowed attempt (the plain client's fail)."""
    ick.add({m: score for m in errors})
    for i in range(ick.shards):
        while reserved := [m for m, _ in ick.shard(i).reserve(1000) if m in errors]:
            ick.fail({m: errors[m] for m in reserved}, RetryPolicy(max_attempts=1))


def chromium() -> Any:
    """A headless Chromium (Debian's) driven by Selenium through Debian's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
