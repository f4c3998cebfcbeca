"""One-off studies whose conclusions BENCHMARKS.md records (each still runs: `python -m benchmarks NAME`)."""
