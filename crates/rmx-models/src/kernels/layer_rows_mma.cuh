namespace rmx {

// A batch's 4-bit products on bf16 tensor cores (mma.m16n8k16) for the rows kernel (issue #19):
// each weight is loaded and widened once for up to 32 rows, where the dp4a products
// (rows_dot2_i8) cost instructions per row (docs/perf.md, sessions 28-31). The fields are exact
// in bf16 and the products are summed in float, in mma's order: not the solo kernel's bits, so a
// row's answer in a batch is within bf16 rounding of its answer alone, not equal (the setting
// RMX_LAYER_ROWS_MMA says so). x is bf16 as MLX has it: the phases that norm their input stage it
// normed in shared memory (MLX's rms_norm rounding), the others read it from the scratch rows.

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
// + {0, 1} and + {2, 3}: the same columns its B fragments take from x (mma_span), so each k slot
// meets its own column whatever the order mma sums them in.
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

// A span's four k steps into d: A fragments a[s] (span_fragments) against the x row's two
// 16-byte pieces at columns (2q + t) * 8 of the span, t = 0, 1 (its B fragments, step s taking
// piece s / 2's words 0, 1 or 2, 3).
__device__ __forceinline__ void mma_span(float (&d)[4], const uint32_t (&a)[4][4],
                                         const uint4 (&xv)[2]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint4& v = xv[s >> 1];
    mma_bf16(d, a[s], (s & 1) ? v.z : v.x, (s & 1) ? v.w : v.y);
  }
}

__device__ __forceinline__ uint2 load_stream2(const uint32_t* p) {
  uint2 r;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}

// Shared memory of the mma phases, in floats: the K slices' sums (a block's warps, 32 lanes,
// MT x 4 x 4 each), the rows' sums of squares (32 rows x the block's warps), then the staged rows.
template <int NT, int MT>
struct MmaShared {
  static constexpr int RED = (NT / 32) * 32 * MT * 16;
  static constexpr int SUMSQ = 32 * (NT / 32);
  static constexpr int ROWS = RED + SUMSQ;
};

// Row pitch of a staged bf16 row, in elements: 16 bytes more than the row, so lanes g = 0..7
// reading one column of eight rows meet eight different banks' quads.
template <int K>
struct MmaPitch {
  static constexpr int P = K + 8;
};

// n rows of x (K wide) RMS-normed with nw as MLX's rms_norm rounds them (w * T(x * inv), in T),
// stored as bf16 rows at smem_rows + i * pitch; the same sum of squares as stage_i8's.
template <typename T, int K, int NT>
__device__ __forceinline__ void stage_rows_bf16(const T* x, int n, const T* nw, float eps,
                                                float* sumsq, T* rows) {
  constexpr int ITERS = StageWords<K, NT>::ITERS;
  constexpr int P = MmaPitch<K>::P;
  uint4 raw[ITERS];
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    stage_load<T, K, NT, true>(x + (size_t)i * K, raw);
    stage_sumsq<T, K, NT>(raw, sumsq + i * (NT / 32));
  }
  __syncthreads();
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    stage_load<T, K, NT, true>(x + (size_t)i * K, raw);
    const float inv = stage_inv<K, NT>(sumsq + i * (NT / 32), eps);
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int v = threadIdx.x + it * NT;
      if (v < K / 8) {
        float f[8], wf[8];
        Words<4>{{raw[it].x, raw[it].y, raw[it].z, raw[it].w}}.template unpack<T>(f);
        Vec8<T>::load(nw + 8 * v, wf);
        __align__(16) T out[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = static_cast<T>(round_t<T>(wf[j] * round_t<T>(f[j] * inv)));
        *reinterpret_cast<uint4*>(rows + (size_t)i * P + 8 * v) = *reinterpret_cast<const uint4*>(out);
      }
    }
  }
  __syncthreads();
}

// One weight phase over every row on the tensor cores: x rows src (K wide; NORM: RMS-normed
// with nw and staged mg at a time, else read from src as they are). The weight rows come in
// tiles of 16: with other == 1, rows 16i .. 16i + 15 (lane (g, q)'s pair: 16i + g and 16i + g +
// 8); otherwise rows 8i .. 8i + 7 of [0, n_out) and their partners + other (gate and up). KS
// warps of a block take a tile's K in slices and the first adds the others' sums in slice order;
// a warp takes MT tiles at once, so x's fragments are read once for them. out(b, ra, rb, ya, yb)
// stores row b's two products, unrounded, as rows_phase's does.
template <typename T, int G, int K, int NT, int MT, bool NORM, typename Out>
__device__ __forceinline__ void rows_phase_mma(const T* src, const T* nw, float eps, int rows,
                                               int mg, const uint32_t* w, const T* scales,
                                               const T* biases, int ticket, int n_out,
                                               int other, Out out) {
  static_assert(G % 64 == 0 && K % 64 == 0, "64-wide spans within a group");
  extern __shared__ float smem[];
  constexpr int WORDS = K / 8, SPANS = K / 64, GROUPS = K / G, WARPS = NT / 32;
  constexpr int P = NORM ? MmaPitch<K>::P : K;
  constexpr uint32_t ONES = 0x3f803f80u;  // a bf16 pair of 1.0: the span's sums of x
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int tiles = other == 1 ? n_out / 16 : n_out / 8;
  const int units = (tiles + MT - 1) / MT;
  // Slices a tile's K is split over: the most (up to the block's warps) that still leave every
  // warp of the grid a unit of MT tiles, so a phase of few tiles keeps the grid's loads in flight.
  int ks = 1;
  while (ks < WARPS && SPANS % (2 * ks) == 0 && units * 2 * ks <= (int)gridDim.x * WARPS) ks *= 2;
  const int per = SPANS / ks;
  const int team = warp / ks, slice = warp % ks, teams = WARPS / ks;
  float* red = smem;
  const T* xs = NORM ? reinterpret_cast<const T*>(smem + MmaShared<NT, MT>::ROWS) : src;
  for (int b0 = 0; b0 < rows; b0 += NORM ? mg : 32) {
    const int n = min(NORM ? mg : 32, rows - b0);
    if constexpr (NORM) {
      __syncthreads();  // the last group's rows are read by every warp before they go
      stage_rows_bf16<T, K, NT>(src + (size_t)b0 * K, n, nw, eps, smem + MmaShared<NT, MT>::RED,
                                const_cast<T*>(xs));
    }
    const T* xb = NORM ? xs : src + (size_t)b0 * K;
    const int nj = (n + 7) / 8;
    for (int u = ticket * teams + team; u < units; u += gridDim.x * teams) {
      float tot[MT][4][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < 4; ++j) tot[m][j][0] = tot[m][j][1] = tot[m][j][2] = tot[m][j][3] = 0.f;
      int ra[MT], rb[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const int tile = min(u * MT + m, tiles - 1);  // a short last unit repeats its last tile
        ra[m] = other == 1 ? 16 * tile + g : 8 * tile + g;
        rb[m] = ra[m] + (other == 1 ? 8 : other);
      }
#pragma unroll 2
      for (int sp = slice * per; sp < (slice + 1) * per; ++sp) {
        const int grp = sp * 64 / G;
        uint32_t a[MT][4][4];
        float sa[MT], ba[MT], sb[MT], bb[MT];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint2 wa = load_stream2(w + (size_t)ra[m] * WORDS + sp * 8 + 2 * q);
          const uint2 wb = load_stream2(w + (size_t)rb[m] * WORDS + sp * 8 + 2 * q);
          sa[m] = to_float(scales[(size_t)ra[m] * GROUPS + grp]);
          ba[m] = to_float(biases[(size_t)ra[m] * GROUPS + grp]);
          sb[m] = to_float(scales[(size_t)rb[m] * GROUPS + grp]);
          bb[m] = to_float(biases[(size_t)rb[m] * GROUPS + grp]);
          span_fragments(wa, wb, a[m]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (j < nj) {
            const int r = 8 * j + g;
            uint4 xv[2];
#pragma unroll
            for (int t = 0; t < 2; ++t) {
              const T* p = xb + (size_t)min(r, n - 1) * P + sp * 64 + (2 * q + t) * 8;
              xv[t] = NORM ? *reinterpret_cast<const uint4*>(p)
                           : __ldcg(reinterpret_cast<const uint4*>(p));
              if (r >= n) xv[t] = make_uint4(0u, 0u, 0u, 0u);
            }
            float xsum[4] = {0.f, 0.f, 0.f, 0.f};
            const uint32_t ones[4][4] = {{ONES, ONES, ONES, ONES}, {ONES, ONES, ONES, ONES},
                                         {ONES, ONES, ONES, ONES}, {ONES, ONES, ONES, ONES}};
            mma_span(xsum, ones, xv);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
              float d[4] = {0.f, 0.f, 0.f, 0.f};
              mma_span(d, a[m], xv);
              tot[m][j][0] = fmaf(sa[m], d[0], fmaf(ba[m], xsum[0], tot[m][j][0]));
              tot[m][j][1] = fmaf(sa[m], d[1], fmaf(ba[m], xsum[1], tot[m][j][1]));
              tot[m][j][2] = fmaf(sb[m], d[2], fmaf(bb[m], xsum[0], tot[m][j][2]));
              tot[m][j][3] = fmaf(sb[m], d[3], fmaf(bb[m], xsum[1], tot[m][j][3]));
            }
          }
        }
      }
      // The tile's slices, added in slice order by its first warp.
      float* mine = red + (warp * 32 + lane) * (MT * 16);
      if (ks > 1 && slice > 0) {
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) mine[(m * 4 + j) * 4 + e] = tot[m][j][e];
      }
      if (ks > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(ks * 32));
      if (slice == 0) {
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (u * MT + m >= tiles) continue;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (j >= nj) continue;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              v[e] = tot[m][j][e];
              for (int k2 = 1; k2 < ks; ++k2) {
                v[e] += red[((warp + k2) * 32 + lane) * (MT * 16) + (m * 4 + j) * 4 + e];
              }
            }
            const int c = 8 * j + 2 * q;
            if (c < n) out(b0 + c, ra[m], rb[m], v[0], v[2]);
            if (c + 1 < n) out(b0 + c + 1, ra[m], rb[m], v[1], v[3]);
          }
        }
      }
      if (ks > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(ks * 32));
    }
  }
}

}  // namespace rmx
