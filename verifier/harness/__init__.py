"""The measuring harness: the engine contract (`contract`), the loop (`run`), provenance (`provenance`) and the
stored record of a run (`record`)."""
