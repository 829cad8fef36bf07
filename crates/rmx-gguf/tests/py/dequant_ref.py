"""gguf-py's view of a GGUF file, as the reference for rmx-gguf's reader: OUT/tensors.json lists
every tensor (name, type, numpy shape, absolute data offset) and, for each NAME given,
OUT/NAME.f32 holds `gguf.quants.dequantize` of it."""
import json
import os
import sys

import gguf
import numpy as np

path, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
r = gguf.GGUFReader(path)
listing = [
    {"name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in reversed(t.shape)], "offset": int(t.data_offset)}
    for t in r.tensors
]
with open(os.path.join(out, "tensors.json"), "w") as f:
    json.dump(listing, f)
by_name = {t.name: t for t in r.tensors}
for name in names:
    t = by_name[name]
    gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4").tofile(os.path.join(out, name + ".f32"))
