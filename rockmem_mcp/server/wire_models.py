"""The SDK's per-version wire models, built when first used rather than all at import.

`mcp_types` defines every message of two protocol versions again as schema-exact wire models (306 classes in
`_v2025_11_25` and `_v2026_07_28`) and pydantic builds each one's validator as its class is created: 14 % of the
samples of a stdio server's run on an empty home (py-spy), for the handful of messages a session exchanges. With
pydantic's `defer_build`, a model is built on its first validation instead, exactly as it would have been at import
(the same schema, the same errors). This must run before those modules are imported: `rockmem_mcp.server`'s import
does it, before any of its modules imports the SDK.

`WireModel` is the SDK's own base for those classes (`mcp_types._wire_base`, private): when a release of the SDK
moves or renames it, nothing is deferred and the start is as slow as before, never wrong.
"""

from __future__ import annotations

import importlib
import sys

WIRE_BASE_MODULE = "mcp_types._wire_base"
WIRE_MODULES = ("mcp_types._v2025_11_25", "mcp_types._v2026_07_28")


def defer_wire_models() -> bool:
    """Make the wire models that are not yet defined build on first use; False when the SDK offers no such base or
    its wire modules are already imported (nothing to gain then)."""
    if any(name in sys.modules for name in WIRE_MODULES):
        return False
    try:
        base = importlib.import_module(WIRE_BASE_MODULE).WireModel
    except (ImportError, AttributeError):
        return False
    config = getattr(base, "model_config", None)
    if not isinstance(config, dict):
        return False
    config["defer_build"] = True  # read by each subclass as it is created; WireModel itself has no fields
    return True
