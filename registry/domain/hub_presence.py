"""Whether a recorded checkpoint or drafter is still on the Hub, in words (pure).

The watcher marks a repo that was deleted or made private `gone` and keeps its history (revisions, verdicts,
runs). Everything that lists it (find, check, lag, the dashboard) then says so beside it, with the day it was
found gone: a drafter that can no longer be downloaded must never read as available.
"""

from __future__ import annotations

import re
from datetime import date

GONE = "gone"
# The status detail the watcher writes: "<why>; gone since YYYY-MM-DD". Records marked before this module
# existed say "last seen YYYY-MM-DD" (the same day: when the watcher found it missing).
_SINCE = re.compile(r"(?:gone since|last seen) (\d{4}-\d{2}-\d{2})")


def gone_detail(why: str, day: date) -> str:
    return f"{why}; gone since {day.isoformat()}"


def gone_since(detail: str | None) -> date | None:
    found = _SINCE.search(detail or "")
    if found is None:
        return None
    try:
        return date.fromisoformat(found.group(1))
    except ValueError:
        return None


def gone_marker(status: str | None, detail: str | None) -> str | None:
    """"gone from the Hub since 2026-05-02" for a repo marked gone, None for one still there."""
    if status != GONE:
        return None
    since = gone_since(detail)
    return "gone from the Hub" + (f" since {since.isoformat()}" if since else "")
