namespace rmx {

// A batch's 4-bit products on bf16 tensor cores (mma.m16n8k16) for the rows kernel (issue #19):
// each weight is loaded and widened once for up to 32 rows, where the dp4a products
// (rows_dot2_i8) cost instructions per row (docs/perf.md, sessions 28-31). The fields are exact
// in bf16 and the products are summed in float, in mma's order: not the solo kernel's bits, so a
// row's answer in a batch is within bf16 rounding of its answer alone, not equal (the setting
// RMX_LAYER_ROWS_MMA says so). x is bf16 as MLX has it, staged in shared memory a part of its
// columns at a time (normed first where the phase norms, with MLX's rms_norm rounding).

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A word's eight 4-bit fields as four bf16 pairs (fields 2p, 2p + 1), exact: each byte pair is
// 0x43 over the field, bf16 128 + f, and 128 comes off in one bf16x2 subtraction.
__device__ __forceinline__ void fields_bf16x2(uint32_t u, uint32_t (&p)[4]) {
  const uint32_t lo = u & 0x0f0f0f0fu, hi = (u >> 4) & 0x0f0f0f0fu;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t v = (__byte_perm(lo, hi, i | (i << 4) | ((4 + i) << 8) | ((4 + i) << 12)) &
                        0x00ff00ffu) | 0x43004300u;
    __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&v);
    b = __hsub2(b, __floats2bfloat162_rn(128.f, 128.f));
    p[i] = *reinterpret_cast<const uint32_t*>(&b);
  }
}

// A 64-wide span of two weight words (2q, 2q + 1) of tile rows g and g + 8 as the four k steps'
// A fragments. Lane (g, q)'s k slots of step s are the span's columns (2q + s / 2) * 8 + 4 (s % 2)
// + {0, 1} and + {2, 3}: the same columns its B fragments take from x (rows_phase_mma's 8 bytes a
// step; the lab's mma_span), so each k slot meets its own column whatever the order mma sums them
// in.
__device__ __forceinline__ void span_fragments(uint2 wa, uint2 wb, uint32_t (&a)[4][4]) {
  uint32_t pa[2][4], pb[2][4];
  fields_bf16x2(wa.x, pa[0]);
  fields_bf16x2(wa.y, pa[1]);
  fields_bf16x2(wb.x, pb[0]);
  fields_bf16x2(wb.y, pb[1]);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int t = s >> 1, o = 2 * (s & 1);
    a[s][0] = pa[t][o];
    a[s][1] = pb[t][o];
    a[s][2] = pa[t][o + 1];
    a[s][3] = pb[t][o + 1];
  }
}

__device__ __forceinline__ uint2 load_stream2(const uint32_t* p) {
  uint2 r;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}

// Shared memory of the mma phases, in floats: the K slices' sums (a block's warps, 32 lanes, 16
// each), the rows' sums of squares (32 rows x the block's warps) and norm scales (32); from PART
// on, the staged part of the rows: each row's sums of its spans (MmaPart::sums_stride a row,
// the region rounded up to 16 bytes), then the rows themselves (MmaPart::pitch elements apart).
// decode_layer/rows.rs sizes the parts (mma_part_spans) so that they fit.
template <int NT>
struct MmaShared {
  static constexpr int RED = (NT / 32) * 32 * 16;
  static constexpr int SUMSQ = 32 * (NT / 32);
  static constexpr int INV = 32;
  static constexpr int PART = RED + SUMSQ + INV;
};

// Where a part of ps spans of n rows lies in shared memory. The sums' stride is odd so the four
// rows a warp's lanes read a span's sums of (8j + 2q) fall in four banks; a row's pitch is 8
// bytes more than its part, so the 8-byte x fragments of a half warp's lanes (rows g = 0..3 or
// 4..7, columns 16q apart) meet 32 different banks.
struct MmaPart {
  int sums_stride, pitch;
  float* sums;
  __device__ __forceinline__ MmaPart(float* smem_part, int n, int ps)
      : sums_stride(ps | 1), pitch(ps * 64 + 4), sums(smem_part) {}
  template <typename T>
  __device__ __forceinline__ T* rows(int n) const {
    return reinterpret_cast<T*>(sums + (n * sums_stride + 3) / 4 * 4);
  }
};

// Each row's RMS norm scale (stage_inv's, from stage_sumsq's sums) for rows [0, n) of x (K
// wide), into inv[r]; RB rows' loads are in flight at once.
template <typename T, int K, int NT>
__device__ __forceinline__ void rows_inv(const T* x, int n, float eps, float* sumsq, float* inv) {
  constexpr int ITERS = StageWords<K, NT>::ITERS;
  constexpr int RB = ITERS == 1 ? 4 : 2;
#pragma unroll 1
  for (int i0 = 0; i0 < n; i0 += RB) {
    uint4 raw[RB][ITERS];
#pragma unroll
    for (int b = 0; b < RB; ++b)
      if (i0 + b < n) stage_load<T, K, NT, true>(x + (size_t)(i0 + b) * K, raw[b]);
#pragma unroll
    for (int b = 0; b < RB; ++b)
      if (i0 + b < n) stage_sumsq<T, K, NT>(raw[b], sumsq + (i0 + b) * (NT / 32));
  }
  __syncthreads();
  if ((int)threadIdx.x < n)
    inv[threadIdx.x] = stage_inv<K, NT>(sumsq + threadIdx.x * (NT / 32), eps);
  __syncthreads();
}

// Columns [c0, c0 + 64 ns) of rows [0, n) of x (row stride K) into a part: each row's values as
// bf16 (NORM: RMS-normed with inv[r] and nw as MLX's rms_norm rounds them, w * T(x * inv)) and
// each 64-wide span's sum of them (the quantization biases' share of a span's products). Every
// thread loads B words before it stores any, so the block's reads of x are in flight together;
// a span is the words of 8 consecutive lanes, summed by three shuffles.
template <typename T, int K, int NT, bool NORM>
__device__ __forceinline__ void stage_part_bf16(const T* x, int n, int c0, int ns, const T* nw,
                                                const float* inv, const MmaPart& part) {
  constexpr int B = 8;
  const int vw = ns * 8, total = n * vw;
  T* rows = part.template rows<T>(n);
#pragma unroll 1
  for (int i0 = 0; i0 < total; i0 += B * NT) {
    uint4 raw[B];
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int idx = i0 + b * NT + threadIdx.x;
      raw[b] = make_uint4(0u, 0u, 0u, 0u);
      if (idx < total) {
        const int r = idx / vw, v = idx - r * vw;
        raw[b] = __ldcg(reinterpret_cast<const uint4*>(x + (size_t)r * K + c0) + v);
      }
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int idx = i0 + b * NT + threadIdx.x;
      const int r = idx / vw, v = idx - r * vw;
      float f[8];
      Words<4>{{raw[b].x, raw[b].y, raw[b].z, raw[b].w}}.template unpack<T>(f);
      uint4 o = raw[b];
      if constexpr (NORM) {
        if (idx < total) {
          float wf[8];
          Vec8<T>::load(nw + c0 + 8 * v, wf);
          const float iv = inv[r];
          __align__(16) T t8[8];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            f[j] = round_t<T>(wf[j] * round_t<T>(f[j] * iv));
            t8[j] = static_cast<T>(f[j]);
          }
          o = *reinterpret_cast<const uint4*>(t8);
        }
      }
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) s += f[j];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      if (idx < total) {
        // 8-byte aligned (the pitch): two stores.
        uint2* to = reinterpret_cast<uint2*>(rows + (size_t)r * part.pitch + 8 * v);
        to[0] = make_uint2(o.x, o.y);
        to[1] = make_uint2(o.z, o.w);
        if ((v & 7) == 0) part.sums[r * part.sums_stride + (v >> 3)] = s;
      }
    }
  }
}

// Spans a warp loads together (a chunk: each of its 16 rows' C x 32 bytes at once), one chunk
// ahead of the one it multiplies. A lane's 8 bytes of a span alone made the DRAM serve 32-byte
// pieces of 16 rows at a time (the lab: ~500-800 GB/s at 4 rows, session 33).
#ifndef RMX_MMA_CHUNK
#define RMX_MMA_CHUNK 4
#endif

// One weight phase over every row on the tensor cores: x rows src (K wide; NORM: RMS-normed with
// nw). The weight rows come in tiles of 16: with other == 1, rows 16i .. 16i + 15 (lane (g, q)'s
// pair: 16i + g and 16i + g + 8); otherwise rows 8i .. 8i + 7 of [0, n_out) and their partners
// + other (gate and up). A tile's K is split over the KS warps of a team, slice s taking a part's
// chunks of spans s, s + KS, ..., and the first adds the others' sums in slice order
// (deterministic).
//
// The block stages x (normed or not) in parts of ps spans of all its rows (at most 32 at a time),
// so every weight is loaded once for all the rows, every row is read from L2 once a part (not
// once a tile and span), and a warp's products read x from shared memory. Each lane loads a
// chunk of spans ahead of the one it multiplies, so the weights stream while the tensor cores
// work. out(b, ra, rb, ya, yb) stores row b's two products, unrounded, as rows_phase's does.
template <typename T, int G, int K, int NT, bool NORM, typename Out>
__device__ __forceinline__ void rows_phase_mma(const T* src, const T* nw, float eps, int rows,
                                               int ps, const uint32_t* w, const T* scales,
                                               const T* biases, int ticket, int n_out,
                                               int other, Out out) {
  static_assert(G % 64 == 0 && K % 64 == 0, "64-wide spans within a group");
  extern __shared__ float smem[];
  constexpr int SPANS = K / 64, WARPS = NT / 32, WORDS = K / 8, GROUPS = K / G;
  using S = MmaShared<NT>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int tiles = other == 1 ? n_out / 16 : n_out / 8;
  // Slices a tile's K is split over: the most (up to the block's warps) that still leave every
  // warp of the grid a tile, so a phase of few tiles keeps the grid's loads in flight.
  int ks = 1;
  while (ks < WARPS && tiles * 2 * ks <= (int)gridDim.x * WARPS) ks *= 2;
  const int team = warp / ks, slice = warp % ks, teams = WARPS / ks;
  if (ticket >= tiles) return;  // the whole block: no tile of this ticket
  const int parts = (SPANS + ps - 1) / ps;
  float* red = smem;
  float* inv = smem + S::RED + S::SUMSQ;
  for (int b0 = 0; b0 < rows; b0 += 32) {
    const int n = min(32, rows - b0), nj = (n + 7) / 8;
    const T* xb = src + (size_t)b0 * K;
    const MmaPart part(smem + S::PART, n, ps);
    const T* xs = part.template rows<T>(n);
    __syncthreads();  // the last rows' part and scales are read by every warp before they go
    if constexpr (NORM) rows_inv<T, K, NT>(xb, n, eps, smem + S::RED, inv);
    int staged = -1;
    // Round r gives team t of ticket b the tile (r * teams + t) * gridDim.x + b: the grid's teams
    // take the tiles side by side, so a phase of fewer tiles than teams leaves every SM some.
    for (int u0 = ticket; u0 < tiles; u0 += gridDim.x * teams) {
      const int u = u0 + team * gridDim.x;
      const bool busy = u < tiles;
      const int tile = min(u, tiles - 1);
      const int ra = other == 1 ? 16 * tile + g : 8 * tile + g;
      const int rb = ra + (other == 1 ? 8 : other);
      float tot[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) tot[j][0] = tot[j][1] = tot[j][2] = tot[j][3] = 0.f;
#pragma unroll 1
      for (int p = 0; p < parts; ++p) {
        const int s0 = p * ps, np = min(ps, SPANS - s0);
        if (staged != p) {
          __syncthreads();
          stage_part_bf16<T, K, NT, NORM>(xb, n, s0 * 64, np, nw, inv, part);
          __syncthreads();
          staged = p;
        }
        // The slice's chunks (chunk i: spans C i .. C i + C - 1 of the part; the slice takes
        // chunks slice, slice + ks, ...). Scales and biases are read as a span is taken (from
        // L1 after its row's first: 16 groups share a sector).
        constexpr int C = RMX_MMA_CHUNK;
        const int nch = (np + C - 1) / C;
        if (!busy || slice >= nch) continue;
        const uint32_t* wa_row = w + (size_t)ra * WORDS + s0 * 8 + 2 * q;
        const uint32_t* wb_row = w + (size_t)rb * WORDS + s0 * 8 + 2 * q;
        // Chunk ch's words of the lane's two rows (zeros past the part's end).
        auto load_chunk = [&](int ch, uint2 (&ca)[C], uint2 (&cb)[C]) {
#pragma unroll
          for (int c = 0; c < C; ++c) {
            const int sp = ch * C + c;
            ca[c] = sp < np ? load_stream2(wa_row + sp * 8) : make_uint2(0u, 0u);
            cb[c] = sp < np ? load_stream2(wb_row + sp * 8) : make_uint2(0u, 0u);
          }
        };
        uint2 ca[C], cb[C], na[C], nb[C];
        load_chunk(slice, ca, cb);
#pragma unroll 1
        for (int ch = slice; ch < nch; ch += ks) {
          if (ch + ks < nch) load_chunk(ch + ks, na, nb);
#pragma unroll
          for (int c = 0; c < C; ++c) {
            const int s = ch * C + c;
            if (s >= np) break;
            const int grp = (s0 + s) * 64 / G;
            const float sa = to_float(scales[(size_t)ra * GROUPS + grp]);
            const float ba = to_float(biases[(size_t)ra * GROUPS + grp]);
            const float sb = to_float(scales[(size_t)rb * GROUPS + grp]);
            const float bb = to_float(biases[(size_t)rb * GROUPS + grp]);
            uint32_t a[4][4];
            span_fragments(ca[c], cb[c], a);
            // The k steps outside and the rows' tiles inside: the tiles' accumulations are
            // independent, so the tensor cores overlap them instead of waiting out one chain of
            // dependent mma at a time.
            float d[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                if (j < nj) {
                  const int r = min(8 * j + g, n - 1);
                  const uint2 xv = *reinterpret_cast<const uint2*>(
                      xs + (size_t)r * part.pitch + s * 64 + (2 * q + (k >> 1)) * 8 + 4 * (k & 1));
                  mma_bf16(d[j], a[k], 8 * j + g < n ? xv.x : 0u, 8 * j + g < n ? xv.y : 0u);
                }
              }
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              if (j < nj) {
                const int col = 8 * j + 2 * q;  // the D fragment's batch rows: col, col + 1
                const float x0 = part.sums[min(col, n - 1) * part.sums_stride + s];
                const float x1 = part.sums[min(col + 1, n - 1) * part.sums_stride + s];
                tot[j][0] = fmaf(sa, d[j][0], fmaf(ba, x0, tot[j][0]));
                tot[j][1] = fmaf(sa, d[j][1], fmaf(ba, x1, tot[j][1]));
                tot[j][2] = fmaf(sb, d[j][2], fmaf(bb, x0, tot[j][2]));
                tot[j][3] = fmaf(sb, d[j][3], fmaf(bb, x1, tot[j][3]));
              }
            }
          }
#pragma unroll
          for (int c = 0; c < C; ++c) {
            ca[c] = na[c];
            cb[c] = nb[c];
          }
        }
      }
      // The tile's slices, added in slice order by its first warp.
      float* mine = red + (warp * 32 + lane) * 16;
      if (ks > 1 && slice > 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) mine[j * 4 + e] = tot[j][e];
      }
      if (ks > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(ks * 32));
      if (slice == 0 && busy) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (j >= nj) continue;
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            v[e] = tot[j][e];
            for (int k2 = 1; k2 < ks; ++k2) v[e] += red[((warp + k2) * 32 + lane) * 16 + j * 4 + e];
          }
          const int c = 8 * j + 2 * q;
          if (c < n) out(b0 + c, ra, rb, v[0], v[2]);
          if (c + 1 < n) out(b0 + c + 1, ra, rb, v[1], v[3]);
        }
      }
      if (ks > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(ks * 32));
    }
  }
}

}  // namespace rmx
