"""URLs for output: every credential a URL can carry masked, by one function that every output path calls.

A URL reaches output from the database setting (`postgresql://u:pw@h/db?password=…&sslpassword=…`), the Hub
endpoint (`https://user:pw@mirror/…?token=…`) and webhook subscriptions (Slack, Discord and Teams put the token in
the path). The URL is split by hand rather than by a URL library: a library refuses some malformed URLs (a bad
port, an unbalanced `[`), and the one thing a masking function must never do is give the raw text back.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

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
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    # Without a scheme, `user:pw@host/…` still has an authority; `a/b` does not.
    authority, tail = (rest[:end], rest[end:]) if separator or "@" in rest[:end] else ("", rest)
    tail, hash_mark, fragment = tail.partition("#")
    path, question_mark, query = tail.partition("?")

    userinfo, at, hostport = authority.rpartition("@")
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
