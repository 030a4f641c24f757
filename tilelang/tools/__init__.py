"""Developer tools outside the compilation pipeline (SASS inspection for tests and benchmarks)."""
