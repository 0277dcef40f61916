"""Makes the screenshots of docs/console.md: a throwaway Redis with an Ick consumed for a
minute (a producer and a consumer thread, so the plots have a shape), dead letters of two
errors, a dehydrator; the console in this process (as ``pyspark-ick web --allow-actions``
runs it) and Debian's Chromium through Selenium.

Run: ``python docs/img/screenshots.py [--seconds 60]``; writes docs/img/console-*.png.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from console_support import TOKEN, bury, chromium  # noqa: E402

from pyspark_ick import Dehydrator, ShardedIck, connect  # noqa: E402
from pyspark_ick.reservations import ReservationLog  # noqa: E402
from pyspark_ick.testing import free_port, start_binary  # noqa: E402
from pyspark_ick.web.app import create_app  # noqa: E402
from pyspark_ick.web.history import History, Sampler  # noqa: E402

ERRORS = {
    "Timeout talking to the sink: POST /docs/_bulk took more than 30 s": 14,
    "ValueError: document has no title\n  File indexer.py, line 42, in to_doc": 6,
}


def traffic(client: object, stop: threading.Event) -> None:
    """A producer that dirties documents in bursts and a consumer of shard 0..3 that
    reserves and commits, slower than the producer at first, then faster."""
    docs = ShardedIck(client, "dirty_docs", 4)
    logs = [ReservationLog(client, f"dirty_docs:{i}") for i in range(4)]
    fences = [log.lease.acquire("query-3f9a", 30_000) for log in logs]
    heads = [0] * 4
    started = time.monotonic()
    n = 0
    while not stop.is_set():
        burst = 400 if time.monotonic() - started < 25 else 40
        now = time.time()
        docs.add({f"doc:{random.randrange(200_000)}": now for _ in range(burst)})
        n += 1
        for i, log in enumerate(logs):
            end = log.reserve(60 + 20 * (n % 3), heads[i], fences[i]).head
            log.commit(end, fences[i])
            heads[i] = end
        stop.wait(0.25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="traffic before the shots")
    args = parser.parse_args(argv)
    server = start_binary()
    client = connect(server.url)
    stop = threading.Event()
    try:
        docs = ShardedIck(client, "dirty_docs", 4)
        listed = [error for error, n in ERRORS.items() for _ in range(n)]
        errors = {f"doc:{900_000 + k}": error for k, error in enumerate(listed)}
        bury(docs, errors, score=time.time() - 3600)
        ShardedIck(client, "search_sync", 2).add({f"user:{k}": time.time() for k in range(50)})
        parked = Dehydrator(client, "parked_children", 2)
        ids = [f"child:{k}" for k in range(600)]
        parked.park(
            ids,
            [f'{{"parent": "p{k % 40}"}}' for k in range(600)],
            [random.randrange(1_800_000) if k % 5 else 0 for k in range(600)],
        )
        history = History(1.0)
        sampler = Sampler(client, history, str)
        app = create_app(
            client,
            history,
            token=TOKEN,
            allow_actions=True,
            where=server.url.rsplit("/", 1)[0],
            scrub=str,
            passwords=[],
        )
        from waitress import create_server

        web = create_server(app, host="127.0.0.1", port=free_port(), threads=4)
        threading.Thread(target=web.run, daemon=True).start()
        threading.Thread(target=traffic, args=(client, stop), daemon=True).start()
        sampler.start()
        time.sleep(args.seconds)
        base = f"http://127.0.0.1:{web.effective_port}"
        browser = chromium()
        try:
            browser.set_window_size(1280, 1100)
            browser.get(base + "/signin")
            browser.find_element("name", "token").send_keys(TOKEN)
            browser.find_element("css selector", "main form button").click()
            time.sleep(1)
            shots = {
                "overview": "/",
                "ick": "/ick?name=dirty_docs",
                "dead-letters": "/dead?ick=dirty_docs&error=timeout",
                "dehydrator": "/dehydrator?name=parked_children",
            }
            for name, path in shots.items():
                browser.get(base + path)
                if name == "dead-letters":
                    browser.find_element("css selector", "#letters summary").click()
                height = browser.execute_script("return document.body.scrollHeight")
                browser.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {
                        "width": 1280,
                        "height": min(height, 2400),
                        "deviceScaleFactor": 1,
                        "mobile": False,
                    },
                )
                browser.save_screenshot(str(HERE / f"console-{name}.png"))
                print(f"wrote {HERE / f'console-{name}.png'}")
        finally:
            browser.quit()
        sampler.stop()
        web.close()
    finally:
        stop.set()
        client.close()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
