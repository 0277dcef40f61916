"""What keeps the console safe: the action token (from the environment or a file, never
the command line), the CSRF token of a browser session, and the checks an action passes
before it changes anything."""

from __future__ import annotations

import hmac
import os
import re
import secrets
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

from ..errors import IckConfigError

CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s/:@\"'<>]*:)[^\s/@\"'<>]+@")
"""The password of a credentialed URL (``scheme://user:password@``) in any text."""

TOKEN_ENV = "PYSPARK_ICK_WEB_TOKEN"
MIN_TOKEN = 16  # characters: a token short enough to guess is refused at start


def load_token(token_file: str | None) -> str | None:
    """The action token: the first line of ``token_file``, else ``$PYSPARK_ICK_WEB_TOKEN``,
    else None. IckConfigError when it is shorter than MIN_TOKEN characters."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as exc:  # the path is not repeated: it might be the token itself
            raise IckConfigError(
                f"--token-file: cannot read that file ({exc.strerror}): give a readable file "
                "whose first line is the token"
            ) from None
        except UnicodeDecodeError:
            raise IckConfigError(
                "--token-file: that file is not UTF-8 text: give a file whose first line is "
                "the token"
            ) from None
        source = "--token-file"
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        source = f"${TOKEN_ENV}"
        if not token:
            return None
    if len(token) < MIN_TOKEN:
        raise IckConfigError(
            f"{source}: the action token must be at least {MIN_TOKEN} characters "
            '(e.g. python3 -c "import secrets; print(secrets.token_urlsafe(24))")'
        )
    return token


def same(given: str | None, expected: str | None) -> bool:
    """Whether ``given`` is ``expected`` (compared in constant time; None never is)."""
    return bool(given and expected) and hmac.compare_digest(
        str(given).encode(), str(expected).encode()
    )


def csrf_token(session: Any) -> str:
    """The CSRF token of this browser session (made on first use)."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return str(session["csrf"])


def rotate_csrf(session: Any) -> None:
    """A new CSRF token for a session that just signed in: a token seen before (in a page
    cached or shown while signed out) authorizes no action."""
    session["csrf"] = secrets.token_urlsafe(32)


def refusal(
    allowed: bool, session: Any, form: Any, origin: str | None, host: str, sign_in: bool = True
) -> str | None:
    """Why an action must be refused (None: it may run): actions not allowed (read-only),
    a foreign Origin, no CSRF token or another one, a session not signed in with the
    token (unless ``sign_in`` is false: the sign-in itself)."""
    if not allowed:
        return "this console is read-only: start it with --allow-actions (and a token)"
    if origin is not None and origin.rstrip("/").split("://", 1)[-1] != host:
        return f"the request came from another site ({origin})"
    if not same(form.get("csrf"), session.get("csrf")):
        return "the form's CSRF token is missing or stale: reload the page and try again"
    if sign_in and not session.get("signed_in"):
        return "sign in with the action token first"
    return None


def without_secrets(page: str, passwords: Iterable[str]) -> str:
    """``page`` (HTML) with ``passwords`` (as written and HTML-escaped) and the password
    of any credentialed URL replaced by ``***``: an error a sink recorded may hold one."""
    for value in passwords:
        page = page.replace(value, "***").replace(escape(value), "***")
    return CREDENTIALS.sub(r"\1***@", page)
