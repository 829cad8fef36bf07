// scripts/bench/mma_lab.py's kernels, after kernels/layer_rows.cuh (its header): a batch's rows'
// 4-bit products as the rows kernel makes them (dp4a, rows_dot2_i8) and with integer tensor-core
// products (mma.m16n8k32, u8 weights x s8 x), which must give every element the same bits.
namespace rmx {

// The rows kernel's products of weight rows [0, N) (in pairs) against NR rows of x (K wide,
// staged by stage_rows_i8), eight rows a pass as rows_phase takes them: y[i * N + r], unrounded.
template <typename T, int BITS, int G, int K, int NT, int NR>
__device__ void lab_dp4a(const T* x, const uint32_t* w, const T* scales, const T* biases,
                         float* y, int N) {
  extern __shared__ float smem[];
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  stage_rows_i8<T, K, BITS, NT, false, STRIDE>(x, NR, nullptr, 0.f, smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int ra = 2 * (blockIdx.x * warps + warp); ra < N; ra += 2 * gridDim.x * warps) {
    for (int i0 = 0; i0 < NR; i0 += 8) {
      float ya[8], yb[8];
      rows_dot2_i8<T, BITS, G, K, 8>(smem + i0 * STRIDE, min(8, NR - i0), w, scales, biases, ra,
                                     ra + 1, ya, yb);
      if (lane == 0) {
        for (int i = 0; i < min(8, NR - i0); ++i) {
          y[(size_t)(i0 + i) * N + ra] = ya[i];
          y[(size_t)(i0 + i) * N + ra + 1] = yb[i];
        }
      }
    }
  }
}

__device__ __forceinline__ void mma_u8s8(int (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One chunk of a 16-row tile as lane (g, q) reads it: word q of weight rows ra = r0 + g and
// rb = ra + 8, and their groups' scales and biases.
struct MmaChunk {
  uint32_t ua, ub;
  float sa, ba, sb, bb;
};

template <typename T, int BITS, int G, int K>
__device__ __forceinline__ MmaChunk mma_fetch(const uint32_t* wa, const uint32_t* wb,
                                              const T* scales, const T* biases, int ra, int rb,
                                              int c) {
  constexpr int GROUPS = K / G;
  const int grp = (I8Layout<BITS, K>::PER * c) / G;
  return {wa[4 * c],
          wb[4 * c],
          to_float(scales[(size_t)ra * GROUPS + grp]),
          to_float(biases[(size_t)ra * GROUPS + grp]),
          to_float(scales[(size_t)rb * GROUPS + grp]),
          to_float(biases[(size_t)rb * GROUPS + grp])};
}

// Chunk c's products for every 8-column tile of the NR staged rows, added into acc in the rows
// kernel's float order: the word's even fields shifted up four bits and its odd fields in place
// (both x16 as chunk_sums_fields has them) against x-row 8j + g's plane words 2q and 2q + 1
// (its 16-byte slot q / 2), one mma a plane, ia = hi * 254 + lo, then the chunk's scales.
template <int BITS, int K, int NR>
__device__ __forceinline__ void mma_chunk(float* smem, const MmaChunk& w, int c,
                                          float (&acc)[(NR + 7) / 8][4]) {
  using L = I8Layout<BITS, K>;
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  constexpr int PLANE = L::SL * L::CHUNKS * 4;  // words of a plane
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const uint32_t a[4] = {(w.ua & 0x0f0f0f0fu) << 4, (w.ub & 0x0f0f0f0fu) << 4,
                         w.ua & 0xf0f0f0f0u, w.ub & 0xf0f0f0f0u};
  const int at = ((q >> 1) * L::CHUNKS + c) * 4 + 2 * (q & 1);
#pragma unroll
  for (int j = 0; j < (NR + 7) / 8; ++j) {
    const bool has_x = 8 * j + g < NR;
    const uint32_t* xp =
        reinterpret_cast<const uint32_t*>(L::planes(smem + (has_x ? 8 * j + g : 0) * STRIDE));
    const uint2 hx = has_x ? *reinterpret_cast<const uint2*>(xp + at) : make_uint2(0u, 0u);
    const uint2 lx = has_x ? *reinterpret_cast<const uint2*>(xp + PLANE + at) : make_uint2(0u, 0u);
    const uint32_t bh[2] = {hx.x, hx.y}, bl[2] = {lx.x, lx.y};
    int dh[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
    mma_u8s8(dh, a, bh);
    mma_u8s8(dl, a, bl);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int xr = 8 * j + 2 * q + (e & 1);
      const float2 m = xr < NR ? L::meta(smem + xr * STRIDE)[c] : make_float2(0.f, 0.f);
      const float sc = e < 2 ? w.sa : w.sb, b = e < 2 ? w.ba : w.bb;
      const int ia = dh[e] * 254 + dl[e];
      acc[j][e] = fmaf(sc * m.x, static_cast<float>(ia), fmaf(b, m.y, acc[j][e]));
    }
  }
}

// The lane's four elements of each tile: (weight row ra or rb) x (x-row 8j + 2q or + 1).
template <int NR>
__device__ __forceinline__ void mma_store(float* y, int N, int ra, int rb,
                                          const float (&v)[(NR + 7) / 8][4]) {
  const int q = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < (NR + 7) / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int xr = 8 * j + 2 * q + (e & 1);
      const int r = e < 2 ? ra : rb;
      if (xr < NR && r < N) y[(size_t)xr * N + r] = v[j][e];
    }
  }
}

// The same products with mma: a warp takes 16 weight rows x the NR rows (8-column tiles, the
// weights' fragment serving each), a chunk at a time (mma_fetch, mma_chunk). Lane t (g = t / 4,
// q = t % 4) owns (weight row g or g + 8) x (x-row 8j + 2q or 8j + 2q + 1) and sums
// each as the solo kernel does: chunk class L (chunks L, L + 32, ..., which lane L sums in turn
// there) by class, classes in bit-reversed order, a stack of partials giving warp_sum's
// butterfly (docs/perf.md, session 29).
template <typename T, int BITS, int G, int K, int NT, int NR>
__device__ void lab_mma(const T* x, const uint32_t* w, const T* scales, const T* biases,
                        float* y, int N) {
  static_assert(BITS == 4, "4-bit weights");
  extern __shared__ float smem[];
  using L = I8Layout<BITS, K>;
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  constexpr int WORDS = K * BITS / 32;
  constexpr int TILES = (NR + 7) / 8;
  static_assert(NR <= 32, "up to four 8-column tiles");
  stage_rows_i8<T, K, BITS, NT, false, STRIDE>(x, NR, nullptr, 0.f, smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  for (int tile = blockIdx.x * warps + warp; tile * 16 < N; tile += gridDim.x * warps) {
    const int r0 = tile * 16;
    const int ra = r0 + g, rb = r0 + g + 8;
    const uint32_t* wa = w + (size_t)ra * WORDS + q;
    const uint32_t* wb = w + (size_t)rb * WORDS + q;
    // Unrolled, so the stack's depth is known at each class and it stays in registers.
    float st[6][TILES][4];
    int depth = 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int cls = __brev(i) >> 27;
      float acc[TILES][4];
#pragma unroll
      for (int j = 0; j < TILES; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll 1
      for (int c = cls; c < L::CHUNKS; c += 32) {
        mma_chunk<BITS, K, NR>(smem, mma_fetch<T, BITS, G, K>(wa, wb, scales, biases, ra, rb, c),
                               c, acc);
      }
      // Push, then fold equal-sized neighbours: after class i the stack holds the trees of
      // i + 1's binary digits, as the butterfly pairs lanes.
#pragma unroll
      for (int j = 0; j < TILES; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) st[depth][j][e] = acc[j][e];
      }
      ++depth;
      for (int n = i + 1; (n & 1) == 0; n >>= 1) {
        --depth;
#pragma unroll
        for (int j = 0; j < TILES; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            st[depth - 1][j][e] = st[depth - 1][j][e] + st[depth][j][e];
          }
        }
      }
    }
    mma_store<NR>(y, N, ra, rb, st[0]);
  }
}

// lab_mma with a tile's 32 chunk classes split over the 4 warps of a tile (4 tiles a 16-warp
// block), so 4x the warps have work and each walks a quarter of the chunks (session 30: lab_mma
// had 256 busy warps at N = 4,096, each one dependent chain over every chunk). Warp w of a tile
// takes the bit-reversed positions 8w .. 8w + 7, a subtree of the butterfly (the classes c with
// c mod 4 = 0, 2, 1, 3 for w = 0..3), in one flat loop with the next chunk's words and scales
// loaded ahead; its eight class sums fold as the butterfly folds them ((L0 + L1) + (L2 + L3)) +
// ((L4 + L5) + (L6 + L7)), and the tile's first warp adds the subtrees as (S0 + S1) + (S2 + S3):
// the same association as lab_mma's stack, so the same bits.
template <typename T, int BITS, int G, int K, int NT, int NR>
__device__ void lab_mma2(const T* x, const uint32_t* w, const T* scales, const T* biases,
                         float* y, int N) {
  static_assert(BITS == 4, "4-bit weights");
  extern __shared__ float smem[];
  using L = I8Layout<BITS, K>;
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  constexpr int WORDS = K * BITS / 32;
  constexpr int TILES = (NR + 7) / 8;
  static_assert(NR <= 32, "up to four 8-column tiles");
  constexpr int WS = 4;                // warps a tile
  constexpr int CPC = L::CHUNKS / 32;  // chunks a class
  static_assert(L::CHUNKS % 32 == 0, "whole classes");
  constexpr int STEPS = 8 * CPC;  // a warp's chunks
  stage_rows_i8<T, K, BITS, NT, false, STRIDE>(x, NR, nullptr, 0.f, smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int per_block = (blockDim.x >> 5) / WS;
  const int tb = warp / WS, ws = warp % WS;
  // The other warps' subtree sums, [tile slot][warp 1..3][lane][TILES x 4].
  float* red = smem + NR * STRIDE + ((tb * (WS - 1)) * 32 + lane) * TILES * 4;
  auto chunk_of = [&](int n) {
    return static_cast<int>(__brev(8 * ws + n / CPC) >> 27) + 32 * (n % CPC);
  };
  for (int tile = blockIdx.x * per_block + tb; tile * 16 < N; tile += gridDim.x * per_block) {
    const int r0 = tile * 16;
    const int ra = r0 + g, rb = r0 + g + 8;
    const uint32_t* wa = w + (size_t)ra * WORDS + q;
    const uint32_t* wb = w + (size_t)rb * WORDS + q;
    auto fetch = [&](int n) {
      return mma_fetch<T, BITS, G, K>(wa, wb, scales, biases, ra, rb, chunk_of(n));
    };
    MmaChunk next = fetch(0);
    float acc[TILES][4], le[TILES][4], p01[TILES][4], q0[TILES][4];
#pragma unroll
    for (int j = 0; j < TILES; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = le[j][e] = p01[j][e] = q0[j][e] = 0.f;
    }
#pragma unroll 2
    for (int n = 0; n < STEPS; ++n) {
      const MmaChunk cur = next;
      if (n + 1 < STEPS) next = fetch(n + 1);
      mma_chunk<BITS, K, NR>(smem, cur, chunk_of(n), acc);
      if (n % CPC == CPC - 1) {  // leaf k's class is summed: fold it in as the butterfly does
        const int k = n / CPC;
#pragma unroll
        for (int j = 0; j < TILES; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if ((k & 1) == 0) {
              le[j][e] = acc[j][e];
            } else {
              const float pr = le[j][e] + acc[j][e];
              if ((k & 2) == 0) {
                p01[j][e] = pr;
              } else {
                const float qd = p01[j][e] + pr;
                if ((k & 4) == 0) q0[j][e] = qd; else acc[j][e] = q0[j][e] + qd;
              }
            }
            if (k != 7) acc[j][e] = 0.f;
          }
        }
      }
    }
    // acc holds the warp's subtree; the tile's first warp adds the four.
    if (ws > 0) {
#pragma unroll
      for (int j = 0; j < TILES; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) red[((ws - 1) * 32) * TILES * 4 + j * 4 + e] = acc[j][e];
      }
    }
    asm volatile("bar.sync %0, %1;" ::"r"(1 + tb), "r"(WS * 32));
    if (ws == 0) {
#pragma unroll
      for (int j = 0; j < TILES; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s1 = red[j * 4 + e];
          const float s2 = red[32 * TILES * 4 + j * 4 + e];
          const float s3 = red[2 * 32 * TILES * 4 + j * 4 + e];
          acc[j][e] = (acc[j][e] + s1) + (s2 + s3);
        }
      }
      mma_store<NR>(y, N, ra, rb, acc);
    }
    asm volatile("bar.sync %0, %1;" ::"r"(1 + tb), "r"(WS * 32));
  }
}

// -- bf16 tensor cores (session 31): not the solo kernel's bits, a GEMM's. ------------------
// #19's 32 streams need a batch's products read the weights once for every row at tensor-core
// speed; a product summed in mma's order cannot be dp4a's, so this one is checked against the
// float answer (within float rounding), and a solo step that took the same product would keep
// batch invariance exact: an mma's element (m, n) depends on A's row m and B's column n alone.

// mma_bf16 and span_fragments: kernels/layer_rows_mma.cuh (the rows kernel's own).

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


// y[n * N + r] = sum_k x[n][k] * (s * f + b) for NR <= 32 rows of x (bf16, K wide, read through
// L1) against 4-bit weights (groups G, a multiple of 64): a warp takes MT 16-row tiles over a
// K / KS slice (a block's KS warps of a tile add their slices in order), 64 columns a span:
// lane (g, q) reads words 2q, 2q + 1 of rows g and g + 8 and x-row 8j + g's same 16 columns,
// four m16n8k16 steps a span on the fields as they are (exact in bf16), then the span's sums
// scaled, and the bias times the span's sum of x (xs[n * K / 64 + span], computed once a row).
template <typename T, int BITS, int G, int K, int NT, int NR, int KS, int MT>
__device__ void lab_bmma(const T* x, const float* xs, const uint32_t* w, const T* scales,
                         const T* biases, float* y, int N) {
  static_assert(BITS == 4 && G % 64 == 0, "4-bit weights, groups of 64 or more");
  static_assert(NR <= 32 && (K / 64) % KS == 0 && (NT / 32) % KS == 0, "shapes");
  extern __shared__ float smem[];
  constexpr int NJ = (NR + 7) / 8, WORDS = K / 8, SPANS = K / 64, GROUPS = K / G;
  constexpr int PER = SPANS / KS, TB = NT / 32 / KS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int tb = warp / KS, ks = warp % KS;
  for (int item = blockIdx.x * TB + tb; item * 16 * MT < N; item += gridDim.x * TB) {
    float tot[MT][NJ][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int j = 0; j < NJ; ++j) tot[m][j][0] = tot[m][j][1] = tot[m][j][2] = tot[m][j][3] = 0.f;
    const int row0 = item * 16 * MT + g;
#pragma unroll 2
    for (int sp = ks * PER; sp < (ks + 1) * PER; ++sp) {
      const int grp = sp * 64 / G;
      uint2 wv[MT][2];
      float sc[MT][2], bi[MT][2];
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row0 + 16 * m + 8 * h;
          wv[m][h] = *reinterpret_cast<const uint2*>(w + (size_t)r * WORDS + sp * 8 + 2 * q);
          sc[m][h] = to_float(scales[(size_t)r * GROUPS + grp]);
          bi[m][h] = to_float(biases[(size_t)r * GROUPS + grp]);
        }
      }
      uint32_t a[MT][4][4];  // [tile][step][fragment]
#pragma unroll
      for (int m = 0; m < MT; ++m) span_fragments(wv[m][0], wv[m][1], a[m]);
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int n = 8 * j + g;
        uint4 xv[2];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          xv[t] = n < NR ? *reinterpret_cast<const uint4*>(x + (size_t)n * K + sp * 64 + (2 * q + t) * 8)
                         : make_uint4(0u, 0u, 0u, 0u);
        }
        const int n0 = 8 * j + 2 * q;
        const float x0 = n0 < NR ? xs[n0 * SPANS + sp] : 0.f;
        const float x1 = n0 + 1 < NR ? xs[(n0 + 1) * SPANS + sp] : 0.f;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          float d[4] = {0.f, 0.f, 0.f, 0.f};
          mma_span(d, a[m], xv);
          tot[m][j][0] = fmaf(sc[m][0], d[0], fmaf(bi[m][0], x0, tot[m][j][0]));
          tot[m][j][1] = fmaf(sc[m][0], d[1], fmaf(bi[m][0], x1, tot[m][j][1]));
          tot[m][j][2] = fmaf(sc[m][1], d[2], fmaf(bi[m][1], x0, tot[m][j][2]));
          tot[m][j][3] = fmaf(sc[m][1], d[3], fmaf(bi[m][1], x1, tot[m][j][3]));
        }
      }
    }
    // The tile's slices, added in slice order by its first warp.
    float* red = smem + ((tb * KS) * 32 + lane) * (MT * NJ * 4);
    if (ks > 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) red[ks * 32 * MT * NJ * 4 + (m * NJ + j) * 4 + e] = tot[m][j][e];
    }
    if (KS > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + tb), "r"(KS * 32));
    if (ks == 0) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float v = tot[m][j][e];
            for (int k2 = 1; k2 < KS; ++k2) v += red[k2 * 32 * MT * NJ * 4 + (m * NJ + j) * 4 + e];
            const int n = 8 * j + 2 * q + (e & 1), r = row0 + 16 * m + 8 * (e >> 1);
            if (n < NR && r < N) y[(size_t)n * N + r] = v;
          }
        }
      }
    }
    if (KS > 1) asm volatile("bar.sync %0, %1;" ::"r"(1 + tb), "r"(KS * 32));
  }
}

// The rows kernel's own tensor-core phase (kernels/layer_rows_mma.cuh's rows_phase_mma) over C
// copies of a layer's weights (stacked, each N x K) in one launch, block b taking ticket b of
// each copy in turn, as the rows kernel's phases of C layers would (without the waits: a copy's
// products only read x). y[b * N + r]: the first copy's products for the R batch rows, unrounded;
// NORM: x RMS-normed with nw (eps 1e-5); PS spans of x staged at once (rows.rs's mma_part_spans).
template <typename T, int G, int K, int NT, bool NORM>
__device__ void lab_rows_mma(const T* x, const T* nw, const uint32_t* w, const T* scales,
                             const T* biases, float* y, int N, int R, int PS, int other, int C) {
  for (int c = 0; c < C; ++c) {
    rows_phase_mma<T, G, K, NT, NORM>(
        x, nw, 1e-5f, R, PS, w + (size_t)c * N * (K / 8), scales + (size_t)c * N * (K / G),
        biases + (size_t)c * N * (K / G), blockIdx.x, other == 1 ? N : N / 2, other,
        [&](int b, int ra, int rb, float a, float v) {
          if (c == 0) {
            y[(size_t)b * N + ra] = a;
            y[(size_t)b * N + rb] = v;
          }
        });
  }
}

}  // namespace rmx
