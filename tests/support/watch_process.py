"""One watch poll in a process of its own, for the test that kills it with SIGKILL half-way.

    python -m tests.support.watch_process DB_URL HUB_URL CACHE_DIR ORG [ORG ...]

Prints "polling" just before the poll starts (so a test can time its kill from there) and, if it gets that far,
"done N" with N the number of Hub requests, or "errors: ..." when an org stopped. Exit status 0 only when every
org was polled without an error.
"""

from __future__ import annotations

import sys
from pathlib import Path

from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import Watcher

# Every run uses the same lease owner: a restarted watcher takes over its killed predecessor's leases instead of
# waiting for them to expire.
OWNER = "watch-process"


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    database_url, hub_url, cache_dir, *orgs = argv
    store = Store.open(database_url)
    client = HubClient(hub_url, None, Path(cache_dir), timeout=5.0, max_retries=2, backoff_base=0.01,
                       backoff_cap=0.05)
    watcher = Watcher(store, client, orgs, owner=OWNER)
    print("polling", flush=True)
    report = watcher.poll_once()
    if report.errors:
        print(f"errors: {report.errors}", flush=True)
        return 1
    print(f"done {report.requests}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
