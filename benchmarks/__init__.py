"""Benchmarks: seeded corpora, speed and scale harnesses. See BENCHMARKS.md."""

import rockmem_mcp  # noqa: F401 - first, as the server does: its BLAS thread setting applies before numpy loads
