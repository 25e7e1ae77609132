"""What the pages read: dashboard.queries behind Streamlit's caches, over one read-only query object per database.

Every cached function takes the database URL (so two databases never share a cache entry) and fetches the
`ReadOnlyQueries` from `st.cache_resource`. The dashboard never writes: its connections refuse writes (see
registry.store.read_only.open_read_only), and nothing here calls a Store command.
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

from dashboard import plan_queries, queries
from dashboard.cells import SPEEDUP_COLUMNS, SPEEDUP_FORMAT, speedup_text, verdict_style
from registry import calibration
from registry.calibration.fit import SideFacts
from registry.calibration.launch_inputs import pick_gpu, side_parameters
from registry.calibration.ranking import rank
from registry.calibration.recommend import launchable_pairs
from registry.domain import pair, pricing
from registry.local import LocalRepoError, read_local_repo
from registry.redact import mask_url
from registry.settings import get_settings
from registry.store.db import DatabaseError
from registry.store import Store
from registry.store.read_queries import ReadOnlyQueries

# Long enough that moving between pages and widgets is instant, short enough that a watcher's news shows soon.
TTL_S = 60


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
def _reader(url: str) -> ReadOnlyQueries:
    return ReadOnlyQueries(url)


def require_database() -> str:
    """The database URL once the database exists at the current schema; otherwise say how to make it, and stop."""
    url = database_url()
    try:
        problem = _reader(url).schema_problem()
    except DatabaseError as exc:
        problem = str(exc)
    except SQLAlchemyError as exc:
        problem = f"cannot open the database: {_one_line(exc)}"
    if problem is not None:
        st.info(md(problem))
        st.caption(f"database: {md(shown_url(url))}")
        st.stop()
    return url


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
    return plain(short_name(ref))


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
    return frame.assign(**{column: [short_name(v) if isinstance(v, str) else v for v in frame[column]]
                           for column in ("target", "drafter") if column in frame.columns})


def pair_link(target: str, drafter: str | None) -> str | None:
    """The Pair page of (target, drafter), as a relative link a grid's LinkColumn opens in this app."""
    if not isinstance(drafter, str):
        return None
    return f"pair?{urlencode({'target': target, 'drafter': drafter})}"


def is_local(ref: str) -> bool:
    """A local model folder (what `drafters verify` on folders and the demo record), not a Hub repo id."""
    return ref.startswith(("/", "~", "./", "../"))


def short_name(ref: str) -> str:
    """A repo id as it is; a local folder by a readable label, "tiny Qwen3 target (demo)" (the full path goes in a
    tooltip)."""
    return queries.ref_label(ref)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def local_verdict(target: str, drafter: str) -> queries.PairVerdict | None:
    """The verdict between two local folders, read from their files as `drafters check` does; None when either
    folder is gone. Folders declare nothing, so the best they reach is "structural"."""
    try:
        target_repo, drafter_repo = read_local_repo(Path(target)), read_local_repo(Path(drafter))
    except (LocalRepoError, OSError):
        return None
    result = pair.judge(drafter_repo.side(), target_repo.side())
    return queries.PairVerdict(verdict=result.verdict, reasons=result.reasons,
                               checks=tuple(pair.checks_json(result)),
                               checkpoint_sha="local folder", drafter_sha="local folder", checked_at=datetime.now(UTC))


# ---- cached reads ---------------------------------------------------------------------------------


@st.cache_data(ttl=10, show_spinner=False)  # downloads move: a short cache
def plan(url: str) -> plan_queries.PlanView:
    return plan_queries.plan_view(_reader(url), structural=get_settings().autoverify_structural)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def counts(url: str) -> queries.Counts:
    return queries.counts(_reader(url))


@st.cache_data(ttl=10, show_spinner=False)  # the service's parts move: a short cache
def service_state(url: str) -> pd.DataFrame:
    return queries.service_state(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def speedup_curves(url: str) -> tuple[dict[int, str], pd.DataFrame]:
    return queries.speedup_curves(_reader(url))


@st.cache_data(ttl=10, show_spinner=False)
def job_states(url: str) -> dict[str, int]:
    return queries.job_states(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def dflash_v1(url: str, on: date) -> pd.DataFrame:
    return queries.dflash_v1(_reader(url), on)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def latest_speedups(url: str) -> pd.DataFrame:
    return queries.latest_speedups(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def events(
    url: str, types: Sequence[str] = (), orgs: Sequence[str] = (), families: Sequence[str] = (),
    since: date | None = None, limit: int = 500,
) -> pd.DataFrame:
    return queries.events(_reader(url), types=types, orgs=orgs, families=families, since=since, limit=limit)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def event_options(url: str) -> queries.EventOptions:
    return queries.event_options(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def checkpoint_options(url: str) -> queries.CheckpointOptions:
    return queries.checkpoint_options(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def availability(url: str, orgs: Sequence[str] = (), families: Sequence[str] = (), sizes: Sequence[str] = ()) -> pd.DataFrame:
    return queries.availability(_reader(url), orgs=orgs, families=families, sizes=sizes)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def availability_matrix(url: str, orgs: Sequence[str] = (), families: Sequence[str] = (),
                        sizes: Sequence[str] = ()) -> pd.DataFrame:
    db = _reader(url)
    cells = queries.availability(db, orgs=orgs, families=families, sizes=sizes)
    return queries.availability_matrix(cells, queries.latest_speedups(db, limit=1000))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def resolve_checkpoint(url: str, repo_id: str) -> str | None:
    return _reader(url).resolve_checkpoint(repo_id)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def search_checkpoints(url: str, text: str) -> list[str]:
    return _reader(url).search_checkpoints(text)


def _store(url: str) -> Store:
    """The reader's store on its read-only engine (one pool per database, closed with the reader): the ranking and
    the pricing read through the same functions as `find`, `drafters price` and the API."""
    return _reader(url).store


@st.cache_data(ttl=TTL_S, show_spinner=False)
def side_facts(url: str, ref: str, drafter: bool) -> SideFacts:
    """One side's size and config as `drafters price` reads it (registry.calibration.side_facts)."""
    return calibration.side_facts(_store(url), ref, drafter=drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def pair_acceptance(url: str, target: str, drafter: str) -> tuple[pricing.Acceptance | None, str | None]:
    """What prices the pair, as `drafters price` chooses it: the newest measured run's per-position acceptance, else
    a published τ (labelled "published, not measured"); else None and why."""
    try:
        return calibration.measured_acceptance(_store(url), target, drafter), None
    except calibration.PricingInputError as missing:
        published = calibration.published_acceptance(target, drafter)
        return (published, None) if published is not None else (None, str(missing))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def drafters_for(url: str, repo_id: str) -> pd.DataFrame:
    store = _store(url)
    pairs = launchable_pairs(store, repo_id)
    runs = [r for r in store.runs.list_runs(target=repo_id) if r.status == "ok"]
    records = {p.drafter: None if p.built_in else store.reads.get_drafter(p.drafter) for p in pairs}
    order = rank(pairs, runs, pick_gpu(None), None, records=records,
                 target_parameters=side_parameters(store, repo_id, pairs[0].target_sha if pairs else None))
    ranked = {r.pair.drafter: (position, r.why) for position, r in enumerate(order, start=1)}
    return queries.drafters_for(_reader(url), repo_id, ranked)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def lag_report(url: str, on: date) -> queries.LagReport:
    return queries.lag_report(_reader(url), on)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def upgrades(url: str, on: date) -> pd.DataFrame:
    return queries.upgrades(_reader(url), on)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def benchmark_pairs(url: str) -> pd.DataFrame:
    return queries.benchmark_pairs(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def benchmark_summary(url: str, target: str | None = None, drafter: str | None = None) -> pd.DataFrame:
    return queries.benchmark_summary(_reader(url), target=target, drafter=drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def benchmark_history(url: str, target: str, drafter: str | None) -> pd.DataFrame:
    return queries.benchmark_history(_reader(url), target, drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def acceptance_by_position(url: str, run_id: str) -> pd.DataFrame:
    return queries.acceptance_by_position(_reader(url), run_id)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def runs(url: str, target: str | None = None, drafter: str | None = None, status: str | None = None) -> pd.DataFrame:
    return queries.runs(_reader(url), target=target, drafter=drafter, status=status)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def run_predictions(url: str, target: str | None = None, drafter: str | None = None) -> pd.DataFrame:
    return queries.run_predictions(_reader(url), target=target, drafter=drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def pair_choices(url: str) -> pd.DataFrame:
    return queries.pair_choices(_reader(url))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def pair_verdict(url: str, target: str, drafter: str) -> queries.PairVerdict | None:
    return queries.pair_verdict(_reader(url), target, drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def gone_notes(url: str, target: str, drafter: str) -> tuple[str, ...]:
    return queries.gone_notes(_reader(url), target, drafter)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def checkpoint_revisions(url: str, repo_id: str) -> pd.DataFrame:
    return queries.checkpoint_revisions(_reader(url), repo_id)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def drafter_revisions(url: str, repo_id: str) -> pd.DataFrame:
    return queries.drafter_revisions(_reader(url), repo_id)
