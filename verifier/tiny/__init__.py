"""Tiny models the project builds itself (CPU, seconds) for the tests and the demo; see verifier.build_cache."""
