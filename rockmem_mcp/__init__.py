"""rockmem-mcp: durable, fast memory for AI agents over MCP."""

import os
from importlib.metadata import PackageNotFoundError, version

# One BLAS thread unless the user says otherwise (set before numpy loads OpenBLAS). A search's similarity scan is
# one matrix-vector product: OpenBLAS splitting it across threads that other work already keeps busy made hybrid
# search at 10k 3-4x slower on 2 cores (p50 10.8-11.8 ms against 2.6-3.1 ms single-threaded, same runs).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    __version__ = version("rockmem-mcp")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
