"""rockmem-mcp: durable, fast memory for AI agents over MCP."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rockmem-mcp")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
