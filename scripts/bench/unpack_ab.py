"""docs/perf.md row 7's A/B on the GPU: the shift-free unpacking of decode.cuh ("new") against the
shift-and-mask version it replaced ("old", patched into the header here), on all GEMVs of one
Llama-3-8B token in 4- and 8-bit (fused QKV / o / gate+up / down, eval-only time). Run the two
alternately, several times, in one lease:

    cd scripts/bench && for v in new old new old; do python3 unpack_ab.py $v; done
"""
import sys, gemv_lab as g, mlx.core as mx
old = sys.argv[1] == "old"
if old:
    a = g.HEADER.index("template <int BITS>\n__device__ __forceinline__ float field(")
    b = g.HEADER.index("}\n", g.HEADER.index("return __uint_as_float", a)) + 2
    g.HEADER = g.HEADER[:a] + """template <int BITS>
__device__ __forceinline__ float field(uint32_t lo, uint32_t hi, int j) {
  constexpr uint32_t mask = (1u << BITS) - 1u;
  return __uint_as_float(0x4b000000u | ((lo >> (BITS * j)) & mask)) - 8388608.0f;
}
""" + g.HEADER[b:]
for bits in (4, 8):
    L, H, Q, KV, F = g.SHAPES["llama3-8b"]
    mats, nbytes = g.token_set("llama3-8b", bits)
    fused = []
    for l in range(L):
        q, k, v, o, gt, up, dn = mats[7 * l: 7 * l + 7]
        fused.append((g.fuse(g.fuse(q, k), v), o, g.fuse(gt, up), dn))
    mx.eval(fused); del mats
    xs = {k: mx.random.normal((1, k)).astype(mx.bfloat16) for k in {H, Q, F}}
    def run():
        out = []
        for qkv, o, gu, dn in fused:
            out.append(g.qgemv(xs[H], *qkv, bits, 64, 2, 128))
            out.append(g.qgemv(xs[Q], *o, bits, 64, 2, 128))
            out.append(g.qgemv(xs[H], *gu, bits, 64, 2, 128, kind="swiglu"))
            out.append(g.qgemv(xs[F], *dn, bits, 64, 2, 128))
        return out
    te = g.timeit_eval(run, reps=20)
    big = [gu for _, _, gu, _ in fused]
    nb = sum(w.nbytes + s.nbytes + b.nbytes for w, s, b in big)
    tg = g.timeit_eval(lambda: [g.qgemv(xs[H], *gu, bits, 64, 2, 128, kind="swiglu") for gu in big], reps=20)
    print(f"{sys.argv[1]:3} {bits}-bit: fused eval-only {te*1e3:.2f} ms ({nbytes/te/1e9:.0f} GB/s); gate+up {nb/tg/1e9:.0f} GB/s", flush=True)
    del fused, big; mx.clear_cache()
