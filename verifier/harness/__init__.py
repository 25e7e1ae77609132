"""The measuring harness: the engine contract (`contract`), the loop (`run`) and provenance (`provenance`)."""
