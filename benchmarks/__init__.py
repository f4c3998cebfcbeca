"""Benchmarks: seeded corpora, speed and scale harnesses. See BENCHMARKS.md."""
