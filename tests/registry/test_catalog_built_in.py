"""Issue 21: drafters that ship inside a checkpoint (MTP heads, DeepSeek-V4 DSpark) are marks on that checkpoint,
not drafters to download; `find` says "built-in …", `lag` counts them from the checkpoint's release day; licenses
and in-place replacements travel from the catalog to the output."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from registry.domain.catalog import parse_catalog
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.domain.records import DrafterSpec, RevisionSpec
from registry.reports import find_for_checkpoint, lag_by, lag_table, upgrade_table
from registry.store import Store
from registry.store.catalog_import import CATALOG_SHA
from tests.support.cli import drafters
from tests.snapshot import snapshot

V4_FLASH = "deepseek-ai/DeepSeek-V4-Flash"
V4_FLASH_DSPARK = "deepseek-ai/DeepSeek-V4-Flash-DSpark"
GLM_FLASH = "zai-org/GLM-5.3-Flash"
NON_COMMERCIAL = "incoai/GLM-5.3-Flash-DFlash2"


def _target(repo_id: str, released: str | None, precision: str = "day") -> dict[str, Any]:
    return {"repo_id": repo_id, "org": repo_id.split("/")[0], "family": "F", "source": "s",
            "released": released, "released_precision": precision if released else None}


def _drafter(repo_id: str, method: str, targets: list[str], released: str | None, precision: str = "day",
             **more: Any) -> dict[str, Any]:
    entry = {"repo_id": repo_id, "method": method, "publisher": repo_id.split("/")[0], "targets": targets,
             "family": "F", "source": "s", "released": released,
             "released_precision": precision if released else None, **more}
    if method == "dflash":
        entry.setdefault("in_21", False)
    return entry


def _small_catalog():  # type: ignore[no-untyped-def]
    return parse_catalog({
        "schema_version": 1,
        "targets": [
            _target("Qwen/Qwen3.5-27B", "2026-02-25"),
            _target("Qwen/Qwen3.6-27B", "2026-04-22"),
            _target("deepseek-ai/DeepSeek-V4-Pro", "2026-04-23"),
            _target("meta-models/Muse-Glimmer-30B", "2026-08-10"),
        ],
        "drafters": [
            _drafter("z-lab/Qwen3.5-27B-DFlash", "dflash", ["Qwen/Qwen3.5-27B"], "2026-03-14"),
            _drafter("Qwen/Qwen3.6-27B", "mtp", ["Qwen/Qwen3.6-27B"], None, built_in=True),
            _drafter("deepseek-ai/DeepSeek-V4-Pro-DSpark", "dspark", ["deepseek-ai/DeepSeek-V4-Pro"], "2026-06-27",
                     built_in=True),
            _drafter("z-lab/Muse-Glimmer-30B-DFlash2", "dflash2", ["meta-models/Muse-Glimmer-30B"], "2026-08-01",
                     precision="month", license="cc-by-nc-nd-4.0"),
            _drafter("meta-models/Muse-Glimmer-30B-assistant", "dflash", ["meta-models/Muse-Glimmer-30B"],
                     "2026-08-10", precision="approx"),
        ],
        "not_listed": [],
    })


def test_built_in_drafters_mark_their_checkpoint_and_are_no_drafter_rows(store: Store) -> None:
    summary = store.catalog.load_catalog()
    assert summary.built_in >= 15 and summary.dflash_21 == 21
    for repo_id in (V4_FLASH_DSPARK, "Qwen/Qwen3.5-27B", "XiaomiMiMo/MiMo-V2.5-Pro-FP4-DFlash"):
        assert store.reads.get_drafter(repo_id) is None, repo_id
    dspark = store.reads.get_checkpoint(V4_FLASH_DSPARK)
    assert dspark is not None and dspark.built_in == ("dspark",) and dspark.kind == "base"
    assert (V4_FLASH, "built_in_from") in dspark.bases
    assert store.reads.get_checkpoint("Qwen/Qwen3.5-27B").built_in == ("mtp",)  # type: ignore[union-attr]
    assert store.reads.get_checkpoint("openai/gpt-oss-20b").built_in == ()  # type: ignore[union-attr]
    assert not any(v.drafter_repo_id in (V4_FLASH_DSPARK, "Qwen/Qwen3.5-27B") for v in store.reads.verdicts())
    before = snapshot(store.engine)
    store.catalog.load_catalog()
    assert snapshot(store.engine) == before


def test_an_older_import_of_a_full_checkpoint_as_a_drafter_converges(store: Store) -> None:
    # What the import did before issue 21: the DSpark checkpoint as a drafter of DeepSeek-V4-Flash.
    store.drafters.upsert_drafter(DrafterSpec(repo_id=V4_FLASH_DSPARK, method="dspark", publisher="deepseek-ai",
                                     source="catalog", targets=((V4_FLASH, "catalog"),)))
    store.drafters.add_drafter_revision(V4_FLASH_DSPARK, RevisionSpec(sha=CATALOG_SHA))
    # A drafter the watcher read from the Hub is the Hub's word, not the catalog's: it stays.
    store.drafters.upsert_drafter(DrafterSpec(repo_id="deepseek-ai/DeepSeek-V4-Pro-DSpark", method="dspark",
                                     publisher="deepseek-ai", source="hub"))
    store.catalog.load_catalog()
    assert store.reads.get_drafter(V4_FLASH_DSPARK) is None
    assert store.reads.get_checkpoint(V4_FLASH_DSPARK).built_in == ("dspark",)  # type: ignore[union-attr]
    assert store.reads.get_drafter("deepseek-ai/DeepSeek-V4-Pro-DSpark") is not None
    _, rows = find_for_checkpoint(store, V4_FLASH)
    assert V4_FLASH_DSPARK not in {r.drafter_repo_id for r in rows}


def test_license_and_in_place_replacements_are_imported(store: Store) -> None:
    store.catalog.load_catalog()
    assert store.reads.get_drafter(NON_COMMERCIAL).license == "cc-by-nc-nd-4.0"  # type: ignore[union-attr]
    assert store.reads.get_drafter("z-lab/Qwen3-8B-DFlash-b16").license is None  # type: ignore[union-attr]
    replaced = store.reads.get_drafter("z-lab/Qwen3.5-122B-A10B-DFlash").replaced_in_place  # type: ignore[union-attr]
    assert len(replaced) == 1 and replaced[0].startswith("2026-06-19: overwritten by the Modal retrain")
    _, rows = find_for_checkpoint(store, GLM_FLASH)
    assert {r.drafter_repo_id: r.license for r in rows}[NON_COMMERCIAL] == "cc-by-nc-nd-4.0"


def test_lag_counts_a_built_in_drafter_from_its_checkpoints_release(store: Store) -> None:
    store.catalog.load_catalog(_small_catalog())
    rows = {r.target_repo_id: r for r in lag_table(store, date(2026, 10, 1))}
    # A separate drafter: the lag is the wait for it.
    assert (rows["Qwen/Qwen3.5-27B"].lag_days, rows["Qwen/Qwen3.5-27B"].built_in) == (17, ())
    # Its own MTP head: there on release day, credited to no separate drafter.
    mtp = rows["Qwen/Qwen3.6-27B"]
    assert (mtp.lag_days, mtp.open, mtp.built_in, mtp.first_drafter_repo_id) == (0, False, ("mtp",), None)
    # A full checkpoint carrying a DSpark module is a checkpoint of its own, not a drafter of its base.
    assert rows["deepseek-ai/DeepSeek-V4-Pro-DSpark"].built_in == ("dspark",)
    assert rows["deepseek-ai/DeepSeek-V4-Pro-DSpark"].lag_days == 0
    assert "deepseek-ai/DeepSeek-V4-Pro" not in rows  # no drafter to add to it: nothing closes or opens its lag
    # Meta's assistant shipped with Muse Glimmer; the month-dated DFlash 2 is not known to precede it.
    muse = rows["meta-models/Muse-Glimmer-30B"]
    assert (muse.first_drafter_repo_id, muse.lag_days) == ("meta-models/Muse-Glimmer-30B-assistant", 0)
    by_publisher = lag_by(list(rows.values()), "publisher", store)
    assert set(by_publisher) == {"z-lab", "meta-models"}  # nobody is credited with a built-in head
    [upgrade] = [u for u in upgrade_table(store, date(2026, 10, 1)) if u.successor_repo_id == "Qwen/Qwen3.6-27B"]
    assert (upgrade.open, upgrade.lag_days) == (False, 0)


def test_find_check_and_lag_say_built_in_and_license(db_env: dict[str, str]) -> None:
    assert drafters("catalog", "load", env=db_env).returncode == 0
    table = drafters("find", "zai-org/GLM-5.3-Flash", env=db_env)
    assert table.returncode == 0, table.stderr
    assert "built-in MTP" in table.stdout and "no separate download" in table.stdout
    assert "license: cc-by-nc-nd-4.0" in table.stdout and "license: unknown" in table.stdout

    found = json.loads(drafters("find", V4_FLASH, "--json", env=db_env).stdout)
    assert found["schema_version"] == SCHEMA_VERSION and found["built_in"] == ["mtp"]
    assert V4_FLASH_DSPARK not in {r["drafter_repo_id"] for r in found["drafters"]}
    assert all("license" in r and "replaced_in_place" in r for r in found["drafters"])
    dspark = drafters("find", V4_FLASH_DSPARK, env=db_env).stdout
    assert "built-in DSpark" in dspark

    checked = json.loads(drafters("check", NON_COMMERCIAL, GLM_FLASH, "--json", env=db_env).stdout)
    assert (checked["schema_version"], checked["drafter_license"]) == (SCHEMA_VERSION, "cc-by-nc-nd-4.0")

    lag = drafters("lag", env=db_env)
    assert lag.returncode == 0, lag.stderr
    assert "built-in DSpark" in lag.stdout and "built-in MTP" in lag.stdout
