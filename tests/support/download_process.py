"""A download in its own process, for tests that kill it with SIGKILL midway.

    python -m tests.support.download_process DATABASE_URL ENDPOINT ROOT REPO SHA

Prints `{"started": true}` once the Hub client exists, then downloads REPO at SHA into ROOT through the service's
downloader (ledger, budget) and prints `{"done": PATH}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from registry.hub import HubClient
from registry.hub.download import Downloader
from registry.store import Store


def main() -> None:
    database_url, endpoint, root, repo, sha = sys.argv[1:6]
    store = Store.open(database_url)
    client = HubClient(endpoint, None, Path(root) / "client-cache", timeout=30.0)
    print(json.dumps({"started": True}), flush=True)
    fetched = Downloader(store, client, Path(root), 10 * 2**30).fetch(repo, sha)
    print(json.dumps({"done": str(fetched.path)}), flush=True)


if __name__ == "__main__":
    main()
