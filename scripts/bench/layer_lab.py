"""Lab for the one-launch decoder layer (crates/rmx-models/src/kernels/decode.cuh, section
`layer`, launched by decode_layer.rs) on the GPU machine, without the engine:

    python3 scripts/bench/layer_lab.py [llama3-8b|qwen3-0.6b ...] [--bits 4] [--offset 64]
                                       [--threads 512|1024]

For each shape it writes random quantized weights for every layer of one token (all distinct,
as in a real token: nothing is served from L2 that would not be), then
  - checks one layer against the MLX ops mlx-lm runs for it (rms_norm, quantized_matmul, rope,
    the cache update, sdpa, SwiGLU): max |diff| of the layer's output over its scale, and of
    the key/value it wrote into the cache;
  - times all layers chained in one eval, stopping the kernel after phase 1..6 (RMX_LAYER_STOP),
    so the differences are what each phase (and its barrier) costs per token, with the bytes
    each GEMV phase reads and its effective bandwidth.
"""
import argparse
import statistics
import time

import mlx.core as mx

from kernel_src import layer_layout, section

# name: (layers, hidden, heads, kv heads, head dim, ffn, q/k norm, eps, rope base)
SHAPES = {
    "llama3-8b": (32, 4096, 32, 8, 128, 14336, False, 1e-5, 500000.0),
    "qwen3-0.6b": (28, 1024, 16, 8, 128, 3072, True, 1e-6, 1000000.0),
}
THREADS, G = 512, 64
INPUTS = ["x", "wq", "sq", "bq", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2",
          "qn", "kn", "inv_freq", "pos", "par", "kc", "vc", "bar"]
PHASES = ["qkv", "attention", "merge", "o + residual", "gate/up + swiglu", "down + residual"]


def header(stop):
    return f"#define RMX_LAYER_STOP {stop}\n" + section("layer")


def sm_count():
    import ctypes
    cu = ctypes.CDLL("libcuda.so.1")
    n, dev = ctypes.c_int(), ctypes.c_int()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDeviceGetAttribute(ctypes.byref(n), 16, dev) == 0
    return n.value


_kernels = {}


def kernel(stop, smem):
    key = (stop, smem, THREADS)
    if key not in _kernels:
        _kernels[key] = mx.fast.cuda_kernel(
            name=f"rmx_decode_layer_lab{stop}", input_names=INPUTS, output_names=["y", "scratch"],
            source="rmx::decode_layer<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, "
                   "O_ML, O_PART, O_ATT, O_H, O_ACT>(" + ", ".join(INPUTS) + ", y, scratch);",
            header=header(stop), shared_memory=smem)
    return _kernels[key]


def quant(n, k, bits):
    w = (mx.random.normal((n, k)) * 0.02).astype(mx.bfloat16)
    return mx.quantize(w, group_size=G, bits=bits)


def make_layer(shape, bits):
    _, hid, h, kv, d, f, qk, _, _ = SHAPES[shape]
    ones = lambda n: (1.0 + 0.1 * mx.random.normal((n,))).astype(mx.bfloat16)
    return dict(q=quant((h + 2 * kv) * d, hid, bits), o=quant(hid, h * d, bits),
                gu=quant(2 * f, hid, bits), d=quant(hid, f, bits),
                n1=ones(hid), n2=ones(hid), qn=ones(d), kn=ones(d))


def run_layer(shape, bits, p, x, kc, vc, offset, bar, inv_freq, stop, blocks):
    _, hid, h, kv, d, f, qk, eps, _ = SHAPES[shape]
    offsets, scratch = layer_layout(hid, h, kv, d, f)
    kmax = max(hid, h * d, f)
    smem = 4 * (kmax + kmax // (128 // bits) + 32)
    ins = [x, *p["q"], *p["o"], *p["gu"], *p["d"], p["n1"], p["n2"], p["qn"], p["kn"], inv_freq,
           mx.array([offset, kc.shape[1]], dtype=mx.int32), mx.array([eps, eps, d ** -0.5]),
           kc, vc, bar]
    tmpl = [("T", mx.bfloat16), ("BITS", bits), ("G", G), ("HID", hid), ("H", h), ("KV", kv),
            ("D", d), ("F", f), ("QKNORM", qk), ("TRADITIONAL", False), ("NT", THREADS),
            *offsets.items()]
    return kernel(stop, smem)(inputs=ins, template=tmpl, grid=(blocks * THREADS, 1, 1),
                              threadgroup=(THREADS, 1, 1), output_shapes=[x.shape, (scratch,)],
                              output_dtypes=[x.dtype, mx.float32])[0]


def reference(shape, bits, p, x, kc, vc, offset):
    """The layer as mlx-lm computes it; kc/vc hold positions 0..offset-1."""
    _, hid, h, kv, d, f, qk, eps, base = SHAPES[shape]
    qmm = lambda a, w: mx.quantized_matmul(a, *w, transpose=True, group_size=G, bits=bits)
    qkv = qmm(mx.fast.rms_norm(x, p["n1"], eps), p["q"])
    q, k, v = mx.split(qkv, [h * d, (h + kv) * d], axis=-1)
    q, k, v = (t.reshape(1, 1, n, d) for t, n in ((q, h), (k, kv), (v, kv)))
    if qk:
        q, k = mx.fast.rms_norm(q, p["qn"], eps), mx.fast.rms_norm(k, p["kn"], eps)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    q = mx.fast.rope(q, d, traditional=False, base=base, scale=1.0, offset=offset)
    k = mx.fast.rope(k, d, traditional=False, base=base, scale=1.0, offset=offset)
    keys = mx.concatenate([kc[None, :, :offset], k], axis=2)
    vals = mx.concatenate([vc[None, :, :offset], v], axis=2)
    o = mx.fast.scaled_dot_product_attention(q, keys, vals, scale=d ** -0.5)
    hres = x + qmm(o.transpose(0, 2, 1, 3).reshape(1, 1, -1), p["o"])
    gate, up = mx.split(qmm(mx.fast.rms_norm(hres, p["n2"], eps), p["gu"]), [f], axis=-1)
    y = hres + qmm((gate * mx.sigmoid(gate)) * up, p["d"])
    return y, k[0, :, 0], v[0, :, 0]


def rel(a, b):
    a, b = a.astype(mx.float32), b.astype(mx.float32)
    return (mx.abs(a - b).max() / (mx.abs(b).max() + 1e-6)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=["qwen3-0.6b", "llama3-8b"])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--offset", type=int, default=64)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=512, choices=(512, 1024),
                    help="threads per block (decode_layer.rs: RMX_LAYER_THREADS)")
    a = ap.parse_args()
    global THREADS
    THREADS = a.threads
    blocks = sm_count()
    bar = mx.zeros((32,), mx.uint32) + mx.array(0, mx.uint32)  # device memory, see decode_layer.rs
    mx.eval(bar)
    for shape in a.shapes:
        layers, hid, h, kv, d, f, qk, eps, base = SHAPES[shape]
        mx.random.seed(0)
        inv_freq = 1.0 / (base ** (mx.arange(0, d, 2, dtype=mx.float32) / d))
        cap = max(256, (a.offset // 256 + 1) * 256)
        ps = [make_layer(shape, a.bits) for _ in range(layers)]
        kcs = [(mx.random.normal((kv, cap, d))).astype(mx.bfloat16) for _ in range(layers)]
        vcs = [(mx.random.normal((kv, cap, d))).astype(mx.bfloat16) for _ in range(layers)]
        x = mx.random.normal((1, 1, hid)).astype(mx.bfloat16)
        mx.eval(ps, kcs, vcs, x, inv_freq)

        ref, rk, rv = reference(shape, a.bits, ps[0], x, kcs[0], vcs[0], a.offset)
        y = run_layer(shape, a.bits, ps[0], x, kcs[0], vcs[0], a.offset, bar, inv_freq, 6, blocks)
        mx.eval(ref, y)
        kerr = rel(kcs[0][:, a.offset], rk)
        verr = rel(vcs[0][:, a.offset], rv)
        print(f"{shape} {a.bits}-bit, offset {a.offset}, {blocks} blocks: layer max rel diff "
              f"{rel(y, ref):.2e}, cache k {kerr:.2e}, v {verr:.2e}", flush=True)

        def token(stop):
            out = x
            for p, kc, vc in zip(ps, kcs, vcs):
                out = run_layer(shape, a.bits, p, out, kc, vc, a.offset, bar, inv_freq, stop,
                                blocks)
            return out

        times = []
        for stop in range(1, 7):
            for _ in range(3):
                mx.eval(token(stop))
            ts = []
            for _ in range(a.reps):
                out = token(stop)
                t = time.perf_counter()
                mx.eval(out)
                ts.append(time.perf_counter() - t)
            times.append(statistics.median(ts))
        wbytes = lambda w: sum(t.nbytes for t in w)
        gemv = {0: "q", 3: "o", 4: "gu", 5: "d"}
        prev = 0.0
        for i, t in enumerate(times):
            dt = (t - prev) * 1e3
            extra = ""
            if i in gemv:
                nbytes = layers * wbytes(ps[0][gemv[i]])
                extra = f", {nbytes / 1e6:.0f} MB, {nbytes / max(t - prev, 1e-9) / 1e12:.2f} TB/s"
            print(f"  phase {i + 1} {PHASES[i]:18} +{dt:.3f} ms per token{extra}")
            prev = t
        total = layers * sum(wbytes(ps[0][k]) for k in ("q", "o", "gu", "d"))
        print(f"  all {layers} layers: {times[-1] * 1e3:.3f} ms, {total / times[-1] / 1e12:.2f} "
              f"TB/s over {total / 1e9:.2f} GB of weights", flush=True)


if __name__ == "__main__":
    main()
