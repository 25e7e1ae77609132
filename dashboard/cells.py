"""How a grid cell reads: a speedup as "0.41×", a matrix cell in its verdict's colour. Pure text and CSS."""

from __future__ import annotations

from dashboard.queries import NO_VERDICT

# Speedup columns (a ratio: 1.0 is break-even) are shown as "0.41×": two significant digits and the sign of a
# ratio, never a bare 0.4066. Spreads and errors of a speedup are not ratios and keep their plain number.
SPEEDUP_COLUMNS = frozenset({"speedup", "speedup_mean", "speedup_min", "speedup_max", "predicted_speedup",
                             "speedup_low", "speedup_high", "measured speedup"})
SPEEDUP_FORMAT = "%.2g×"  # sprintf-js, as Streamlit's grid formats numbers: what speedup_text writes


def speedup_text(value: float) -> str:
    """A speedup as the grid shows it: two significant digits and "×" (0.4066 → "0.41×", 4.2 → "4.2×")."""
    return f"{float(f'{value:.2g}'):g}×"


# A verdict level's colour, light enough for the text over it: the matrix reads at a glance.
VERDICT_TINTS = {"exact": "#c8e6c9", "declared": "#bbdefb", "structural": "#fff59d", "unknown": "#e0e0e0",
                 "incompatible": "#ffcdd2", NO_VERDICT: "#fafafa"}


def verdict_style(cell: object) -> str:
    """The CSS of a matrix cell, by the verdict its text starts with ("exact · …")."""
    verdict = str(cell).split(" · ", 1)[0]
    tint = VERDICT_TINTS.get(verdict)
    return f"background-color: {tint}; color: #212121" if tint else ""
