"""Lab for the one-launch decoder layer (crates/rmx-models/src/kernels/layer.cuh, section
`layer`, launched by decode_layer.rs) on the GPU machine, without the engine:

    python3 scripts/bench/layer_lab.py [llama3-8b|qwen3-0.6b ...] [--bits 4] [--offset 64]
                                       [--blocks N] [--host-args] [--idot 1 0 ...]

For each shape it writes random quantized weights for every layer of one token (all distinct,
as in a real token: nothing is served from L2 that would not be), then
  - checks one layer against the MLX ops mlx-lm runs for it (rms_norm, quantized_matmul, rope,
    the cache update, sdpa, SwiGLU): max |diff| of the layer's output over its scale, and of
    the key/value it wrote into the cache;
  - runs all layers chained in one eval with the kernel reading the GPU's clock at each phase
    boundary (RMX_LAYER_TIMES): what each phase and its wait take per layer, the bandwidth
    of each GEMV phase, and the gap between one layer's kernel and the next. (Host timers
    cannot split a kernel: with the kernel stopped after a phase, a layer is shorter than
    MLX's CPU work per launch, and the host times that instead.)
    The host's time per token is printed alongside.
Each value of --idot (the kernel's IDOT: integer products on 8-bit staged x, or float) is
checked and timed in the order given, so `--idot 1 0 1 0` interleaves an A/B.
"""
import argparse
import statistics
import time

import mlx.core as mx

from kernel_src import layer_layout, layer_shared_bytes, section

# name: (layers, hidden, heads, kv heads, head dim, ffn, q/k norm, eps, rope base)
SHAPES = {
    "llama3-8b": (32, 4096, 32, 8, 128, 14336, False, 1e-5, 500000.0),
    "qwen3-0.6b": (28, 1024, 16, 8, 128, 3072, True, 1e-6, 1000000.0),
}
THREADS, G, COUNTERS = 512, 64, 1024  # decode_layer.rs: THREADS, COUNTERS
INPUTS = ["x", "wq", "sq", "bq", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2",
          "qn", "kn", "inv_freq", "pos", "par", "kc", "vc", "bar"]
PHASES = ["qkv", "attention + merge", "o + residual", "gate/up + swiglu", "down + residual"]
# Phase i runs from clock reading i to i + 1 (block 0 leaving a wait; the last: every block done).


def header(times_at):
    return f"#define RMX_LAYER_TIMES {times_at}\n" + section("layer")


def sm_count():
    import ctypes
    cu = ctypes.CDLL("libcuda.so.1")
    n, dev = ctypes.c_int(), ctypes.c_int()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDeviceGetAttribute(ctypes.byref(n), 16, dev) == 0
    return n.value


_kernels = {}


def kernel(times_at, smem):
    key = (times_at, smem)
    if key not in _kernels:
        _kernels[key] = mx.fast.cuda_kernel(
            name="rmx_decode_layer_lab", input_names=INPUTS, output_names=["y", "scratch"],
            source="rmx::decode_layer<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, "
                   "O_ML, O_PART, O_ATT, O_H, O_ACT, O_X, IDOT>(" + ", ".join(INPUTS) + ", y, scratch);",
            header=header(times_at), shared_memory=smem)
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


def run_layer(shape, bits, p, x, kc, vc, args, bar, inv_freq, blocks, idot):
    """The layer's output and its clock readings (ns): start, after each wait, end (0-5), then
    in block 0's attention work (6-9; layer.cuh's RMX_LAYER_TIME)."""
    _, hid, h, kv, d, f, qk, eps, _ = SHAPES[shape]
    offsets, scratch = layer_layout(hid, h, kv, d, f)
    smem = layer_shared_bytes(hid, h, d, f, bits)
    ins = [x, *p["q"], *p["o"], *p["gu"], *p["d"], p["n1"], p["n2"], p["qn"], p["kn"], inv_freq,
           *args,
           kc, vc, bar]
    tmpl = [("T", mx.bfloat16), ("BITS", bits), ("G", G), ("HID", hid), ("H", h), ("KV", kv),
            ("D", d), ("F", f), ("QKNORM", qk), ("TRADITIONAL", False), ("NT", THREADS),
            *offsets.items(), ("IDOT", bool(idot))]
    y, scr = kernel(scratch, smem)(
        inputs=ins, template=tmpl, grid=(blocks * THREADS, 1, 1), threadgroup=(THREADS, 1, 1),
        output_shapes=[x.shape, (scratch + 32,)], output_dtypes=[x.dtype, mx.float32],
        init_value=0)
    return y, scr[scratch:scratch + 20].view(mx.uint64)


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
    ap.add_argument("--blocks", type=int, default=0,
                    help="blocks in the grid (default: one per SM, as the engine launches); more "
                         "than fit at once checks that blocks which start late change nothing")
    ap.add_argument("--idot", type=int, nargs="+", default=[1, 0],
                    help="IDOT values to check and time, in this order (default: 1 0)")
    ap.add_argument("--host-args", action="store_true",
                    help="pass pos/par per layer straight from host data (managed memory)")
    a = ap.parse_args()
    blocks = a.blocks or sm_count()
    bar = mx.zeros((COUNTERS,), mx.uint32) + mx.array(0, mx.uint32)  # device memory, see decode_layer.rs
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
        mx.eval(ref)
        def args(on_device):
            """pos and par as the engine passes them (fastpath/launch.rs: copied to device memory by a
            GPU op), or straight from host data (MLX keeps those in managed memory)."""
            pos = mx.array([a.offset, cap], dtype=mx.int32)
            par = mx.array([eps, eps, d ** -0.5])
            return [mx.maximum(pos, pos), mx.maximum(par, par)] if on_device else [pos, par]

        for idot in a.idot:
            y, _ = run_layer(shape, a.bits, ps[0], x, kcs[0], vcs[0], args(True), bar, inv_freq,
                             blocks, idot)
            mx.eval(y)
            kerr = rel(kcs[0][:, a.offset], rk)
            verr = rel(vcs[0][:, a.offset], rv)
            print(f"{shape} {a.bits}-bit, IDOT {idot}, offset {a.offset}, {blocks} blocks: layer max rel diff "
                  f"{rel(y, ref):.2e}, cache k {kerr:.2e}, v {verr:.2e}", flush=True)

            def token():
                out, clocks = x, []
                shared = args(True)
                for p, kc, vc in zip(ps, kcs, vcs):
                    # --host-args: new host arrays per layer, as before session 5.
                    la = args(False) if a.host_args else shared
                    out, c = run_layer(shape, a.bits, p, out, kc, vc, la, bar, inv_freq, blocks,
                                       idot)
                    clocks.append(c)
                return out, mx.stack(clocks)

            for _ in range(3):
                mx.eval(token())
            ts, cs = [], []
            for _ in range(a.reps):
                out, c = token()
                t = time.perf_counter()
                mx.eval(out, c)
                ts.append(time.perf_counter() - t)
                cs.append(c.tolist())
            wbytes = lambda w: sum(t.nbytes for t in w)
            gemv = {0: "q", 2: "o", 3: "gu", 4: "d"}
            # Per phase, the median over every layer of every token.
            ph = [statistics.median(l[i + 1] - l[i] for c in cs for l in c) / 1e3
                  for i in range(len(PHASES))]
            gap = statistics.median(c[j + 1][0] - c[j][5] for c in cs for j in range(layers - 1))
            span = statistics.median(c[-1][5] - c[0][0] for c in cs) / 1e3
            print(f"  host {statistics.median(ts) * 1e3:.3f} ms per token; GPU first layer start to last "
                  f"layer end {span:.1f} us; per layer {sum(ph):.1f} us + {gap / 1e3:.1f} us between "
                  f"kernels", flush=True)
            for i, t in enumerate(ph):
                extra = ""
                if i in gemv:
                    nbytes = wbytes(ps[0][gemv[i]])
                    extra = f", {nbytes / 1e6:.1f} MB, {nbytes / (t * 1e-6) / 1e12:.2f} TB/s"
                print(f"    phase {i + 1} {PHASES[i]:18} {t:7.2f} us{extra}")
            # Block 0's attention item (0 where it had none: skipped).
            marks = ["q roped, loads issued", "softmax over its positions", "partials out, counted",
                     "merged (if last) / done"]
            prev = 1
            for k, name in zip(range(6, 10), marks):
                vals = [l[k] - l[prev] for c in cs for l in c if l[k] and l[prev]]
                if vals:
                    print(f"      attention, block 0: {name:28} +{statistics.median(vals) / 1e3:.2f} us")
                prev = k
            total = sum(wbytes(ps[0][k]) for k in ("q", "o", "gu", "d"))
            print(f"  one layer's weights: {total / 1e6:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
