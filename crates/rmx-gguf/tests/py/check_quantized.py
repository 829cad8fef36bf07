"""Checks a quantized conversion against mx.quantize applied to the bf16 conversion of the same
GGUF: every quantized weight must be exactly what MLX itself makes (packed words, scales and
biases), every other tensor identical. Prints a JSON summary.
usage: check_quantized.py QUANT_DIR BF16_DIR BITS"""
import json
import sys

import mlx.core as mx

qdir, bdir, bits = sys.argv[1], sys.argv[2], int(sys.argv[3])
q = mx.load(f"{qdir}/model.safetensors")
b = mx.load(f"{bdir}/model.safetensors")
config = json.load(open(f"{qdir}/config.json"))
assert config["quantization"] == {"group_size": 64, "bits": bits, "mode": "affine"}, config["quantization"]

quantized, plain, mismatches = 0, 0, []
for name, ref in b.items():
    stem = name[: -len(".weight")]
    if f"{stem}.scales" in q:
        wq, scales, biases = mx.quantize(ref, group_size=64, bits=bits)
        for suffix, want in ((".weight", wq), (".scales", scales), (".biases", biases)):
            got = q[stem + suffix]
            if got.dtype != want.dtype or got.shape != want.shape or not mx.array_equal(got, want).item():
                mismatches.append(stem + suffix)
        quantized += 1
    else:
        if not mx.array_equal(q[name], ref).item():
            mismatches.append(name)
        plain += 1
print(json.dumps({"quantized": quantized, "plain": plain, "mismatches": mismatches}))
