"""The Pair page's price across GPU classes: every catalog card, from the newest run's measured acceptance."""

from __future__ import annotations

from registry.gpus import load_gpus
from tests.dashboard.conftest import DFLASH_8B, QWEN3_8B, Seeded, assert_clean, chart_data, run_page
from tests.dashboard.test_pages import frame_with


def test_pair_page_prices_the_pair_on_every_gpu_class(dashboard_db: Seeded) -> None:
    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": DFLASH_8B})
    assert_clean(app)
    table = frame_with(app, "best γ").set_index("GPU")
    assert set(table.index) == {g.name for g in load_gpus()}
    assert table["best γ"].between(1, 4).all()  # the seeded runs measured four positions
    assert bool(table.loc["H200", "fits"]) and table.loc["H200", "speedup"] > 1
    newest = dashboard_db.run_ids[-1]
    assert any(newest[:12] in caption.value for caption in app.caption)
    points = next(frame for frames in chart_data(app) for frame in frames if "series" in frame.columns)
    assert set(points["series"]) == {"alone", "with drafter"} and len(points) == 2 * len(table)

    app.selectbox(key="price_quant").set_value("bf16").run()
    assert_clean(app)
    bf16 = frame_with(app, "best γ").set_index("GPU")
    assert not bool(bf16.loc["RTX 3060 12GB", "fits"]) and bool(bf16.loc["H200", "fits"])
