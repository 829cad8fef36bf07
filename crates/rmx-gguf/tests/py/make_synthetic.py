"""Writes a small GGUF with one tensor of every type rmx-gguf dequantizes, every metadata value
type, and a non-default alignment; plus gguf-py's own dequantization of each tensor as the
reference: OUT/synthetic.gguf, OUT/ref/<tensor>.f32 (raw little-endian f32).

Types gguf-py can quantize are quantized from random data; K-quants (which it cannot quantize)
are random bytes with sane f16 block scales, which is just as good for checking the unpacking."""
import os
import sys

import gguf
import numpy as np

out = sys.argv[1]
os.makedirs(os.path.join(out, "ref"), exist_ok=True)
rng = np.random.default_rng(7)
T = gguf.GGMLQuantizationType

w = gguf.GGUFWriter(os.path.join(out, "synthetic.gguf"), "llama")
w.add_custom_alignment(64)
w.add_uint8("test.u8", 200)
w.add_int8("test.i8", -100)
w.add_uint16("test.u16", 60000)
w.add_int16("test.i16", -30000)
w.add_uint32("test.u32", 4_000_000_000)
w.add_int32("test.i32", -2_000_000_000)
w.add_float32("test.f32", 0.25)
w.add_uint64("test.u64", 2**40)
w.add_int64("test.i64", -(2**40))
w.add_float64("test.f64", 1e-300)
w.add_bool("test.bool", True)
w.add_string("test.string", "héllo ▁ world")
w.add_array("test.array_str", ["a", "bc", ""])
w.add_array("test.array_i32", [1, -2, 3])
w.add_array("test.array_nested", [[1, 2], [3]])

ROWS, COLS = 4, 512
tensors = {}
x = (rng.standard_normal((ROWS, COLS)) * 0.1).astype(np.float32)
tensors["t.f32"] = (x, T.F32)
tensors["t.f16"] = (x.astype(np.float16), T.F16)
for ty in (T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
    tensors[f"t.{ty.name.lower()}"] = (gguf.quants.quantize(x, ty), ty)
for ty in (T.Q4_K, T.Q5_K, T.Q6_K):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[ty]
    blocks = rng.integers(0, 256, size=(ROWS * COLS // block_elems, block_bytes), dtype=np.uint8)
    scale = rng.uniform(0.001, 0.05, size=(blocks.shape[0], 2)).astype(np.float16).view(np.uint8)
    if ty == T.Q6_K:
        blocks[:, -2:] = scale[:, :2]
    else:
        blocks[:, 0:4] = scale
    tensors[f"t.{ty.name.lower()}"] = (blocks.reshape(ROWS, -1), ty)

for name, (data, ty) in tensors.items():
    if ty in (T.F32, T.F16):
        w.add_tensor(name, data)
    else:
        w.add_tensor(name, data, raw_dtype=ty)
    ref = gguf.quants.dequantize(data.view(np.uint8) if ty not in (T.F32, T.F16) else data, ty)
    ref.astype("<f4").tofile(os.path.join(out, "ref", name + ".f32"))

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
