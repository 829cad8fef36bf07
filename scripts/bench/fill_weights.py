#!/usr/bin/env python3
"""Fills a model folder's weights.json (names and shapes, tests/py/tiny_vlm.py make --skeleton)
with random weights, as model.safetensors plus its index: real-shape towers are too large to
carry to a GPU machine, their shapes are not. Only for timing (a normal of 0.02, norms 1).

    python3 scripts/bench/fill_weights.py DIR
"""
import json
import sys
from pathlib import Path

import mlx.core as mx


def main():
    d = Path(sys.argv[1])
    spec = json.loads((d / "weights.json").read_text())
    dtype = mx.float32 if spec["dtype"] == "f32" else mx.bfloat16
    mx.random.seed(0)
    weights = {}
    for name, shape in sorted(spec["shapes"].items()):
        if "norm" in name and name.endswith(".weight"):
            w = mx.ones(shape)
        else:
            w = 0.02 * mx.random.normal(shape)
        weights[name] = w.astype(dtype)
    mx.save_safetensors(str(d / "model.safetensors"), weights, metadata={"format": "mlx"})
    index = {"metadata": {"total_size": sum(v.nbytes for v in weights.values())},
             "weight_map": {k: "model.safetensors" for k in sorted(weights)}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=4))
    print(f"{d}: {len(weights)} tensors, {index['metadata']['total_size'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
