"""Pair: one (target, drafter): the verdict with its reasons and checks, the revisions, every run, whether the two
fit on a card, and the predicted tokens/s across GPU classes (registry.domain.pricing)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import data, panels, queries
from registry.calibration.fit import SideFacts
from registry.domain import gpus, memory, pricing
from registry.domain.ref_labels import ref_label, written_as_path

st.title("Pair")
db = data.require_database()


def choose_pair() -> tuple[str, str] | None:
    choices = queries.pair_choices(db)
    if choices.empty:
        panels.empty_hint("No pair has a verdict or a run yet.", db)
        return None
    targets = sorted(choices["target"].unique())
    wanted = st.query_params.get("target")
    # Local folders show by their last path part; the full path is in the tooltip below each choice.
    target = st.selectbox("Target", targets, index=targets.index(wanted) if wanted in targets else 0, key="target",
                          format_func=data.option_label)
    drafters = choices[choices["target"] == target]["drafter"].tolist()
    wanted = st.query_params.get("drafter")
    drafter = st.selectbox("Drafter", drafters, index=drafters.index(wanted) if wanted in drafters else 0,
                           key="drafter", format_func=data.option_label)
    for role, ref in (("target", target), ("drafter", drafter)):
        if written_as_path(ref):
            st.caption(f"{role} {data.md(ref_label(ref))} is a local folder", help=data.md(ref))
    return target, drafter


with data.guard("Pair"):
    pair = choose_pair()
    if pair is None:
        st.stop()
    target, drafter = pair
    for note in queries.gone_notes(db, target, drafter):
        st.warning(data.md(note))

    st.subheader("Verdict")
    verdict = queries.pair_verdict(db, target, drafter)
    if verdict is None and written_as_path(target) and written_as_path(drafter):
        verdict = queries.local_verdict(target, drafter)  # read from the folders, as `drafters check` does
    if verdict is None:
        st.info("No verdict between the head revisions of this pair (it only has runs).")
    else:
        st.markdown(f"**{data.md(verdict.verdict)}** between {data.md(ref_label(target))}@"
                    f"{data.md(verdict.checkpoint_sha[:12])} and {data.md(ref_label(drafter))}@"
                    f"{data.md(verdict.drafter_sha[:12])} (checked {verdict.checked_at:%Y-%m-%d %H:%M} UTC)")
        for reason in verdict.reasons:
            st.markdown(f"- {data.md(reason)}")
        if verdict.checks:
            data.dataframe(pd.DataFrame(list(verdict.checks)), hide_index=True, width="stretch", key="checks")

    st.subheader("Revisions")
    left, right = st.columns(2)
    with left:
        st.caption(f"target {data.md(ref_label(target))}", help=data.md(target))
        data.dataframe(queries.checkpoint_revisions(db, target), hide_index=True, width="stretch", key="target_revs")
    with right:
        st.caption(f"drafter {data.md(ref_label(drafter))}", help=data.md(drafter))
        data.dataframe(queries.drafter_revisions(db, drafter), hide_index=True, width="stretch", key="drafter_revs")

    st.subheader("Runs")
    pair_runs = queries.runs(db, target=target, drafter=drafter)
    if pair_runs.empty:
        st.info(f"No run of this pair yet: drafters verify {data.md(target)} {data.md(drafter)} measures it.")
    else:
        # The pricing model's prediction of each run beside what was measured; a blank where it could not
        # predict one, with the reason in prediction_note.
        predicted = queries.run_predictions(db, target=target, drafter=drafter)
        shown_runs = pair_runs.drop(columns=["target", "drafter"]).merge(predicted, on="run_id", how="left")
        data.dataframe(shown_runs, hide_index=True, width="stretch", key="runs")
        errors = pd.concat([pd.to_numeric(predicted[c], errors="coerce")
                            for c in ("tokens_per_s_error", "speedup_error")]).abs().dropna()
        if not errors.empty:
            st.caption(f"Prediction error (predicted ÷ measured − 1) of the pricing model on these runs: median "
                       f"|error| {errors.median():.0%} over {len(errors)} tok/s and speedup numbers. Each run is "
                       "predicted from the other runs only (docs/pricing.md).")

# One memory model with `drafters price`: each side's size as registry.calibration.side_facts reads it (the head
# revision's parameter count or weight bytes, a local folder's weights, else the config), the pair's shape and fit
# from registry.domain.pricing (the drafter at bf16 with its own KV cache, 1 GiB kept for the runtime on a card).
shape: pricing.PairShape | None = None
with data.guard("Memory budget"):
    st.subheader("Memory budget")
    target_side, drafter_side = queries.side_facts(db, target, False), queries.side_facts(db, drafter, True)
    # A local folder that is gone: the newest run measured its weight files.
    measured = queries.runs(db, target=target, drafter=drafter)
    measured = measured[measured["status"] == "ok"] if not measured.empty else measured

    def run_parameters(column: str) -> int | None:
        values = measured[column].dropna() if column in measured.columns else []
        return round(int(values.iloc[0]) * 8 / memory.BF16.bits_per_weight) if len(values) else None

    def size(side: SideFacts, column: str) -> tuple[int | None, str]:
        if side.parameters is not None:
            return side.parameters, side.basis
        from_run = run_parameters(column)
        if from_run is not None:
            return from_run, "the newest run's weight bytes at bf16"
        return None, "config estimate" if side.config else side.basis

    target_parameters, target_basis = size(target_side, "target_weight_bytes")
    drafter_parameters, drafter_basis = size(drafter_side, "drafter_weight_bytes")
    method = drafter_side.method or (measured["method"].dropna().iloc[0] if "method" in measured.columns
                                     and len(measured["method"].dropna()) else None)
    try:
        shape = pricing.pair_shape(target_side.config, drafter_side.config, method,
                                   target_parameters=target_parameters, drafter_parameters=drafter_parameters)
    except pricing.PricingError as missing:  # a gap in what the registry knows, not a failure of the page
        st.info(f"No memory budget: {data.md(str(missing))} (the watcher records sizes from the Hub as it reads "
                "each repo).")
    if shape is not None:
        context = st.number_input("Context length (tokens)", min_value=0, max_value=10_000_000,
                                  value=memory.DEFAULT_CONTEXT_TOKENS, step=1024, key="context")
        budget = panels.memory_budget(shape, int(context))
        assumptions = pricing.Assumptions()
        st.caption(
            f"target ≈ {panels.parameter_count(shape.target.parameters)} parameters ({data.md(target_basis)}); "
            f"drafter ≈ {panels.parameter_count(shape.drafter.parameters)} parameters at {assumptions.drafter_quantization.name} "
            f"({data.md(drafter_basis)}); KV cache of both at fp16 for {int(context)} tokens"
            + "".join(f"; {data.md(note)}" for note in shape.target.notes)
            + f". A card's budget is its memory less {assumptions.runtime_reserve_gib:g} GiB for the runtime; the "
            f"same model as `drafters price` (default quantization {panels.DEFAULT_QUANT}).")
        table = budget.pivot(index="quantization", columns="card", values="cell")
        order = [q.name for q in pricing.QUANTIZATIONS]
        table = table.loc[order, [f"{gib} GiB" for gib in memory.CARD_SIZES_GB]]
        totals = budget.drop_duplicates("quantization").set_index("quantization")["total_GiB"]
        data.dataframe(table.assign(total_GiB=totals).reset_index(), hide_index=True, width="stretch", key="budget")
        parts = budget.drop_duplicates("quantization").melt(
            id_vars=["quantization"], value_vars=["target", "drafter", "kv_cache"], var_name="part", value_name="GiB")
        stacked = (
            alt.Chart(parts)
            .mark_bar()
            .encode(
                x=alt.X("quantization:N", sort=order, title=None),
                y=alt.Y("GiB:Q", stack="zero", title="GiB"),
                color=alt.Color("part:N", sort=["target", "drafter", "kv_cache"]),
                tooltip=["quantization", "part", "GiB"],
            )
        )
        # Card lines up to the first card that holds even the largest total, so small models stay readable.
        largest = float(budget["total_GiB"].max())
        shown_cards = [gib for gib in memory.CARD_SIZES_GB if gib < largest] + [
            gib for gib in memory.CARD_SIZES_GB if gib >= largest][:1]
        cards = pd.DataFrame({"GiB": [gib - assumptions.runtime_reserve_gib for gib in shown_cards],
                              "card": [f"{gib} GiB card, less the runtime" for gib in shown_cards]})
        lines = alt.Chart(cards).mark_rule(strokeDash=[3, 3], color="#616161").encode(y="GiB:Q", tooltip=["card"])
        st.altair_chart(stacked + lines, width="stretch")

with data.guard("Price across GPU classes"):
    st.subheader("Price across GPU classes")
    # What `drafters price` uses: the newest measured run's per-position acceptance, else a published τ (labelled).
    acceptance, why_not = queries.pair_acceptance(db, target, drafter)
    if acceptance is None or shape is None:
        st.info(f"Cannot price this pair: {data.md(why_not or 'its size is unknown (above)')}.")
    else:
        quant_names = [q.name for q in pricing.QUANTIZATIONS]
        chosen_quant = st.selectbox("Target quantization", quant_names, index=quant_names.index(panels.DEFAULT_QUANT),
                                    key="price_quant")
        context_tokens = int(st.session_state.get("context", memory.DEFAULT_CONTEXT_TOKENS))
        priced = [pricing.price(shape, acceptance, pricing.device_for(card), quant=pricing.quantization(chosen_quant),
                                context=context_tokens) for card in gpus.load_gpus()]
        points = pd.DataFrame([
            {"GPU": p.device, "series": series, "tok/s": round(value, 1), "fits": bool(p.fit.fits),
             "speedup": p.speedup, "best γ": p.best_gamma,
             "fit": "fits" if p.fit.fits else f"does not fit (fits at {p.fit.would_fit_at or 'no quantization'})"}
            for p in priced
            for series, value in (("alone", p.baseline_tokens_per_s), ("with drafter", p.tokens_per_s))
        ])
        order = [p.device for p in priced]
        bars = (
            alt.Chart(points)
            .mark_bar()
            .encode(
                x=alt.X("GPU:N", sort=order, title=None),
                xOffset=alt.XOffset("series:N"),
                y=alt.Y("tok/s:Q", title="predicted tokens/s"),
                color=alt.Color("series:N"),
                opacity=alt.condition(alt.datum.fits, alt.value(1.0), alt.value(0.3)),
                tooltip=["GPU", "series", "tok/s", alt.Tooltip("speedup:Q", format=".2g"), "best γ", "fit"],
            )
        )
        st.altair_chart(bars, width="stretch")
        table = points[points["series"] == "with drafter"].drop(columns=["series"])
        panels.slowdown_warning(table.assign(hardware=table["GPU"]), what="GPU classes (predicted)")
        data.dataframe(table, hide_index=True, width="stretch", key="price")
        st.caption(f"Acceptance from {data.md(acceptance.source)} ({data.md(', '.join(acceptance.prompt_sets))}); "
                   f"context {context_tokens} tokens; pale bars do not fit the card. A memory-bound model at assumed "
                   "efficiencies (docs/pricing.md); its error on this pair's measured runs is in the Runs table "
                   "above, on every run in `drafters price --calibration`.")
