"""How a target or drafter reference reads to a person: a repo id as it is, a local model folder by a label,
never its path. The one rule of both, for the dashboard's grids and captions and the command line's result lines
(`drafters up`, `verify`).

A stored reference names a folder when it is written as a path (absolute, ~, ./ or ../): runs recorded on folders
store their resolved path, and a folder since deleted or on another machine still reads as one.
"""

from __future__ import annotations

import re
from pathlib import PurePath

PATH_PREFIXES = ("/", "~", "./", "../")
# The words of the tiny models' folder names (verifier/tiny: `tiny-qwen3-target-<hash>`, `tiny-dflash-trained-<hash>`)
# as a person reads them.
_TINY_WORDS = {"qwen3": "Qwen3", "gemma4": "Gemma-4", "dflash": "DFlash drafter", "eagle3": "EAGLE-3 head",
               "draft": "draft", "lm": "LM", "assistant": "assistant drafter", "target": "target",
               "random": "(untrained)", "arch": "architecture"}
_HASH_TAIL = re.compile(r"-[0-9a-f]{4,}$")


def written_as_path(ref: str) -> bool:
    """`ref` names a local folder (see the module's docstring), not a Hub repo id."""
    return ref.startswith(PATH_PREFIXES)


def ref_label(ref: str) -> str:
    """A repo id as it is; a local folder by a readable name, never its path: the project's tiny models as
    "tiny Qwen3 target (demo)", any other folder by its last path part and "(local folder)"."""
    if not written_as_path(ref):
        return ref
    name = PurePath(ref).name
    stem = _HASH_TAIL.sub("", name)
    if stem.startswith("tiny-"):
        words = [_TINY_WORDS.get(word, word) for word in stem.split("-")[1:] if word != "trained"]
        # `tiny-eagle3-eagle3-…`: the architecture and the layout share a name, said once.
        said = [word for n, word in enumerate(words) if n == 0 or word != words[n - 1]]
        return f"tiny {' '.join(said)} (demo)"
    return f"{name} (local folder)"
