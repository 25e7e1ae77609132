"""What the pages show beside their tables: the service's state where a section is empty (read before any page names
a command the service already runs), the slowdown warning, the one target count's help, and the data of the speedup
and memory charts."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from dashboard import data, queries
from registry.domain import memory, pricing
from registry.store.read_queries import ReadOnlyQueries


def service(db: ReadOnlyQueries) -> queries.ServiceSummary:
    """What `drafters up` is doing on this database now: read before any empty state says what to run."""
    return queries.service_summary(queries.service_state(db), queries.job_states(db), datetime.now(UTC))


def empty_hint(what: str, db: ReadOnlyQueries) -> None:
    """An empty table: what the running service does about it, or the commands that fill it by hand."""
    state = service(db)
    if state.running:
        doing = "; ".join(part for part in (state.watcher, f"verification jobs {state.queue}" if state.queue else None)
                          if part)
        st.info(f"{what} `drafters up` is filling the registry: {data.md(doing or 'it has started')}.")
    elif state.watcher is not None:
        st.info(f"{what} The last `drafters up` on this database is not running now ({data.md(state.watcher)}): start it "
                f"again, or fill the registry by hand with {queries.FILL_COMMANDS}.")
    else:
        st.info(f"{what} `drafters up` fills it (catalog, watcher, measurements); by hand: {queries.FILL_COMMANDS}.")


DEFAULT_QUANT = pricing.DEFAULT_QUANTIZATION.name


def parameter_count(parameters: int) -> str:
    """A parameter count as `drafters price` writes it: "8.19 B", or "2.02 M" for a tiny model."""
    return f"{parameters / 1e9:.2f} B" if parameters >= 10**8 else f"{parameters / 1e6:.2f} M"


def memory_budget(shape: pricing.PairShape, context: int) -> pd.DataFrame:
    """One row per (target quantization, card size): `pricing.fit`, the check `drafters price` makes, on a card of
    each size; `cell` says "fits, N GiB free" or "short by N GiB"."""
    rows = []
    for quant in pricing.QUANTIZATIONS:
        for gib in memory.CARD_SIZES_GB:
            fit = pricing.fit(shape, quant=quant, context=context, device=pricing.memory_card(gib))
            room = ((fit.budget_bytes or 0) - fit.total_bytes) / memory.GIB
            rows.append({"quantization": quant.name, "card": f"{gib} GiB", "card_gib": gib, "fits": bool(fit.fits),
                         "cell": f"fits, {room:.2f} GiB free" if fit.fits else f"short by {-room:.2f} GiB",
                         "target": round(fit.target_bytes / memory.GIB, 2),
                         "drafter": round(fit.drafter_bytes / memory.GIB, 2),
                         "kv_cache": round(fit.kv_bytes / memory.GIB, 2),
                         "total_GiB": round(fit.total_bytes / memory.GIB, 2)})
    return pd.DataFrame(rows)


# The one target count every page shows: every checkpoint the registry tracks (the Lag page's rows are those of
# them some drafter declares, the Availability grid all of them).
TARGETS_HELP = ("Checkpoints the registry tracks: the catalog's targets and every checkpoint the watcher found in a "
                "watched org. The Lag page lists those a drafter declares; Availability shows all of them.")


def slowdown_warning(speedups: pd.DataFrame, what: str = "pairs") -> None:
    """Below 1× the drafter costs more than it saves: said above any table of speedups, with why on a CPU."""
    values = pd.to_numeric(speedups["speedup"], errors="coerce")
    slower = speedups[values < 1.0]
    if slower.empty:
        return
    hardware = slower["hardware"] if "hardware" in slower.columns else pd.Series([""] * len(slower))
    cpu = hardware.fillna("").astype(str).str.lower().str.startswith("cpu")
    st.warning(f"{len(slower)} of {len(speedups)} {what} are slower with their drafter (speedup below 1×: the "
               "drafter costs more than it saves)."
               + (" On a CPU with tiny models that is expected: the decode loop's overhead outweighs the forwards a "
                  "drafter saves." if cpu.all() else ""))


SPEEDUP_SIDES = {"faster (≥ 1×)": "#2e7d32", "slower (< 1×)": "#c62828"}


def speedup_bars(summary: pd.DataFrame) -> pd.DataFrame:
    """The speedup bars' data: mean ± std ends, and which side of break-even each bar is on."""
    mean = summary["speedup_mean"].astype(float)
    std = summary["speedup_std"].astype(float).fillna(0.0)
    sides = list(SPEEDUP_SIDES)
    return summary.assign(speedup_low=mean - std, speedup_high=mean + std,
                          side=[sides[0] if value >= 1.0 else sides[1] for value in mean])


def speedup_axis_top(bars: pd.DataFrame) -> float:
    """Where a speedup axis ends: past the longest bar and always past 1× (the break-even rule must show)."""
    highest = float(bars["speedup_high"].max()) if len(bars) else 0.0
    return max(1.2, highest * 1.05)


def time_domain(times: pd.Series) -> tuple[datetime, datetime]:
    """A time axis's ends: the runs' span with a margin, at least a day wide, so one run alone gets dated ticks."""
    stamps = pd.to_datetime(times, utc=True).dropna()
    if stamps.empty:
        now = datetime.now(UTC)
        return now - pd.Timedelta(hours=12), now + pd.Timedelta(hours=12)
    first, last = stamps.min(), stamps.max()
    margin = max((last - first) * 0.05, pd.Timedelta(hours=12))
    return (first - margin).to_pydatetime(), (last + margin).to_pydatetime()


def prediction_sentence(predicted: pd.DataFrame) -> str:
    """What the "Predicted vs measured" table compares, and why a row is blank, in one sentence."""
    head = ("Each measured run beside what the pricing model (docs/pricing.md) predicts for it from the pair's shape, "
            "the hardware and the other runs only: tok/s and speedup, and the error predicted ÷ measured − 1.")
    known = pd.to_numeric(predicted.get("predicted_speedup"), errors="coerce").notna() if len(predicted) else []
    if len(predicted) and not known.any():
        notes = sorted({str(n) for n in predicted.get("prediction_note", pd.Series(dtype=object)).dropna()})
        why = "; ".join(notes) if notes else "the model lacks what it needs"
        return head + f" No run here could be predicted: {data.md(why)}."
    return head


def no_events(db: ReadOnlyQueries) -> None:
    """No event yet: the watcher's own state (polling, or the Hub unreachable since …) instead of a command."""
    state = service(db)
    if state.watcher is not None and (state.running or state.watcher_trouble):
        box = st.warning if state.watcher_trouble else st.info
        box(f"No events yet: {data.md(state.watcher)}.")
    else:
        st.info("No events yet: `drafters up` watches the Hub and records new drafters, revisions and lags as "
                "events (`drafters watch --once` polls once by hand).")


def no_measurements(db: ReadOnlyQueries) -> None:
    """No run yet: the job queue when the service is measuring, else how to measure."""
    state = service(db)
    if state.queue:
        st.info(f"No measurement has finished yet: the service is measuring (verification jobs {data.md(state.queue)}); "
                "each result shows here when its job is done.")
    elif state.running:
        st.info("No measurements yet, and no verification job is queued: the service measures every exact pair that "
                "fits this machine as the Plan page shows; `drafters verify TARGET DRAFTER` measures one by hand.")
    else:
        st.info("No measurements yet: `drafters up` measures the demo pairs and every exact pair that fits; "
                "`drafters verify TARGET DRAFTER` measures one by hand.")
