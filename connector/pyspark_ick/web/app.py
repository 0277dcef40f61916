"""The console's Flask application: pages (overview, Ick, dead letters, dehydrator), the
sign-in with the action token, and the dead-letter actions. Every page reads through
pages.py; every action passes guard.refusal first and changes Redis only through
DeadLetters. Templates autoescape: a member, error or name is always text."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import redis
from flask import (
    Flask,
    flash,
    get_flashed_messages,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.exceptions import HTTPException

from ..dead_letters import Cursor, DeadLetters
from ..errors import IckConfigError, IckError
from ..existence import Missing
from ..lanes import is_time, lane_of, time_of
from ..observe import age
from ..redis_errors import in_cli_terms, translate
from ..sharded import ShardedIck
from ..values import as_bytes
from ..words import noun_for, ordinal, plural
from . import guard, pages, plots
from .history import History, throughput

logger = logging.getLogger("pyspark_ick.web")

MODES = {"redrive": "re-driven", "purge": "purged"}
SELECTED_MOST = 10_000  # members one "selected" action names, at most
MATCHING_MOST = 1_000_000  # dead letters one "all that match" action looks at, at most
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer makes Chromium send "Origin: null"
    "Cache-Control": "no-store",
}


def fmt_age(seconds: float | None) -> str:
    """A duration for people: 4.2s, 3m05s, 2h07m, 3d04h ("-" for None)."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    return f"{hours // 24}d{hours % 24:02d}h"


def fmt_when(ms: float | None) -> str:
    """A time in ms since the epoch as UTC text."""
    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + "Z"


def fmt_number(value: float | None) -> str:
    if value is None:
        return "-"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}".rstrip("0").rstrip(".")


def fmt_score(score: float | None) -> str:
    """A score as the other columns show theirs: a Unix time (``lanes.is_time``) as UTC
    text, "(backfill)" after one of the backfill lane; any other score as a number."""
    if score is None:
        return "-"
    if not is_time(score):
        return fmt_number(score)
    return fmt_when(time_of(score) * 1000) + (" (backfill)" if lane_of(score) == "backfill" else "")


def score_age(score: float | None, now: float) -> str:
    """How long ago a score that is a Unix time was, either lane (``observe.age``; "-" for
    any other score, or one a day ahead)."""
    seconds = None if score is None else age(now, time_of(score))
    return "-" if seconds is None else fmt_age(seconds)


def fmt_plural(count: int, noun: str, many: str | None = None) -> str:
    """``count`` (thousands separated) and ``noun``, plural unless it is 1: "1 dead letter"."""
    return f"{fmt_number(count)} {noun_for(count, noun, many)}"


def parse_cursor(raw: str | None) -> Cursor:
    """``"<shard>:<index>"`` (the dead-letter page's ``at``) as a Cursor."""
    if not raw:
        return Cursor()
    shard, _, index = raw.partition(":")
    if not (shard.isdigit() and index.isdigit()):
        raise IckConfigError(f"at={raw!r}: expected <shard>:<position>, e.g. 0:5000")
    return Cursor(int(shard), int(index))


def create_app(
    client: Any,
    history: History,
    *,
    token: str | None,
    allow_actions: bool,
    where: str,
    scrub: Callable[[str], str],
    passwords: list[str],
) -> Flask:
    """The console for ``client``; ``where`` names the Redis (no credentials), ``scrub``
    takes any password out of an error's text, and no page holds one of ``passwords`` or
    a credentialed URL (guard.without_secrets)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.urandom(32),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        MAX_CONTENT_LENGTH=4 * 1024 * 1024,
    )
    actions = allow_actions and token is not None
    app.jinja_env.filters.update(
        age=fmt_age,
        when=fmt_when,
        number=fmt_number,
        plural=fmt_plural,
        ordinal=ordinal,
        score=fmt_score,
        score_age=score_age,
    )

    @app.context_processor
    def common() -> dict[str, Any]:
        return {
            "where": where,
            "actions": actions,
            "signed_in": bool(session.get("signed_in")),
            "csrf": guard.csrf_token(session) if actions else "",
            "messages": get_flashed_messages(),
            "sample_error": history.last_error,
        }

    @app.after_request
    def headers(response: Any) -> Any:
        response.headers.update(HEADERS)
        if response.mimetype == "text/html" and not response.direct_passthrough:
            response.set_data(guard.without_secrets(response.get_data(as_text=True), passwords))
        return response

    @app.errorhandler(Missing)
    def missing(exc: Missing) -> Any:
        return render_template("message.html", title="Not found", text=str(exc)), 404

    @app.errorhandler(IckConfigError)
    def bad_request(exc: IckConfigError) -> Any:
        return render_template("message.html", title="Bad request", text=scrub(str(exc))), 400

    @app.errorhandler(IckError)
    @app.errorhandler(redis.RedisError)
    def redis_failed(exc: Exception) -> Any:
        if isinstance(exc, redis.RedisError):
            exc = translate(exc)
        text = in_cli_terms(scrub(str(exc)))
        if where not in text:  # every error that depends on the server names it
            text += f" (Redis at {where})"
        logger.warning("console: %s: %s", request.path, text)
        return render_template("message.html", title="Redis did not answer", text=text), 503

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        return render_template("message.html", title=exc.name, text=exc.description), exc.code

    def plots_of(kind: str, name: str, now: float, wide: bool = False) -> dict[str, Any]:
        points = history.series(kind, name)
        size = {"width": 600, "height": 120} if wide else {}
        return {
            "backlog": plots.line([(p.t, p.backlog) for p in points], now, **size),
            "oldest": plots.line([(p.t, p.oldest_s) for p in points], now, **size),
            "throughput": plots.line(throughput(points), now, **size),
            "fresh_p50": plots.line([(p.t, p.fresh_p50_s) for p in points], now, **size),
            "fresh_p99": plots.line([(p.t, p.fresh_p99_s) for p in points], now, **size),
        }

    @app.get("/")
    def overview() -> Any:
        seen = pages.overview(client, request.args.get("from", ""))
        history.record(seen)
        now = seen["server_time"]
        for kind in ("ick", "dehydrator"):
            for report in seen[kind]:
                report["plots"] = plots_of(kind, report["name"], now)
        return render_template("overview.html", seen=seen, now=now)

    @app.get("/ick")
    def ick() -> Any:
        name = request.args.get("name", "")
        page = pages.ick_page(client, name, where)
        page["plots"] = plots_of("ick", name, page["now"], wide=True)
        return render_template("ick.html", name=name, page=page)

    @app.get("/dead")
    def dead() -> Any:
        name = request.args.get("ick", "")
        error = request.args.get("error", "")
        member = request.args.get("member", "")
        cursor = parse_cursor(request.args.get("at"))
        page = pages.dead_page(client, name, error, member, cursor, where)
        following = page["scan"].next
        further = None
        if following is not None:
            at = f"{following.shard}:{following.index}"
            further = "/dead?" + urlencode(
                {"ick": name, "error": error, "member": member, "at": at}
            )
        return render_template(
            "dead.html",
            name=name,
            error=error,
            member=member,
            page=page,
            further=further,
            hexed=lambda m: as_bytes(m).hex(),
        )

    @app.post("/dead/action")
    def dead_action() -> Any:
        form = request.form
        why = guard.refusal(actions, session, form, request.headers.get("Origin"), request.host)
        if why:
            logger.warning("console: an action was refused: %s", why)
            return render_template("message.html", title="Refused", text=why), 403
        name, mode = form.get("ick", ""), form.get("action", "")
        if mode not in MODES:
            raise IckConfigError(f"action={mode!r}: expected redrive or purge")
        shards = pages.ick_shards(client, name, where)  # Missing: a 404, nothing written
        letters = DeadLetters(ShardedIck(client, name, shards))
        error, member = form.get("error", ""), form.get("member", "")
        if form.get("scope") == "matching":
            applied = letters.apply_matching(mode, error=error, member=member, most=MATCHING_MOST)
            done = applied.done
            note = "" if applied.finished else f" (looked at {applied.looked:,}: run it again)"
        else:
            chosen = form.getlist("m")[:SELECTED_MOST]
            try:
                members = [bytes.fromhex(m) for m in chosen]
            except ValueError:
                raise IckConfigError("a selected member is not what this page sent") from None
            done = letters.redrive(members) if mode == "redrive" else letters.purge(members)
            note = ""
        what = "all that match" if form.get("scope") == "matching" else "selected"
        logger.warning(
            "console: %s of Ick %r %s (%s; error filter %r, member filter %r)",
            plural(done, "dead letter"),
            name,
            MODES[mode],
            what,
            error,
            member,
        )
        flash(f"{fmt_plural(done, 'dead letter')} {MODES[mode]} ({what}){note}")
        return redirect(
            "/dead?" + urlencode({"ick": name, "error": error, "member": member}), code=303
        )

    @app.get("/dehydrator")
    def dehydrator() -> Any:
        name = request.args.get("name", "")
        page = pages.dehydrator_page(client, name, where)
        page["plots"] = plots_of("dehydrator", name, page["now"], wide=True)
        page["bars"] = plots.bars(page["histogram"]["counts"])
        return render_template("dehydrator.html", name=name, page=page)

    @app.route("/signin", methods=["GET", "POST"])
    def signin() -> Any:
        if request.method == "GET":
            return render_template("signin.html")
        origin = request.headers.get("Origin")
        why = guard.refusal(actions, session, request.form, origin, request.host, sign_in=False)
        if why:
            return render_template("message.html", title="Refused", text=why), 403
        if not guard.same(request.form.get("token"), token):
            logger.warning("console: a sign-in with a wrong token was refused")
            return render_template("message.html", title="Refused", text="wrong token"), 403
        session["signed_in"] = True
        guard.rotate_csrf(session)
        flash("signed in: actions are allowed in this browser until you sign out")
        return redirect(url_for("overview"), code=303)

    @app.post("/signout")
    def signout() -> Any:
        if guard.same(request.form.get("csrf"), session.get("csrf")):
            session.clear()
        return redirect(url_for("overview"), code=303)

    return app
