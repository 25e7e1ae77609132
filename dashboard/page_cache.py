"""The dashboard's one cache: what a page shows, kept per database and arguments for a short while.

The table functions of dashboard/queries.py (and plan_queries.py) carry `@kept(ttl_s)`: inside a Streamlit script
run they are `st.cache_data`, keyed by their arguments and, for the read object, by its database URL (two
databases never share an entry), so moving between pages and widgets does not read the database again. Outside a
script run (tests, benchmarks, the scale-out check) they read the database on every call, as any function does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from registry.store.read_queries import ReadOnlyQueries

# Long enough that moving between pages and widgets is instant, short enough that a watcher's news shows soon.
TTL_S = 60
# The service's parts, its queue and the downloads move: what shows them is kept for less.
LIVE_TTL_S = 10

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _database(db: ReadOnlyQueries) -> str:
    return db.url


def kept(ttl_s: float = TTL_S) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """`function` cached for `ttl_s` seconds within the dashboard's script runs (see the module's docstring)."""
    def wrap(function: Callable[_P, _R]) -> Callable[_P, _R]:
        # Made on the first call in a script run: made at import, st.cache_data warns of no runtime in every
        # process that only imports the module (the command line, the benchmarks).
        cached: list[Callable[_P, _R]] = []

        @functools.wraps(function)
        def read(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if get_script_run_ctx(suppress_warning=True) is None:
                return function(*args, **kwargs)
            if not cached:  # two threads may both make one: they share one store (keyed by the function)
                cached.append(st.cache_data(ttl=ttl_s, show_spinner=False,
                                            hash_funcs={ReadOnlyQueries: _database})(function))
            return cached[0](*args, **kwargs)
        return read
    return wrap
