"""`python -m benchmarks NAME [ARGS]`: run one harness by name; without a name, list them.

NAME is a module of `benchmarks/` (`speed`, `locomo`, `writers`, ...), of `benchmarks/retrieval/` prefixed
`retrieval_` (`retrieval_study`, `retrieval_report`, `retrieval_speed_ab`) or of `benchmarks/studies/` (one-off
studies whose conclusions BENCHMARKS.md records). ARGS go to the harness's own parser (`NAME --help`).
"""

from __future__ import annotations

import pkgutil
import runpy
import sys
from pathlib import Path

import rockmem_mcp  # noqa: F401 - first, as the server does: its BLAS thread setting applies before numpy loads

HERE = Path(__file__).parent


def harnesses() -> dict[str, str]:
    """Name -> module, for every module that runs as a script."""
    found = {}
    places = (
        ("", "benchmarks", HERE),
        ("retrieval_", "benchmarks.retrieval", HERE / "retrieval"),
        ("", "benchmarks.studies", HERE / "studies"),
    )
    for prefix, package, folder in places:
        for info in pkgutil.iter_modules([str(folder)]):
            if info.ispkg or info.name.startswith("_"):
                continue
            if 'if __name__ == "__main__":' in (folder / f"{info.name}.py").read_text(encoding="utf-8"):
                found[prefix + info.name] = f"{package}.{info.name}"
    return found


def main(argv: list[str]) -> int:
    known = harnesses()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), "\n\nharnesses:", ", ".join(sorted(known)))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in known:
        print(f"no harness {name!r}; one of: {', '.join(sorted(known))}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m benchmarks {name}", *rest]
    runpy.run_module(known[name], run_name="__main__", alter_sys=True)  # as `python -m benchmarks.x` runs it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
