"""The console in a real browser (issue 42, item 3): Debian's Chromium driven by Selenium
through Debian's chromedriver. The overview lists a live Ick and plots it; dead letters
filtered by an error and re-driven are delivered by a running stream; a hostile member
name is text; an action from a read-only console, without the token or from another site
is refused and changes nothing."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import TOKEN, bury, chromium, console
from support import Sink, stop_all, stream

from pyspark_ick import Dehydrator, ShardedIck
from pyspark_ick.dead_letters import DeadLetters
from pyspark_ick.testing import free_port, wait_until

pytestmark = pytest.mark.slow  # Chromium through Selenium

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chromium()
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def click(driver: Any, element: Any) -> str:
    """Click ``element`` and wait for the page it leads to; returns that page's text."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    old = driver.find_element("tag name", "html")
    element.click()
    WebDriverWait(driver, 60).until(expected_conditions.staleness_of(old))
    return str(driver.find_element("tag name", "main").text)


def by_id(driver: Any, element_id: str) -> list[Any]:
    return driver.find_elements("id", element_id)


def sign_in(driver: Any, base: str, token: str) -> str:
    """Sign in on the console's page; returns the text of the page it lands on."""
    driver.get(base + "/signin")
    if not driver.find_elements("name", "token"):  # read-only: nothing to sign in to
        return driver.find_element("tag name", "main").text
    driver.find_element("name", "token").send_keys(token)
    return click(driver, driver.find_element("css selector", "main form button"))


def test_the_overview_lists_a_live_ick_and_its_plot_has_points(
    redis_url, client, tmp_path, browser
):
    live = ShardedIck(client, "live_docs", 2)
    live.add({f"doc:{i}": 1_700_000_000.0 + i for i in range(40)})
    first = live.shard(0)  # five members committed: their waits are a freshness figure
    first.commit(*[member for member, _ in first.reserve(5)])
    with console(redis_url, tmp_path) as web:

        def plotted() -> int | None:
            browser.get(web.url("/"))
            sections = browser.find_elements("css selector", "section.ick")
            mine = [
                s for s in sections if s.find_element("tag name", "h2").text.startswith("live_docs")
            ]
            if not mine:
                return None
            live.add({f"more:{len(browser.current_url)}": 1.0})  # the backlog moves
            points = mine[0].find_element("css selector", "svg").get_attribute("data-points")
            return int(points) if int(points) >= 3 else None

        assert wait_until(plotted, timeout=60, interval=0.5, what="a plot with points") >= 3
        section = browser.find_element("css selector", "section.ick")
        assert section.find_element("css selector", "td.backlog").text in ("35", "36")
        line = section.find_element("css selector", "svg polyline").get_attribute("points")
        assert len(line.split()) >= 3
        # beside the backlog: the freshness p50 and p99 of the same samples
        freshness_plotted(section)
        browser.get(web.url("/ick?name=live_docs"))
        freshness_plotted(browser)


def freshness_plotted(page: Any) -> None:
    """The freshness p50 and p99 plots of ``page`` (an element or the whole page) have
    points and show 3600 s: members that waited since 2023 are in the +Inf bucket, whose
    percentile is its lower bound."""
    figures = {
        f.find_element("tag name", "figcaption").text.split(":")[0]: f
        for f in page.find_elements("css selector", "figure.plot")
    }
    for label in ("freshness p50", "freshness p99"):
        svg = figures[label].find_element("tag name", "svg")
        assert int(svg.get_attribute("data-points")) >= 1, label
        assert "3,600 s" in figures[label].find_element("tag name", "figcaption").text, label


def test_dead_letters_filtered_by_an_error_and_re_driven_are_delivered_by_a_running_stream(
    spark, redis_url, client, tmp_path, browser
):
    orders = ShardedIck(client, "orders", 2)
    timeouts = {f"t:{i}": "Timeout talking to the sink after 30 s" for i in range(6)}
    bad = {f"v:{i}": "ValueError: bad doc" for i in range(4)}
    bury(orders, {**timeouts, **bad})
    sink = Sink()
    options = {"redis.url": redis_url, "ick": "orders", "shards": "2"}
    query = stream(spark, "ick", options, sink, str(tmp_path / "ckpt"))
    try:
        query.processAllAvailable()
        assert sink.values() == set()  # dead letters are not in the queue
        with console(redis_url, tmp_path, "--allow-actions", token=TOKEN) as web:
            assert "signed in" in sign_in(browser, web.base, TOKEN)
            browser.get(web.url("/dead?ick=orders"))
            browser.find_element("name", "error").send_keys("timeout")
            click(browser, browser.find_element("id", "filter"))
            rows = browser.find_elements("css selector", "#letters td.member")
            assert sorted(r.text for r in rows) == sorted(timeouts)
            assert "found 6 that match" in browser.find_element("id", "looked").text
            for box in browser.find_elements("css selector", "#letters input[type=checkbox]"):
                box.click()
            page = click(browser, browser.find_element("id", "redrive-selected"))
            assert "6 dead letters re-driven (selected)" in page

            def delivered() -> bool:
                query.processAllAvailable()
                return sink.values() == set(timeouts)

            wait_until(delivered, timeout=60, interval=0.2, what="the re-driven members")
            letters = sorted(d.member for d in DeadLetters(orders).read())
            assert letters == sorted(bad)  # the other error's stay dead
            browser.get(web.url("/dead?ick=orders"))
            shown = browser.find_elements("css selector", "#letters td.member")
            assert sorted(r.text for r in shown) == sorted(bad)
    finally:
        stop_all(query)


def test_a_hostile_member_name_renders_as_text(redis_url, client, tmp_path, browser):
    ick = ShardedIck(client, "hostile", 1)
    bury(ick, {HOSTILE: "<script>alert(2)</script> failed"})
    ick.add({HOSTILE + "queued": 1.0, "plain": 2.0})
    Dehydrator(client, "later", 1).park([HOSTILE], [HOSTILE], [60_000])
    from selenium.common.exceptions import NoAlertPresentException

    with console(redis_url, tmp_path) as web:
        for path in ("/", "/ick?name=hostile", "/dead?ick=hostile", "/dehydrator?name=later"):
            browser.get(web.url(path))
            text = browser.find_element("tag name", "main").text
            assert browser.find_elements("tag name", "img") == [], path
            assert browser.find_elements("tag name", "script") == [], path
            with pytest.raises(NoAlertPresentException):
                browser.switch_to.alert.text  # noqa: B018 - no alert ran
            if path != "/":
                assert HOSTILE in text, path
        browser.get(web.url("/dead?ick=hostile"))
        browser.find_element("css selector", "#letters summary").click()  # opens in place
        shown = browser.find_element("css selector", "#letters pre").text
        assert shown == "<script>alert(2)</script> failed"


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Another site on 127.0.0.1 (a port of its own) serving ``tmp_path/site``: (its URL,
    its folder)."""
    folder = tmp_path / "site"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", folder
    server.shutdown()
    server.server_close()


def forged(folder: Path, console_base: str) -> str:
    """A page of another site whose button posts 'purge all' to the console, as a
    cross-site request forgery would; returns its file name."""
    (folder / "forged.html").write_text(
        f'<form method="post" action="{console_base}/dead/action">'
        + "".join(
            f'<input type="hidden" name="{k}" value="{v}">'
            for k, v in (("ick", "q"), ("action", "purge"), ("scope", "matching"), ("csrf", "x"))
        )
        + '<button id="go">win a prize</button></form>'
    )
    return "forged.html"


def refusal(browser: Any) -> str:
    assert browser.find_element("tag name", "h1").text == "Refused"
    return browser.find_element("css selector", "p.message").text


def test_an_action_without_the_token_or_in_read_only_mode_is_refused_and_changes_nothing(
    redis_url, client, tmp_path, browser, other_site
):
    site, folder = other_site
    ick = ShardedIck(client, "q", 1)
    bury(ick, {f"m{i}": "boom" for i in range(5)})
    letters = DeadLetters(ick)
    with console(redis_url, tmp_path, token=TOKEN) as web:  # read-only (a token is set)
        browser.get(web.url("/dead?ick=q"))
        assert by_id(browser, "read-only") and not by_id(browser, "redrive-selected")
        assert "read-only" in sign_in(browser, web.base, TOKEN)
        browser.get(f"{site}/{forged(folder, web.base)}")
        click(browser, browser.find_element("id", "go"))
        assert "read-only" in refusal(browser)
    with console(redis_url, tmp_path, "--allow-actions", token=TOKEN) as web:
        browser.delete_all_cookies()
        browser.get(web.url("/dead?ick=q"))
        assert not by_id(browser, "redrive-selected") and not by_id(browser, "purge-matching")
        assert "wrong token" in sign_in(browser, web.base, "not-the-token-at-all")
        browser.get(f"{site}/{forged(folder, web.base)}")
        click(browser, browser.find_element("id", "go"))
        assert "another site" in refusal(browser)
        assert "signed in" in sign_in(browser, web.base, TOKEN)
        browser.get(f"{site}/{forged(folder, web.base)}")  # signed in: still refused
        click(browser, browser.find_element("id", "go"))
        assert "another site" in refusal(browser)
        assert sum(letters.count()) == 5  # nothing changed
        browser.get(web.url("/dead?ick=q"))
        page = click(browser, browser.find_element("id", "purge-matching"))  # its own form
        assert "5 dead letters purged" in page
        assert sum(letters.count()) == 0
