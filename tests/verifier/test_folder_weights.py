"""The verifier loads and digests the same safetensors files whose tensor bytes the registry counts (issue 36): one
rule of which files a folder's weights are (`registry.local.safetensors_files`)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from registry.local import safetensors_files, weight_bytes
from verifier.folders import files_digest, weight_files


def _safetensors(path: Path, values: int) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [values], "data_offsets": [0, 4 * values]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * (4 * values))


def test_a_stray_safetensors_beside_an_index_is_neither_loaded_nor_counted(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    _safetensors(tmp_path / "model-00001-of-00001.safetensors", 8)
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    digest = files_digest(tmp_path)
    _safetensors(tmp_path / "consolidated.safetensors", 64)  # a second copy the index does not name
    assert weight_files(tmp_path) == safetensors_files(tmp_path) == [tmp_path / "model-00001-of-00001.safetensors"]
    assert weight_bytes(tmp_path) == 32
    assert files_digest(tmp_path) == digest
