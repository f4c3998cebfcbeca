"""The SDK's wire models are built on first use once the server package is imported, and validate exactly as
when built at import."""

from __future__ import annotations

import json
import subprocess
import sys

from rockmem_mcp.server import wire_models

# Prints, for every wire model of both protocol versions: whether it was built before use, its JSON schema, and
# what validating a sample gives (the model's dump, or the errors' types and locations).
PROBE = """
import json, sys
if sys.argv[1] == "server":
    import rockmem_mcp.server.app  # the server as it starts: the deferral, then every SDK import
import mcp_types._v2025_11_25 as old, mcp_types._v2026_07_28 as new
from pydantic import BaseModel, ValidationError
samples = [{}, {"method": "tools/call", "params": {"name": "x", "arguments": {}}}, {"jsonrpc": "2.0", "id": 1}]
out = {}
for module in (old, new):
    for name, model in sorted(vars(module).items()):
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or model.__module__ != module.__name__:
            continue
        built = model.__pydantic_complete__
        results = []
        for sample in samples:
            try:
                results.append(model.model_validate(sample).model_dump(mode="json", by_alias=True))
            except ValidationError as exc:
                results.append([[e["type"], list(e["loc"])] for e in exc.errors()])
        out[module.__name__ + "." + name] = [built, model.model_json_schema(), results]
print(json.dumps(out))
"""


def probe(how: str) -> dict[str, list[object]]:
    run = subprocess.run([sys.executable, "-c", PROBE, how], capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def test_the_wire_models_wait_for_their_first_use_and_then_validate_as_if_built_at_import() -> None:
    deferred, eager = probe("server"), probe("plain")
    assert deferred.keys() == eager.keys() and len(deferred) > 200
    built_at_import = [name for name, (built, *_) in deferred.items() if built]
    assert len(built_at_import) < len(deferred) / 10, built_at_import  # the SDK's own start may use a few
    assert all(built for built, *_ in eager.values())  # without the server package, pydantic builds them all
    for name in deferred:
        assert deferred[name][1:] == eager[name][1:], name  # the same schema, the same results and errors


def test_nothing_is_deferred_once_the_wire_models_exist_or_where_the_sdk_has_no_such_base(monkeypatch) -> None:
    import mcp_types._v2026_07_28  # noqa: F401  # defined, and built or not: too late to change

    assert wire_models.defer_wire_models() is False
    for name in wire_models.WIRE_MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(wire_models, "WIRE_BASE_MODULE", "mcp_types._no_such_module")
    assert wire_models.defer_wire_models() is False


def test_the_suites_own_servers_run_with_the_wire_models_deferred() -> None:
    # tests/conftest.py imports the server package before any test imports the SDK, so the servers tests build in
    # this process validate messages as a started server does (built on first use), not with models built at import.
    from mcp_types._wire_base import WireModel

    assert WireModel.model_config.get("defer_build") is True
