"""Files on disk: the atomic writer, the change journal between processes, one module per store."""
