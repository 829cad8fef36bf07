"""Checks a float32 conversion against the bf16 conversion of the same GGUF: every tensor is
float32, of the same shape, and rounds to exactly the bf16 one (both are the GGUF's values; bf16
rounds them once); the float32 values are not all bf16 already (they kept what bf16 drops).
Prints a JSON summary.
usage: check_float32.py F32_DIR BF16_DIR"""
import json
import sys

import mlx.core as mx

fdir, bdir = sys.argv[1], sys.argv[2]
f = mx.load(f"{fdir}/model.safetensors")
b = mx.load(f"{bdir}/model.safetensors")
config = json.load(open(f"{fdir}/config.json"))
assert config["torch_dtype"] == "float32", config.get("torch_dtype")
assert "quantization" not in config, config["quantization"]

mismatches, finer = [], 0
for name, ref in b.items():
    got = f[name]
    if got.dtype != mx.float32 or got.shape != ref.shape or not mx.array_equal(got.astype(mx.bfloat16), ref).item():
        mismatches.append(name)
    elif not mx.array_equal(got, ref.astype(mx.float32)).item():
        finer += 1
print(json.dumps({"tensors": len(f), "bf16_tensors": len(b), "finer_than_bf16": finer, "mismatches": mismatches}))
