"""Pair: one (target, drafter): the verdict with its reasons and checks, the revisions, every run, whether the two
fit on a card, and the predicted tokens/s across GPU classes (registry.domain.pricing)."""

from __future__ import annotations

from dataclasses import asdict

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import data
from registry.domain import gpus, memory, pricing

st.title("Pair")
url = data.require_database()


def gib(value: float) -> float:
    return round(value / memory.GIB, 2)


def choose_pair() -> tuple[str, str] | None:
    choices = data.pair_choices(url)
    if choices.empty:
        data.empty_hint("No pair has a verdict or a run yet.")
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
        if data.is_local(ref):
            st.caption(f"{role} {data.md(data.short_name(ref))} is a local folder", help=data.md(ref))
    return target, drafter


with data.guard("Pair"):
    pair = choose_pair()
    if pair is None:
        st.stop()
    target, drafter = pair
    for note in data.gone_notes(url, target, drafter):
        st.warning(data.md(note))

    st.subheader("Verdict")
    verdict = data.pair_verdict(url, target, drafter)
    if verdict is None and data.is_local(target) and data.is_local(drafter):
        verdict = data.local_verdict(target, drafter)  # read from the folders, as `drafters check` does
    if verdict is None:
        st.info("No verdict between the head revisions of this pair (it only has runs).")
    else:
        st.markdown(f"**{data.md(verdict.verdict)}** between {data.md(data.short_name(target))}@"
                    f"{data.md(verdict.checkpoint_sha[:12])} and {data.md(data.short_name(drafter))}@"
                    f"{data.md(verdict.drafter_sha[:12])} (checked {verdict.checked_at:%Y-%m-%d %H:%M} UTC)")
        for reason in verdict.reasons:
            st.markdown(f"- {data.md(reason)}")
        if verdict.checks:
            data.dataframe(pd.DataFrame(list(verdict.checks)), hide_index=True, width="stretch", key="checks")

    st.subheader("Revisions")
    left, right = st.columns(2)
    with left:
        st.caption(f"target {data.md(data.short_name(target))}", help=data.md(target))
        data.dataframe(data.checkpoint_revisions(url, target), hide_index=True, width="stretch", key="target_revs")
    with right:
        st.caption(f"drafter {data.md(data.short_name(drafter))}", help=data.md(drafter))
        data.dataframe(data.drafter_revisions(url, drafter), hide_index=True, width="stretch", key="drafter_revs")

    st.subheader("Runs")
    pair_runs = data.runs(url, target, drafter)
    if pair_runs.empty:
        st.info(f"No run of this pair yet: drafters verify {data.md(target)} {data.md(drafter)} measures it.")
    else:
        # The pricing model's prediction of each run beside what was measured; a blank where it could not
        # predict one, with the reason in prediction_note.
        predicted = data.run_predictions(url, target, drafter)
        shown_runs = pair_runs.drop(columns=["target", "drafter"]).merge(predicted, on="run_id", how="left")
        data.dataframe(shown_runs, hide_index=True, width="stretch", key="runs")
        errors = pd.concat([pd.to_numeric(predicted[c], errors="coerce")
                            for c in ("tokens_per_s_error", "speedup_error")]).abs().dropna()
        if not errors.empty:
            st.caption(f"Prediction error (predicted ÷ measured − 1) of the pricing model on these runs: median "
                       f"|error| {errors.median():.0%} over {len(errors)} tok/s and speedup numbers. Each run is "
                       "predicted from the other runs only (docs/pricing.md).")

with data.guard("Memory budget"):
    st.subheader("Memory budget")
    target_facts = data.checkpoint_weights(url, target)
    drafter_facts = data.drafter_weights(url, drafter)
    # Local folders are not in the registry's revisions; the newest run measured their weight files.
    measured = data.runs(url, target, drafter)
    measured = measured[measured["status"] == "ok"] if not measured.empty else measured

    def run_bytes(column: str) -> int | None:
        values = measured[column].dropna() if column in measured.columns else []
        return int(values.iloc[0]) if len(values) else None

    target_estimate = memory.estimate_parameters(
        parameter_count=target_facts.parameter_count if target_facts else None,
        weight_bytes=(target_facts.weight_bytes if target_facts else None) or run_bytes("target_weight_bytes"),
        config=target_facts.config if target_facts else None,
        size_label=target_facts.size_label if target_facts else None,
    )
    drafter_estimate = memory.estimate_parameters(
        parameter_count=None,
        weight_bytes=(drafter_facts.weight_bytes if drafter_facts else None) or run_bytes("drafter_weight_bytes"),
        config=drafter_facts.config if drafter_facts else None,
        size_label=None,
    )
    if target_estimate.parameters is None:
        st.info("The registry knows neither the target's weight bytes nor its parameter count (a Hub read with "
                "`drafters watch --once` records them).")
    else:
        kv = memory.kv_geometry(target_facts.config if target_facts else None)
        context = st.number_input("Context length (tokens)", min_value=0, max_value=10_000_000,
                                  value=memory.DEFAULT_CONTEXT_TOKENS, step=1024, key="context")
        rows = memory.budget_table(
            target_parameters=target_estimate.parameters,
            drafter_parameters=drafter_estimate.parameters,
            kv=kv,
            context_tokens=int(context),
        )
        notes = [f"target ≈ {target_estimate.parameters / 1e9:.2f} B parameters ({target_estimate.basis})"]
        notes.append(
            f"drafter ≈ {drafter_estimate.parameters / 1e9:.2f} B parameters at bf16 ({drafter_estimate.basis})"
            if drafter_estimate.parameters is not None
            else "drafter weights unknown (counted as 0)"
        )
        notes.append(f"KV cache {kv.layers} layers × {kv.kv_heads} KV heads × {kv.head_dim} at bf16"
                     if kv else "KV cache unknown (no usable target config; counted as 0)")
        st.caption("; ".join(notes) + ". Weights and KV cache only: leave room for activations and the runtime.")
        budget = pd.DataFrame([asdict(row) for row in rows])
        table = budget.assign(
            cell=[f"fits, {gib(h)} GiB free" if fits else f"short by {gib(-h)} GiB"
                  for fits, h in zip(budget["fits"], budget["headroom_bytes"])],
            card=budget["card_gb"].map(lambda gb: f"{gb} GB"),
        ).pivot(index="quantization", columns="card", values="cell")
        order = [q.name for q in memory.QUANTIZATIONS]
        table = table.loc[order, [f"{gb} GB" for gb in memory.CARD_SIZES_GB]]
        totals = budget.drop_duplicates("quantization").set_index("quantization")["total_bytes"].map(gib)
        data.dataframe(table.assign(total_GiB=totals).reset_index(), hide_index=True, width="stretch", key="budget")
        parts = budget.drop_duplicates("quantization").melt(
            id_vars=["quantization"], value_vars=["target_bytes", "drafter_bytes", "kv_cache_bytes"],
            var_name="part", value_name="bytes",
        )
        parts = parts.assign(GiB=parts["bytes"].map(gib), part=parts["part"].str.replace("_bytes", ""))
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
        largest = gib(budget["total_bytes"].max())
        shown_cards = [gb for gb in memory.CARD_SIZES_GB if gb < largest] + [
            gb for gb in memory.CARD_SIZES_GB if gb >= largest
        ][:1]
        cards = pd.DataFrame({"GiB": shown_cards, "card": [f"{gb} GB card" for gb in shown_cards]})
        lines = alt.Chart(cards).mark_rule(strokeDash=[3, 3], color="#616161").encode(y="GiB:Q", tooltip=["card"])
        st.altair_chart(stacked + lines, width="stretch")

with data.guard("Price across GPU classes"):
    st.subheader("Price across GPU classes")
    measured = pair_runs[pair_runs["status"] == "ok"] if not pair_runs.empty else pair_runs
    acceptance, source_run = None, None
    for run in measured.itertuples():  # newest first: the newest run with per-position acceptance prices it
        positions = data.acceptance_by_position(url, run.run_id)
        if not positions.empty:
            # Mean over prompt sets, up to the positions every set measured.
            width = int(positions.groupby("prompt_set")["position"].max().min())
            means = positions[positions["position"] <= width].groupby("position")["acceptance"].mean()
            acceptance = pricing.Acceptance(tuple(float(v) for v in means), f"run {run.run_id[:12]}", run.run_id,
                                            tuple(sorted(positions["prompt_set"].unique())))
            source_run = run
            break
    shape = None
    if acceptance is None or target_estimate.parameters is None:
        st.info(f"No measured per-position acceptance for this pair (or no target size): drafters verify "
                f"{data.md(target)} {data.md(drafter)} measures it, then every GPU class is priced here.")
    else:
        quant_names = [q.name for q in pricing.QUANTIZATIONS]
        chosen_quant = st.selectbox("Target quantization", quant_names, index=quant_names.index("Q4_K_M"),
                                    key="price_quant")
        context_tokens = int(st.session_state.get("context", memory.DEFAULT_CONTEXT_TOKENS))
        try:
            shape = pricing.pair_shape(
                target_facts.config if target_facts else None, drafter_facts.config if drafter_facts else None,
                source_run.method, target_parameters=target_estimate.parameters,
                drafter_parameters=drafter_estimate.parameters)
        except pricing.PricingError as missing:  # a gap in what the registry knows, not a failure of the page
            shape = None
            st.info(f"Cannot price this pair: {data.md(str(missing))}.")
    if shape is not None:
        priced = [pricing.price(shape, acceptance, pricing.device_for(card), quant=pricing.quantization(chosen_quant),
                                context=context_tokens) for card in gpus.load_gpus()]
        points = pd.DataFrame([
            {"GPU": p.device, "series": series, "tok/s": round(value, 1), "fits": bool(p.fit.fits),
             "speedup": round(p.speedup, 2), "best γ": p.best_gamma,
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
                tooltip=["GPU", "series", "tok/s", "speedup", "best γ", "fit"],
            )
        )
        st.altair_chart(bars, width="stretch")
        data.dataframe(points[points["series"] == "with drafter"].drop(columns=["series"]), hide_index=True,
                     width="stretch", key="price")
        st.caption(f"Acceptance from {data.md(acceptance.source)} ({data.md(', '.join(acceptance.prompt_sets))}); "
                   f"context {context_tokens} tokens; pale bars do not fit the card. A memory-bound model at assumed "
                   "efficiencies (docs/pricing.md); its error on this pair's measured runs is in the Runs table "
                   "above, on every run in `drafters price --calibration`.")
