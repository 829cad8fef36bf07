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

// The same products with mma: a warp takes 16 weight rows x the NR rows (8-column tiles, the
// weights' fragment serving each). Lane t (g = t / 4, q = t % 4) loads word q of a chunk for
// weight rows g and g + 8: its even fields shifted up four bits (k = 4q..4q+3) and its odd
// fields in place (k = 16 + 4q..), both x16 as chunk_sums_fields has them; against x-row
// 8j + g's plane words 2q (even elements) and 2q + 1 (odd ones) for tile j; one mma a plane,
// ia = hi * 254 + lo. It owns (weight row g or g + 8) x (x-row 8j + 2q or 8j + 2q + 1) and sums
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
  constexpr int GROUPS = K / G;
  constexpr int TILES = (NR + 7) / 8;
  static_assert(NR <= 32, "up to four 8-column tiles");
  constexpr int PLANE = L::SL * L::CHUNKS * 4;  // words of a plane
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
        const uint32_t ua = wa[4 * c], ub = wb[4 * c];
        const uint32_t a[4] = {(ua & 0x0f0f0f0fu) << 4, (ub & 0x0f0f0f0fu) << 4,
                               ua & 0xf0f0f0f0u, ub & 0xf0f0f0f0u};
        const int grp = (L::PER * c) / G;
        const float sa = to_float(scales[(size_t)ra * GROUPS + grp]);
        const float ba = to_float(biases[(size_t)ra * GROUPS + grp]);
        const float sb = to_float(scales[(size_t)rb * GROUPS + grp]);
        const float bb = to_float(biases[(size_t)rb * GROUPS + grp]);
        // x-row 8j + g's words 2q, 2q + 1 of chunk c sit in its 16-byte slot q / 2.
        const int at = ((q >> 1) * L::CHUNKS + c) * 4 + 2 * (q & 1);
#pragma unroll
        for (int j = 0; j < TILES; ++j) {
          const bool has_x = 8 * j + g < NR;
          const uint32_t* xp = reinterpret_cast<const uint32_t*>(
              L::planes(smem + (has_x ? 8 * j + g : 0) * STRIDE));
          const uint32_t bh[2] = {has_x ? xp[at] : 0u, has_x ? xp[at + 1] : 0u};
          const uint32_t bl[2] = {has_x ? xp[PLANE + at] : 0u, has_x ? xp[PLANE + at + 1] : 0u};
          int dh[4] = {0, 0, 0, 0}, dl[4] = {0, 0, 0, 0};
          mma_u8s8(dh, a, bh);
          mma_u8s8(dl, a, bl);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int xr = 8 * j + 2 * q + (e & 1);
            const float2 m = xr < NR ? L::meta(smem + xr * STRIDE)[c] : make_float2(0.f, 0.f);
            const float s = e < 2 ? sa : sb, b = e < 2 ? ba : bb;
            const int ia = dh[e] * 254 + dl[e];
            acc[j][e] = fmaf(s * m.x, static_cast<float>(ia), fmaf(b, m.y, acc[j][e]));
          }
        }
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
#pragma unroll
    for (int j = 0; j < TILES; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int xr = 8 * j + 2 * q + (e & 1);
        const int r = e < 2 ? ra : rb;
        if (xr < NR && r < N) y[(size_t)xr * N + r] = st[0][j][e];
      }
    }
  }
}

}  // namespace rmx
