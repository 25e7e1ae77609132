"""The Hub watcher: polls, leases, Hub-to-spec translation, events, and the Hub webhook endpoint."""
