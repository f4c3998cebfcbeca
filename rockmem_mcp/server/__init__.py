"""The MCP server: tools, resources and prompts wired to the library, over stdio or streamable HTTP.

Owns: `app` (the server and its start), `tools/` (one module per tool group, each tool one service call),
`resources`, `prompts`, `completions`, `subscriptions`, `toolsets`, `tenancy` (tenants over HTTP), `http`,
`stdio`, `context` (the stores a request works on), `requests`, `client_logging`, `wire_models` (the SDK's
per-version message models, built on first use).
Imports: the MCP SDK and any room of the library; the library never imports this package.
"""

from rockmem_mcp.server.wire_models import defer_wire_models

defer_wire_models()  # before any module of this package imports the SDK (wire_models.py says why)
