"""URLs for output: every credential a URL can carry masked, by one function that every output path calls.

A URL reaches output from the database setting (`postgresql://u:pw@h/db?password=…&sslpassword=…`), the Hub
endpoint (`https://user:pw@mirror/…?token=…`) and webhook subscriptions (Slack, Discord and Teams put the token in
the path). Where the credentials end is read the way the database engine reads it, by SQLAlchemy's `make_url`: a
password may hold `/`, `?`, `#` and `:` unescaped (`postgresql://u:Pa/ss?w#rd@db/…` connects with `Pa/ss?w#rd`), so
the first `/` does not end it. A URL with a password, and one the parser refuses (a bad port, an unbalanced `[`),
is masked up to its last `@`: a raw `@` in a password makes the parser take the rest for host or database, so
this may mask more than the credentials but never less. The rest (query, path, fragment) is split by hand, as
the one thing a masking function must never do is give the raw text back.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

MASK = "***"

# Query parameter names that carry a credential: password, sslpassword, passwd, pwd, token, access_token, key,
# api_key, sslkey, secret, client_secret, auth, authorization, credential(s), signature, sig, session, cookie, jwt.
_SECRET_NAME = re.compile(r"pass|pwd|token|key|secret|auth|credential|sig|session|cookie|jwt|bearer", re.IGNORECASE)
# Schemes whose bare userinfo is a user name, not a token: SQLAlchemy database URLs.
_NAMED_USER_SCHEMES = frozenset({"postgresql", "postgresql+psycopg", "postgresql+psycopg2", "postgres", "mysql",
                                 "mysql+pymysql", "sqlite"})
# Leading path segments made only of letters (`/services`, `/api/webhooks`) are shown; from the first other one
# (an id, a token) on, and always the last of several, they are masked.
_PLAIN_SEGMENT = re.compile(r"[A-Za-z_-]{1,24}")


def _mask_query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, equals, _value = part.partition("=")
        if not equals:
            # A bare value (`?hf_abc…`) is shown only when empty.
            parts.append(part and MASK)
        elif _SECRET_NAME.search(unquote_plus(name)):
            parts.append(f"{name}={MASK}")
        else:
            parts.append(part)
    return "&".join(parts)


def _mask_path(path: str) -> str:
    segments = [segment for segment in path.split("/") if segment]
    shown: list[str] = []
    keeping = True
    for index, segment in enumerate(segments):
        last_of_several = index == len(segments) - 1 and len(segments) > 1
        keeping = keeping and bool(_PLAIN_SEGMENT.fullmatch(segment)) and not last_of_several
        shown.append(segment if keeping else MASK)
    return "/" + "/".join(shown)


def _credentials_end(scheme: str, rest: str) -> int:
    """Where the userinfo of `rest` (the URL after `scheme://`) ends: the index of its closing `@`, or -1."""
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    by_hand = rest.rfind("@", 0, end)
    try:
        parsed = make_url(f"{scheme}://{rest}")
    except (ArgumentError, ValueError):
        # Unreadable even to the database engine: everything up to the last `@` may be credentials.
        return rest.rfind("@")
    if parsed.password is None:
        return by_hand
    # A password runs from after `user:` to an `@`; which one is not knowable when it holds a raw `@` (the parser
    # takes the first, making the rest host or database), so the credentials run to the last `@` of all.
    return rest.rfind("@")


def mask_url(url: str, *, path_is_secret: bool = False) -> str:
    """`url` for output: the password of `user:password@`, every query parameter named like a credential, and
    the fragment masked.

    A bare user name is shown for a database URL (`postgresql://drafters@db/…`), masked for any other.
    `path_is_secret` is for webhook URLs, whose path and query may themselves be the credential: token-like path
    segments and the whole query are masked too."""
    text = str(url)
    scheme, separator, rest = text.partition("://")
    if not separator:
        scheme, rest = "", text
    closing = _credentials_end(scheme, rest)
    userinfo, at, after = (rest[:closing], "@", rest[closing + 1:]) if closing >= 0 else ("", "", rest)
    end = min((i for i in (after.find("/"), after.find("?"), after.find("#")) if i >= 0), default=len(after))
    # Without a scheme or credentials, `a/b` has no authority.
    hostport, tail = (after[:end], after[end:]) if separator or at else ("", after)
    tail, hash_mark, fragment = tail.partition("#")
    path, question_mark, query = tail.partition("?")

    if at:
        user, colon, _password = userinfo.partition(":")
        if path_is_secret or not user:
            userinfo = MASK
        elif colon:
            userinfo = f"{user}:{MASK}"
        elif scheme.lower() not in _NAMED_USER_SCHEMES:
            userinfo = MASK  # `https://TOKEN@host`: a bare userinfo in a web URL is a token
    if path_is_secret and path:
        path = _mask_path(path)
    if path_is_secret and query:
        query = MASK
    elif query:
        query = _mask_query(query)

    shown = (f"{scheme}://" if separator else "") + (f"{userinfo}@" if at else "") + hostport + path
    if question_mark:
        shown += "?" + query
    if hash_mark:
        shown += "#" + (MASK if fragment else "")
    return shown


def scrub(text: str, url: str) -> str:
    """`text` (a driver's error message about `url`) with every piece of the URL's password masked: the password
    as the parser read it, and, when it holds a raw `@`, the pieces the parser took for host or database
    (`could not translate host name "ss"`): everything `mask_url` masks."""
    raw = str(url)
    scheme, separator, rest = raw.partition("://")
    closing = _credentials_end(scheme, rest) if separator else -1
    if closing < 0:
        return text
    secret = rest[:closing].partition(":")[2]
    pieces = {secret, *re.split(r"[@/?#:]", secret)}
    try:
        pieces.add(make_url(raw).password or "")  # decoded (`%2F` written, `/` quoted back)
    except (ArgumentError, ValueError):
        pass
    for piece in sorted(pieces, key=len, reverse=True):
        if len(piece) >= 2:  # a single character is no secret and would garble the message
            text = text.replace(piece, MASK)
    return text
