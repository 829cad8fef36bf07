"""Integer tensor-core products for a batch's rows, against the rows kernel's dp4a products, on
the GPU machine (docs/perf.md, session 29): scripts/bench/mma_lab.cuh's lab_mma (mma.m16n8k32,
u8 weights x s8 x) must give every (weight row, row) the bits lab_dp4a (kernels/layer_rows.cuh's
rows_dot2_i8, the solo kernel's order) gives, and so must lab_mma2 (session 30: a tile's chunk
classes split over four warps, loads a chunk ahead); then all are timed. lab_bmma (session 31)
is the other road: bf16 tensor-core products (m16n8k16) of the weights' 4-bit fields, float
sums in mma's order: checked against the float product (not dp4a's bits) and timed at 1 to 32
rows in a few (KS, MT) shapes of its work (warps a tile's K is split over, tiles a warp).

    python3 scripts/bench/mma_lab.py            # on the GPU: exactness and µs per product
    python3 scripts/bench/mma_lab.py --nvrtc    # here: compile them with NVRTC (test venv)

Shapes: Llama-3-8B's gate/up (14,336 x 4,096) and down (4,096 x 14,336) at 4 bits, groups of
64, for 1 to 16 rows. The weights are 29 MB each, so they mostly stay in L2 between runs:
the times say how the products compare, not a layer's bandwidth.
"""
import pathlib
import sys

from kernel_src import section

LAB = (pathlib.Path(__file__).parent / "mma_lab.cuh").read_text()
HEADER = section("layer_rows") + "\n".join(
    l for l in LAB.splitlines() if l.strip() and not l.strip().startswith("//")) + "\n"
NT = 512
# Rows a case stages at once: as many as the 227 KB of shared memory a block has hold (the rows
# kernel stages larger batches in groups), 16 at 4,096 wide, 7 at 14,336 (6 beside lab_mma2's
# exchange of subtree sums).
SHAPES = [((14336, 4096), [1, 4, 8, 16]), ((4096, 14336), [1, 4, 6, 7])]


def stride(k, bits=4):
    floats = 32 + k // 2 + 2 * (k // (128 // bits))
    return (floats + 31) // 32 * 32


def body(fn):
    if fn == "lab_bmma":
        return "rmx::lab_bmma<T, BITS, G, K, NT, NR, KS, MT>(x, xs, w, scales, biases, y, N);"
    return f"rmx::{fn}<T, BITS, G, K, NT, NR>(x, w, scales, biases, y, N);"


# lab_bmma's work shapes tried at each product: (KS, MT) with 512 threads a block.
BMMA = {4096: [(4, 1), (2, 2), (8, 1)], 14336: [(8, 1), (16, 1), (8, 2)]}
BMMA_ROWS = [1, 4, 8, 16, 32]
COPIES = 32  # stacked layers' weights a timed launch streams (0.9 GB at 14,336 x 4,096)


def bmma_shared(ks, mt, nr):
    return NT * mt * ((nr + 7) // 8) * 4 * 4 if ks > 1 else 0


def nvrtc():
    import nvrtc_check as nc
    nc.section = lambda *names: HEADER
    lib = nc.ctypes.CDLL(str(nc.NV / "cuda_nvrtc/lib/libnvrtc.so.12"))
    inc = [f"-I{nc.NV / 'cuda_runtime/include'}", f"-I{nc.NV / 'cuda_cccl/include'}"]
    ins = [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases")]
    ok = True
    for fn in ("lab_dp4a", "lab_mma", "lab_mma2"):
        good, lines = nc.compile_one(lib, inc, "layer_rows", ins, [("float", "y")], body(fn),
                                     dict(BITS=4, G=64, K=4096, NT=NT, NR=16, N=14336), "__nv_bfloat16")
        ok &= good
        print("\n".join(lines))
    for nr, ks, mt in ((32, 4, 1), (32, 8, 2), (1, 16, 1)):
        good, lines = nc.compile_one(
            lib, inc, "layer_rows", [("T", "x"), ("float", "xs")] + ins[1:], [("float", "y")],
            body("lab_bmma"), dict(BITS=4, G=64, K=4096, NT=NT, NR=nr, N=14336, KS=ks, MT=mt),
            "__nv_bfloat16")
        ok &= good
        print("\n".join(lines) + f"  (NR {nr}, KS {ks}, MT {mt})")
    for k, norm in ((4096, "true"), (14336, "false")):
        good, lines = nc.compile_one(
            lib, inc, "layer_rows", [("T", "x"), ("T", "nw")] + ins[1:] + [("int32_t", "dims")],
            [("float", "y")],
            ROWS_MMA, dict(G=64, K=k, NT=NT, NORM=norm), "__nv_bfloat16")
        ok &= good
        print("\n".join(lines) + f"  (rows_phase_mma K {k}, NORM {norm})")
    sys.exit(0 if ok else 1)


def stacked(ws, n, k):
    """(w, scales, biases) of COPIES layers: ws and COPIES - 1 random ones stacked, each n x k,
    4-bit in groups of 64 (past L2, so a launch streams them from memory as a step does)."""
    import mlx.core as mx

    parts = [ws] + [mx.quantize((mx.random.normal((n, k)) * 0.02).astype(mx.bfloat16),
                                group_size=64, bits=4) for _ in range(COPIES - 1)]
    big = [mx.concatenate([p[i] for p in parts]) for i in range(3)]
    mx.eval(big)
    return big


def timed(run):
    """µs a launch of run(): 2 warm-up launches, then 5 evaluated together."""
    import time

    import mlx.core as mx

    for _ in range(2):
        mx.eval(run())
    mx.synchronize()
    t0 = time.perf_counter()
    mx.eval([run() for _ in range(5)])
    mx.synchronize()
    return (time.perf_counter() - t0) / 5 * 1e6


# The rows kernel's tensor-core phase (layer_rows_mma.cuh) as a launch of its own.
ROWS_MMA = ("rmx::lab_rows_mma<T, G, K, NT, NORM>(x, nw, w, scales, biases, y, (int)dims[0], "
            "(int)dims[1], (int)dims[2], (int)dims[3], (int)dims[4]);")
BUDGET = 227 * 1024 - 1024  # an H100's opt-in shared memory, less rows.rs's 1 KB
FIXED = 4 * ((NT // 32) * 32 * 16 + 32 * (NT // 32) + 32)  # rows.rs's MMA_FIXED_BYTES


def part_spans(k, rows, budget=BUDGET):
    """decode_layer/rows.rs's mma_part_spans: spans of x staged at once."""
    n = max(1, min(rows, 32))
    spans = k // 64
    most = max(1, min(spans, (budget - FIXED - n * 12 - 16) // (n * 132)))
    if most == spans:
        return spans
    unit = 32 if most >= 32 else 4  # rows.rs's MMA_PART_UNIT, MMA_CHUNK
    most = max(1, most // unit * unit)
    even = ceil_div(spans, ceil_div(spans, most))
    return min(most, ceil_div(even, unit) * unit)


def ceil_div(a, b):
    return -(-a // b)


def rows_mma(chunks):
    """rows_phase_mma against the float product of MLX's normed x, on Llama-3-8B's QKV (normed,
    pairs of 16-row tiles), gate/up (normed, gate and up partners), out and down (x as it is) at 1
    to 32 rows; then timed at 4, 16 and 32 rows over COPIES copies of the layer's weights in one
    launch (streamed from memory; each copy staged as a layer's phase stages: µs a phase and GB/s
    of weights). Once for each of `chunks`, the kernel's RMX_MMA_CHUNK (spans loaded at once)."""
    import mlx.core as mx

    kernels = {}

    def kern(k, norm, chunk):
        if (k, norm, chunk) not in kernels:  # one shared size a kernel: MLX keeps the first
            kernels[k, norm, chunk] = mx.fast.cuda_kernel(
                name=f"rmx_lab_rows_mma_c{chunk}",
                input_names=["x", "nw", "w", "scales", "biases", "dims"], output_names=["y"],
                source=ROWS_MMA, header=f"#define RMX_MMA_CHUNK {chunk}\n" + HEADER,
                shared_memory=BUDGET)
        return kernels[k, norm, chunk]

    def run(x, nw, ws, n, k, norm, other, chunk, copies=1):
        rows = x.shape[0]
        dims = mx.array([n, rows, part_spans(k, rows), other, copies], dtype=mx.int32)
        return lambda: kern(k, norm, chunk)(
            inputs=[x, nw, *ws, dims], template=[("T", mx.bfloat16), ("G", 64), ("K", k),
                                                 ("NT", NT), ("NORM", norm)],
            grid=(132 * NT, 1, 1), threadgroup=(NT, 1, 1), output_shapes=[(rows, n)],
            output_dtypes=[mx.float32])[0]

    cases = [("qkv", 6144, 4096, True, 1), ("gate/up", 28672, 4096, True, 14336),
             ("out", 4096, 4096, False, 1), ("down", 4096, 14336, False, 1)]
    for name, n, k, norm, other in cases:
        wf = (mx.random.normal((n, k)) * 0.02).astype(mx.bfloat16)
        w, s, b = mx.quantize(wf, group_size=64, bits=4)
        dq = mx.dequantize(w, s, b, group_size=64, bits=4).astype(mx.float32)
        nw = (1 + 0.1 * mx.random.normal((k,))).astype(mx.bfloat16)
        worst = 0.0
        for rows in (1, 5, 17, 32):
            x = mx.random.normal((rows, k)).astype(mx.bfloat16)
            xn = mx.fast.rms_norm(x, nw, 1e-5) if norm else x
            with mx.stream(mx.cpu):
                dense = xn.astype(mx.float32) @ dq.T
                mx.eval(dense)
            rels = []
            for chunk in chunks:
                y = run(x, nw, (w, s, b), n, k, norm, other, chunk)()
                rels.append((mx.max(mx.abs(y - dense)) / mx.max(mx.abs(dense))).item())
            worst = max(worst, *rels)
            print(f"rows_mma {name} {n} x {k}, {rows} rows: vs float {max(rels):.1e} (the worst "
                  f"chunk)", flush=True)
        big = stacked((w, s, b), n, k)
        wb = sum(a.nbytes for a in big)
        for rows in (4, 16, 32):
            x = mx.random.normal((rows, k)).astype(mx.bfloat16)
            line = []
            for chunk in chunks:
                t = timed(run(x, nw, big, n, k, norm, other, chunk, COPIES)) / COPIES
                line.append(f"chunk {chunk}: {t:.1f} us ({wb / COPIES / t / 1e3:.0f} GB/s)")
            print(f"rows_mma {name} {n} x {k}, {rows} rows ({part_spans(k, rows)} spans a part), "
                  f"a phase of {COPIES} copies: " + "; ".join(line), flush=True)
        print(f"rows_mma {name}: worst vs float {worst:.1e} (every chunk)", flush=True)


def gpu():
    import time

    import mlx.core as mx

    kernels = {}

    def kernel(fn, shared):
        if (fn, shared) not in kernels:
            kernels[fn, shared] = mx.fast.cuda_kernel(
                name=f"rmx_{fn}", input_names=["x", "w", "scales", "biases"], output_names=["y"],
                source=body(fn), header=HEADER, shared_memory=shared)
        return kernels[fn, shared]

    blocks = 132
    for (n_out, k), rows in SHAPES:
        wf = (mx.random.normal((n_out, k)) * 0.02).astype(mx.bfloat16)
        w, s, b = mx.quantize(wf, group_size=64, bits=4)
        for nr in rows:
            x = mx.random.normal((nr, k)).astype(mx.bfloat16)

            def shared(fn):
                # lab_mma2's exchange: 4 tiles a block x 3 warps x 32 lanes x 4 sums a tile.
                extra = 4 * 3 * 32 * 4 * ((nr + 7) // 8) * 4 if fn == "lab_mma2" else 0
                return nr * stride(k) * 4 + extra

            fns = [f for f in ("lab_dp4a", "lab_mma", "lab_mma2") if shared(f) <= 227 * 1024]

            def run(fn):
                return kernel(fn, shared(fn))(inputs=[x, w, s, b], template=[
                    ("T", mx.bfloat16), ("BITS", 4), ("G", 64), ("K", k), ("NT", NT), ("NR", nr),
                    ("N", n_out)], grid=(blocks * NT, 1, 1), threadgroup=(NT, 1, 1),
                    output_shapes=[(nr, n_out)], output_dtypes=[mx.float32])[0]

            ref = run("lab_dp4a")
            same = {f: mx.sum(ref.view(mx.uint32) != run(f).view(mx.uint32)).item() for f in fns[1:]}
            dense = x.astype(mx.float32) @ mx.dequantize(w, s, b, group_size=64, bits=4).astype(mx.float32).T
            rel = (mx.max(mx.abs(ref - dense)) / mx.max(mx.abs(dense))).item()
            times = {}
            for fn in fns:
                for _ in range(3):
                    mx.eval(run(fn))
                mx.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):
                    mx.eval(run(fn))
                mx.synchronize()
                times[fn] = (time.perf_counter() - t0) / 20 * 1e6
            print(f"{n_out} x {k}, {nr} rows: elements differing "
                  + ", ".join(f"{f} {v}" for f, v in same.items()) + f" of {nr * n_out}, "
                  f"dp4a vs dense {rel:.1e}; "
                  + ", ".join(f"{f} {t:.1f} us" for f, t in times.items()), flush=True)
        bmma(wf, w, s, b, n_out, k)


def bmma(wf, w, s, b, n_out, k):
    """lab_bmma at the layer's size against the float product, then timed on COPIES stacked
    copies of such a layer's weights (past L2, so the weights stream from memory as a step's
    do) beside lab_dp4a on the same: one launch is COPIES products, well past the ~66 us a
    launch that MLX's custom kernels cost on their own (session 31's first run sat on it)."""
    import mlx.core as mx

    dq = mx.dequantize(w, s, b, group_size=64, bits=4).astype(mx.float32)
    big = stacked((w, s, b), n_out, k)
    n_big = COPIES * n_out
    weight_bytes = sum(a.nbytes for a in big)

    def launch(fn, x, xs, ws, n, nr, ks=0, mt=0):
        if fn == "lab_bmma":
            kern = mx.fast.cuda_kernel(
                name="rmx_lab_bmma", input_names=["x", "xs", "w", "scales", "biases"],
                output_names=["y"], source=body(fn), header=HEADER,
                shared_memory=bmma_shared(ks, mt, nr))
            items = n // (16 * mt)
            blocks = max(1, min(items * ks // (NT // 32), 8 * 132))
            ins, extra = [x, xs, *ws], [("KS", ks), ("MT", mt)]
        else:
            kern = mx.fast.cuda_kernel(
                name=f"rmx_{fn}", input_names=["x", "w", "scales", "biases"], output_names=["y"],
                source=body(fn), header=HEADER, shared_memory=nr * stride(k) * 4)
            blocks, ins, extra = 132, [x, *ws], []
        return lambda: kern(inputs=ins, template=[
            ("T", mx.bfloat16), ("BITS", 4), ("G", 64), ("K", k), ("NT", NT), ("NR", nr),
            ("N", n)] + extra, grid=(blocks * NT, 1, 1), threadgroup=(NT, 1, 1),
            output_shapes=[(nr, n)], output_dtypes=[mx.float32])[0]

    for nr in BMMA_ROWS:
        x = mx.random.normal((nr, k)).astype(mx.bfloat16)
        xs = x.astype(mx.float32).reshape(nr, k // 64, 64).sum(-1)
        try:  # float32 on the CPU: the GPU's float32 matmul may round through tf32 (~1e-3)
            with mx.stream(mx.cpu):
                dense = x.astype(mx.float32) @ dq.T
                mx.eval(dense)
        except Exception:
            dense = x.astype(mx.float32) @ dq.T
        line = []
        if nr * stride(k) * 4 <= 227 * 1024:
            t = timed(launch("lab_dp4a", x, xs, big, n_big, nr))
            line.append(f"dp4a {t / COPIES:.1f} us ({weight_bytes / t / 1e3:.0f} GB/s)")
        for ks, mt in BMMA[k]:
            y = launch("lab_bmma", x, xs, (w, s, b), n_out, nr, ks, mt)()
            rel = (mx.max(mx.abs(y - dense)) / mx.max(mx.abs(dense))).item()
            t = timed(launch("lab_bmma", x, xs, big, n_big, nr, ks, mt))
            line.append(f"bmma KS {ks} MT {mt} {t / COPIES:.1f} us ({weight_bytes / t / 1e3:.0f} "
                        f"GB/s, vs float {rel:.1e})")
        print(f"{n_out} x {k}, {nr} rows, a product of {COPIES} streamed: " + "; ".join(line),
              flush=True)


if __name__ == "__main__":
    if "--nvrtc" in sys.argv:
        nvrtc()
    elif "--rows-mma" in sys.argv:
        # --rows-mma [CHUNK ...]: the chunk sizes to compare (default: the kernel's own, 4).
        rows_mma([int(a) for a in sys.argv[sys.argv.index("--rows-mma") + 1:]] or [4])
    else:
        gpu()
