"""DFlash drafters: the config (torch-free), the draft model, its proposer, the other published layouts, and
transformers' own implementation of the z-lab layout. Import the submodule you need; this package imports none."""
