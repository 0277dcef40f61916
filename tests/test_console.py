"""pyspark-ick web over HTTP (tests/test_console_browser.py drives it in Chromium): every
page renders, a missing name is a 404 that writes nothing, a filter looks a bounded page
at a time, and the safety rules: loopback by default, read-only by default, actions only
for a session signed in with the token and with its CSRF token, no password on a page or
in the log."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from console_support import TOKEN, Session, bury, console, status
from support import ACL_PASSWORD, cli_command

from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.reservations import ReservationLog


def test_every_page_renders_and_a_missing_name_is_a_404_that_writes_nothing(
    redis_url, client, tmp_path
):
    docs = ShardedIck(client, "docs", 2)
    bury(docs, {"bad:1": "Timeout talking to the sink", "bad:2": "bad doc"}, 1_795_866_198.5)
    docs.add({f"doc:{i}": 1_700_000_000.0 + i for i in range(30)})
    docs.add({"reindex:1": 1_600_000_000.0}, lane="backfill")
    log = ReservationLog(client, f"docs:{docs.shard_of('doc:0')}")
    fence = log.lease.acquire("query-indexer", 60_000)
    log.reserve(5, 0, fence)
    Dehydrator(client, "parked", 2).park(["p1", "p2"], ["x", "y"], [0, 60_000])
    ShardedIck(client, "idle", 1).add({"a": 1.0})  # queued, nothing reserved
    drained = Dehydrator(client, "drained", 1)
    drained.push("gone", "x", 0)
    drained.pull("gone")
    with console(redis_url, tmp_path, "--allow-actions", token=TOKEN) as web:
        # an empty part says so once (no table of headings over "none", no 12 empty spans)
        page = Session(web.base).get("/ick?name=idle")[1]
        assert '<p class="dim empty" id="head-reserved">reserved: none</p>' in page
        assert '<p class="dim empty" id="in-flight">none</p>' in page
        page = Session(web.base).get("/dead?ick=idle")[1]
        assert "No dead letters (1 shard)." in page and 'id="letters"' not in page
        page = Session(web.base).get("/dehydrator?name=drained")[1]
        assert page.count("nothing parked") == 2 and "by +" not in page  # histogram, due first
        pages = {
            "/": ["docs", "parked", "query-indexer"],
            "/ick?name=docs": ["doc:0", "query-indexer", "Reservations in flight", "backfill"],
            "/dead?ick=docs": ["bad:1", "Timeout talking to the sink", "bad doc", "from the 1st."],
            "/dead?ick=docs&error=TIMEOUT": ["bad:1"],
            "/dehydrator?name=parked": ["p1", "When the parked elements are due"],
        }
        for path, wanted in pages.items():
            code, page = Session(web.base).get(path)
            assert code == 200, (path, page)
            for text in wanted:
                assert text in page, (path, text)
        assert "bad doc" not in Session(web.base).get("/dead?ick=docs&error=TIMEOUT")[1]
        # a score that is a Unix time shows as a time, as the other columns do
        assert "1,795,866,198" not in Session(web.base).get("/dead?ick=docs")[1]
        assert "2026-11-28 11:43:18Z" in Session(web.base).get("/dead?ick=docs")[1]
        assert "2023-11-14 22:13:20Z" in Session(web.base).get("/ick?name=docs")[1]
        keys = client.dbsize()
        for path in ("/ick?name=nope", "/dead?ick=nope", "/dehydrator?name=nope"):
            code, page = Session(web.base).get(path)
            assert code == 404 and "does not exist" in page, (path, code)
        assert "is a dehydrator" in Session(web.base).get("/ick?name=parked")[1]
        session = Session(web.base)
        assert session.sign_in(TOKEN) == 303
        fields = [("csrf", session.csrf("/")), ("ick", "nope"), ("action", "redrive")]
        code, _ = session.post("/dead/action", [*fields, ("scope", "matching")])
        assert code == 404
        assert client.dbsize() == keys and not client.keys("nope*")


def test_a_filter_looks_at_a_bounded_page_and_says_how_far(redis_url, client, tmp_path):
    letters = {f"m{i:05}": "bad doc" for i in range(12_000)}
    letters["m11999"] = "Timeout talking to the sink"
    bury(ShardedIck(client, "big", 1), letters)
    with console(redis_url, tmp_path) as web:
        session = Session(web.base)
        code, page = session.get("/dead?ick=big&error=timeout")
        assert code == 200
        assert "looked at dead letters 1\u20132000" in page and "found 0 that match" in page
        further = re.search(r'id="further" href="([^"]+)"', page)
        assert further and "at=0%3A2000" in further[1]
        page = session.get(further[1].replace("&amp;", "&"))[1]
        assert "2001\u20134000" in page
        page = session.get("/dead?ick=big&error=timeout&at=0:10500")[1]
        assert "found 1 that match" in page and "m11999" in page
        assert "looked through every shard" in page


def refused(session: Session, fields: list[tuple[str, str]], **headers: str) -> str:
    """Why the console refused the action ``fields`` (a 403)."""
    code, page = session.post("/dead/action", fields, headers)
    assert code == 403, (code, page)
    found = re.search(r'<p class="message">(.*?)</p>', page, re.S)
    assert found, page
    return found[1]


def test_actions_need_actions_allowed_the_token_and_the_csrf_token(redis_url, client, tmp_path):
    ick = ShardedIck(client, "q", 1)
    bury(ick, {"a": "boom", "b": "boom"})
    letters = DeadLetters(ick)
    action = [("ick", "q"), ("action", "purge"), ("scope", "matching")]
    with console(redis_url, tmp_path, token=TOKEN) as web:  # a token, but read-only
        session = Session(web.base)
        assert "read-only" in refused(session, [*action, ("csrf", "x")])
        assert 'id="read-only"' in session.get("/dead?ick=q")[1]
        assert '<form method="post"' not in session.get("/dead?ick=q")[1]
    with console(redis_url, tmp_path, "--allow-actions", token=TOKEN) as web:
        session = Session(web.base)
        csrf = session.csrf()
        assert "sign in" in refused(session, [*action, ("csrf", csrf)])
        assert "CSRF" in refused(session, action)
        code, page = session.post("/signin", [("csrf", csrf), ("token", TOKEN[:-1] + "x")])
        assert code == 403 and "wrong token" in page
        code, page = session.post("/signin", [("token", TOKEN)])  # a sign-in without CSRF
        assert code == 403 and "CSRF" in page
        assert session.sign_in(TOKEN) == 303
        signed_out, csrf = csrf, session.csrf("/")
        assert csrf != signed_out  # a new CSRF token at sign-in; the old one is refused
        assert "CSRF" in refused(session, [*action, ("csrf", signed_out)])
        assert "CSRF" in refused(session, action)  # signed in, but no CSRF token
        assert "CSRF" in refused(session, [*action, ("csrf", "forged")])
        page = refused(session, [*action, ("csrf", csrf)], Origin="http://evil.example")
        assert "another site" in page
        assert sum(letters.count()) == 2  # nothing changed
        code, _ = session.post("/dead/action", [*action, ("csrf", csrf)], {"Origin": web.base})
        assert code == 303 and sum(letters.count()) == 0
        assert "1 dead letters purged" not in web.output()
        assert "2 dead letters of Ick 'q' purged" in web.output()


def test_the_console_starts_safe_or_not_at_all(redis_url, tmp_path, monkeypatch):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cli_command("web", "--port", "1", *args, url=redis_url),
            capture_output=True,
            text=True,
            timeout=60,
        )

    monkeypatch.delenv("PYSPARK_ICK_WEB_TOKEN", raising=False)
    done = run("--allow-actions")
    assert done.returncode == 1 and "PYSPARK_ICK_WEB_TOKEN" in done.stderr
    (tmp_path / "short").write_text("short\n")
    done = run("--allow-actions", "--token-file", str(tmp_path / "short"))
    assert done.returncode == 1 and "at least 16 characters" in done.stderr
    done = run("--allow-actions", "--token", TOKEN)  # never on the command line
    assert done.returncode == 2 and "unrecognized arguments: --token" in done.stderr
    done = run("--allow-actions", "--token-file", TOKEN)  # the token where its file goes
    assert done.returncode == 1 and "cannot read that file" in done.stderr
    assert TOKEN not in done.stderr
    with console(redis_url, tmp_path) as web:
        port = int(web.base.rsplit(":", 1)[1])
        assert "127.0.0.1" in web.output()
        with socket.socket() as other:  # another loopback address: nobody listens there
            other.settimeout(5)
            assert other.connect_ex(("127.0.0.2", port)) != 0
        assert status(web.url("/")) == 200


@pytest.fixture
def password_url(redis_url: str, client: Any) -> Iterator[str]:
    """The standalone server's URL as user ``operator`` with a password (every right)."""
    client.execute_command("ACL", "SETUSER", "operator", "on", f">{ACL_PASSWORD}", "~*", "&*")
    client.execute_command("ACL", "SETUSER", "operator", "+@all")
    yield redis_url.replace("redis://", f"redis://operator:{ACL_PASSWORD}@")
    client.execute_command("ACL", "DELUSER", "operator")


def test_no_password_reaches_a_page_or_the_log(password_url, client, tmp_path):
    other = "rediss://sink:hunter2-pw@search.internal:6380"
    bury(ShardedIck(client, "docs", 1), {"a": f"failed on {password_url}", "b": f"on {other}"})
    with console(password_url, tmp_path) as web:
        session = Session(web.base)
        for path in ("/", "/ick?name=docs", "/dead?ick=docs", "/ick?name=nope"):
            code, page = session.get(path)
            assert code in (200, 404) and ACL_PASSWORD not in page, path
            assert "hunter2" not in page, path
        assert "docs" in session.get("/")[1] and "operator" not in session.get("/")[1]
        client.execute_command("ACL", "SETUSER", "operator", "-sscan")  # a page that fails
        code, page = session.get("/")
        assert code == 503 and "sscan" in page and ACL_PASSWORD not in page
    assert ACL_PASSWORD not in web.output() and "operator:***@" in web.output()
