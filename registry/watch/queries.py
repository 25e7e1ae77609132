"""What one poll unit lists: a watched org (`OrgQuery`), or a Hub-wide drafter query (`DrafterQuery`: a tag, or a
word of the repo name as `search:<word>`).

Each unit has one row of its own in the watch state (lease, cursor, failures): an org's row is its name, a tag's
`tag:<tag>`, a name search's `search:<word>`. The poller branches on the query's type, never on a row's prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from registry import hub

QUERY_PREFIX = "tag:"  # rows of tag queries are named tag:<tag>; a name search's row is the query itself
# Listed once per poll, so drafters of publishers nobody watches are found too: by tag or library name, and by a
# word of the repo name (`search:<word>`). The Hub's tag filter matches a tag exactly and tags keep the case their
# author gave them (nvidia/Kimi-K2.7-Code-DFlash is tagged `DFlash`, not `dflash`), while its search matches repo
# ids whatever their case: a drafter tagged in any spelling but named for its method is found by the name.
DRAFTER_QUERIES = ("dflash", "eagle3", "speculators", "speculative-decoding",
                   *(f"{hub.SEARCH_PREFIX}{word}" for word in ("dflash", "dspark", "eagle3", "speculator")))


@dataclass(frozen=True)
class OrgQuery:
    """A watched org: every public model of it is recorded, checkpoints and drafters."""

    org: str
    drafters_only: ClassVar[bool] = False

    @property
    def row(self) -> str:
        return self.org


@dataclass(frozen=True)
class DrafterQuery:
    """A Hub-wide listing (`query` as the Hub client takes it: a tag, or `search:<word>`): only drafters of orgs
    nobody watches are recorded from it."""

    query: str
    drafters_only: ClassVar[bool] = True  # the `speculative-decoding` tag carries targets too: none is recorded

    @property
    def row(self) -> str:
        return self.query if self.query.startswith(hub.SEARCH_PREFIX) else f"{QUERY_PREFIX}{self.query}"


PollQuery = OrgQuery | DrafterQuery


def poll_queries(orgs: list[str], drafter_queries: tuple[str, ...]) -> list[PollQuery]:
    """One poll's units in order: the watched orgs, then the drafter queries."""
    return [OrgQuery(org) for org in orgs] + [DrafterQuery(query) for query in drafter_queries]


def drafter_queries_text(queries: tuple[str, ...] = DRAFTER_QUERIES) -> str:
    tags = [q for q in queries if not q.startswith(hub.SEARCH_PREFIX)]
    words = [q[len(hub.SEARCH_PREFIX):] for q in queries if q.startswith(hub.SEARCH_PREFIX)]
    return f"tagged {', '.join(tags)}" + (f", or named for {', '.join(words)} in any case" if words else "")
