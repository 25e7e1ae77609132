"""EAGLE-3 drafters: the config in every published layout (torch-free), the draft model and its proposer. Import
the submodule you need; this package imports none."""
