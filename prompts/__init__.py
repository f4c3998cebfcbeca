"""The markdown templates and directives rockmem ships (this folder is installed as rockmem_mcp.prompts)."""
