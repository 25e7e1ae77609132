"""What every page shares: the database's read object (one per URL, from `st.cache_resource`), the sanitizers of
outside text, the grid helpers and the labels. The tables come from dashboard/queries.py, called with the read
object. The dashboard never writes: its connections refuse writes (see registry.store.read_only.open_read_only),
and nothing here calls a Store command.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

from dashboard import queries
from dashboard.cells import SPEEDUP_COLUMNS, SPEEDUP_FORMAT, speedup_text, verdict_style
from registry.domain.ref_labels import ref_label
from registry.redact import mask_url
from registry.settings import get_settings
from registry.store.db import DatabaseError
from registry.store.read_queries import ReadOnlyQueries

def database_url() -> str:
    return get_settings().resolved_database_url


def shown_url(url: str) -> str:
    """The URL with every credential masked, for the page footer."""
    return mask_url(url)


def feed_path() -> Path:
    """Where `drafters feed` writes the Atom feed by default."""
    return get_settings().home_dir / "feed.atom"


def today() -> date:
    return datetime.now(UTC).date()


@st.cache_resource(show_spinner=False)
def reader(url: str) -> ReadOnlyQueries:
    """The read object of the database at `url`, one per URL for the dashboard's process."""
    return ReadOnlyQueries(url)


def require_database() -> ReadOnlyQueries:
    """The database's read object once the database exists at the current schema; otherwise say how to make it,
    and stop."""
    url = database_url()
    try:
        db = reader(url)
        problem = db.schema_problem()
    except DatabaseError as exc:
        problem = str(exc)
    except SQLAlchemyError as exc:
        problem = f"cannot open the database: {_one_line(exc)}"
    if problem is not None:
        st.info(md(problem))
        st.caption(f"database: {md(shown_url(url))}")
        st.stop()
    return db


EMPTY = "-"
# Everything Streamlit's Markdown gives a meaning to: emphasis, code, links, lists, headings, tables, HTML,
# LaTeX ($), and `:color[...]` directives (through the brackets).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=])")
# What GitHub-flavoured Markdown links by itself, escapes or not (its autolinker reads the text after escapes are
# resolved): `scheme://`, `www.` and `user@host`.
_AUTOLINK = re.compile(r"(?<=[A-Za-z]:)(?=//)|(?<=\b[Ww]{3})(?=\.)|(?<=@)")
# A word joiner (U+2060, invisible) breaks each of those patterns without changing what is read.
_JOINER = "\u2060"


def plain(value: object) -> str:
    """Outside text made inert for any widget, Markdown or not (selectbox options, labels): every control and
    format character (Unicode Cc and Cf: the bidirectional overrides and isolates that reorder what is shown
    around them, zero-width characters, soft hyphens, tag characters) and line or paragraph separator becomes a
    space."""
    return "".join(" " if unicodedata.category(c) in _INERT_CATEGORIES else c for c in str(value))


_INERT_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def md(value: object) -> str:
    """The one sanitizer of outside text for Markdown (st.markdown, st.info, st.caption, `help=` tooltips): Hub
    names, config values, reasons, paths shown literally, and never as a live link."""
    return _MARKDOWN.sub(r"\\\1", _AUTOLINK.sub(_JOINER, plain(value)))


def option_label(ref: str) -> str:
    """A repo id or local folder as a selectbox option (plain text, no Markdown): its short name, inert."""
    return plain(ref_label(ref))


def _one_line(error: BaseException) -> str:
    return " ".join(str(getattr(error, "orig", None) or error).split())


@contextmanager
def guard(what: str) -> Iterator[None]:
    """A failing section shows one line saying what failed instead of a traceback; the rest of the page runs."""
    try:
        yield
    except SQLAlchemyError as exc:
        st.error(f"{what}: database error: {md(_one_line(exc))}")
    except Exception as exc:  # noqa: BLE001 - a page must never raise
        st.error(f"{what} failed: {type(exc).__name__}: {md(_one_line(exc))}")


def _cell_text(value: object, column: object = None) -> str:
    if isinstance(value, float) and column in SPEEDUP_COLUMNS:
        return speedup_text(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M") if (value.hour, value.minute) != (0, 0) else value.strftime("%Y-%m-%d")
    return str(value)


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame for a grid: an empty cell reads as a dash, not `None`. A column with gaps becomes text (one type,
    so Arrow takes it as it is); columns without gaps keep their type, and their sorting."""
    frame = frame.copy()
    for column in frame.columns:
        values = frame[column]
        missing = values.isna()
        if missing.any():
            frame[column] = [EMPTY if gap else _cell_text(value, column) for value, gap in zip(values, missing)]
    return frame


def dataframe(frame: pd.DataFrame, *, styled: Sequence[str] = (), **kwargs: object) -> object:
    """st.dataframe over `shown(frame)`; every speedup column formatted as "0.41×" unless the caller configures it;
    the `styled` columns coloured by the verdict each cell starts with."""
    config = dict(kwargs.pop("column_config", None) or {})  # type: ignore[call-overload]
    grid = shown(frame)
    for column, setting in config.items():
        # A link column keeps its gaps: a dash would read as a link to "-".
        if column in frame.columns and isinstance(setting, dict) and setting.get("type_config", {}).get("type") == "link":
            grid[column] = frame[column].astype(object).where(frame[column].notna(), None)
    for column in grid.columns:
        # A column with gaps is already text ("0.41×", "-"); a full one stays a number, formatted by the grid.
        if column in SPEEDUP_COLUMNS and column not in config and pd.api.types.is_numeric_dtype(grid[column]):
            config[column] = st.column_config.NumberColumn(column, format=SPEEDUP_FORMAT,
                                                           help="tok/s with ÷ without the drafter; 1× is break-even")
    body: object = grid.style.map(verdict_style, subset=list(styled)) if styled else grid
    return st.dataframe(body, column_config=config or None, **kwargs)  # type: ignore[arg-type]


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """A table's `target` and `drafter` columns as people read them: local folders by their label, not their path."""
    return frame.assign(**{column: [ref_label(v) if isinstance(v, str) else v for v in frame[column]]
                           for column in ("target", "drafter") if column in frame.columns})


def pair_link(target: str, drafter: str | None) -> str | None:
    """The Pair page of (target, drafter), as a relative link a grid's LinkColumn opens in this app."""
    if not isinstance(drafter, str):
        return None
    return f"pair?{urlencode({'target': target, 'drafter': drafter})}"
