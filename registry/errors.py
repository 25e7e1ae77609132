"""The one error base of the project: every error meant for the user carries its exit status.

Any layer raises a subclass; the command line (drafters/cli/__init__.py) turns any `DraftersError` into one line
on stderr and `exit_code`, so no command translates one error class into another to choose a status.
"""

from __future__ import annotations


class DraftersError(Exception):
    """An error whose message is one line for the user; the CLI exits with `exit_code`."""

    exit_code: int = 1


class UserError(DraftersError):
    """A mistake the user can fix (an argument, a file, a setting): exit status 2."""

    exit_code = 2


class Failed(DraftersError):
    """The command ran and did not succeed (a failed run, every org unreachable, a missing repo): exit status 1."""

    exit_code = 1


class Partial(DraftersError):
    """The command did part of its work and recorded it; the rest failed and is retried later: exit status 3, so a
    scheduler can tell "some repos failed" from "nothing worked" (1) and from success (0)."""

    exit_code = 3
