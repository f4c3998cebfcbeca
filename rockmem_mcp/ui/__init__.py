"""The web page: see and steer memory from a browser (`rockmem-mcp ui`, or /ui/ beside streamable HTTP)."""
