"""A target or drafter reads the same on the dashboard and in the command line's result lines: a repo id as it is,
a local folder by its label, never its path."""

from __future__ import annotations

import pytest

from drafters.cli import runs_view
from registry.calibration.run_view import result_line
from registry.domain.ref_labels import ref_label, written_as_path
from tests.registry.run_fixtures import full_run

DEMO = "/root/.drafters/demo-models/tiny-qwen3-target-896c1f2a"
DRAFTER = "/root/.drafters/demo-models/tiny-dflash-trained-0b13aa77"


def test_a_folder_reads_by_its_label_and_a_repo_id_as_it_is() -> None:
    assert ref_label(DEMO) == "tiny Qwen3 target (demo)"
    assert ref_label(DRAFTER) == "tiny DFlash drafter (demo)"
    assert ref_label("/m/tiny-eagle3-eagle3-trained-610aca83ae3cd198") == "tiny EAGLE-3 head (demo)"
    assert ref_label("./models/my-finetune") == "my-finetune (local folder)"
    assert ref_label("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert [written_as_path(r) for r in (DEMO, "~/m", "../m", "Qwen/Qwen3-8B", "m")] == [True, True, True, False,
                                                                                          False]


def test_the_result_line_names_folders_as_the_dashboard_does() -> None:
    line = result_line(full_run(target=DEMO, drafter=DRAFTER))
    assert line.startswith(f"{ref_label(DEMO)} + {ref_label(DRAFTER)}: 1.70× (1.60–1.80, n=3), τ ")
    assert "/root" not in line and "896c" not in line
    assert result_line(full_run(target="Qwen/Qwen3-8B", drafter=None)).startswith("Qwen/Qwen3-8B + (baseline): ")


def test_the_runs_table_names_folders_as_the_dashboard_does(capsys: pytest.CaptureFixture[str]) -> None:
    runs_view.print_runs([full_run(target=DEMO, drafter=DRAFTER, run_id="0123456789abcdef")])
    printed = capsys.readouterr().out
    assert "tiny DFlash drafter (demo) on tiny Qwen3 target (demo)" in " ".join(printed.split())
    assert "896c" not in printed and "/root" not in printed
