namespace rmx {

// A mixture-of-experts layer's decode step for one token, in two launches, instead of MLX's
// gather_qmm (three launches that read the chosen experts at a fraction of the bandwidth) and
// the ops around it. The experts' gate and up weights are fused per expert, [E, 2F, K] (gate
// rows first), as qgemv_swiglu's [2F, K]; down is [E, N, F].
// The chosen experts' gate/up products are qgemv_swiglu with EXPERTS (section qgemv).
// moe_down: y[n] = sum_j scores[j] * (act[j] . down[e_j, n]), each expert's product rounded to
// T before it is weighted, as mlx-lm's separate ops round it. K is the experts' hidden size F.
// With BIAS, expert e's linear bias db[e, n] ([E, N]) is added to its product, rounded to T.
// With RES, the layer's residual res[n] is added to the rounded sum (the decoder layer's
// `x + moe(norm(x))` in the same launch).
// Grid: x over warps of ROWS outputs.
template <typename T, int BITS, int G, int ROWS, int K, int TOPK, bool BIAS = false,
          bool RES = false>
__device__ __forceinline__ void moe_down(
    const T* act, const uint32_t* w, const T* scales, const T* biases, const uint32_t* idx,
    const T* scores, T* y, int N, const T* db = nullptr, const T* res = nullptr) {
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int row0 = warp * ROWS;
  if (row0 >= N) return;
  float total[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) total[r] = 0.f;
  for (int j = 0; j < TOPK; ++j) {
    const size_t e = idx[j];
    const uint32_t* we = w + e * N * WORDS;
    const T* se = scales + e * N * GROUPS;
    const T* be = biases + e * N * GROUPS;
    const T* xr = act + (size_t)j * K;
    float acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
    float ss = 0.f;
#pragma unroll 2
    for (int c = lane; c < CHUNKS; c += 32) {
      float xf[PER], xsum;
      load_x<T, PER, false>(xr, nullptr, c, xf, xsum, ss);
      chunk_dot<T, BITS, G, ROWS>(xf, xsum, we, se, be, row0, N, c, WORDS, GROUPS, acc);
    }
    const float sj = to_float(scores[j]);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float d = to_float(static_cast<T>(warp_sum(acc[r])));
      if constexpr (BIAS) {
        if (row0 + r < N) d = to_float(static_cast<T>(d + to_float(db[e * N + row0 + r])));
      }
      total[r] = fmaf(sj, d, total[r]);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r < N) {
        if constexpr (RES) {
          y[row0 + r] =
              static_cast<T>(to_float(static_cast<T>(total[r])) + to_float(res[row0 + r]));
        } else {
          y[row0 + r] = static_cast<T>(total[r]);
        }
      }
    }
  }
}

// A router's choice for one token in one launch, where mlx-lm runs softmax, argpartition,
// take_along_axis and the renormalization as separate ops. MODE 0: the softmax of the E logits
// (in float32, written in T as softmax(precise=True) writes it), its TOPK largest entries and
// their ids; MODE 1: those entries divided by their sum (norm_topk_prob); MODE 2 (GPT-OSS): the
// TOPK largest logits and a softmax over them. A tie goes to the lower id. The order of the
// chosen experts is largest first (mlx-lm's argpartition leaves it unspecified; the experts'
// sum is the same set either way). logits: [E]; idx: uint32 [TOPK]; scores: T [TOPK]. One warp.
template <typename T, int E, int TOPK, int MODE>
__device__ __forceinline__ void moe_route(const T* logits, uint32_t* idx, T* scores) {
  constexpr int PL = (E + 31) / 32;
  const int lane = threadIdx.x & 31;
  float v[PL];
  float mx = neg_inf();
#pragma unroll
  for (int p = 0; p < PL; ++p) {
    const int e = lane + 32 * p;
    v[p] = e < E ? to_float(logits[e]) : neg_inf();
    mx = fmaxf(mx, v[p]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if constexpr (MODE != 2) {
    float sum = 0.f;
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p < E) sum += expf(v[p] - mx);
    sum = warp_sum(sum);
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p < E) v[p] = to_float(static_cast<T>(expf(v[p] - mx) / sum));
  }
  float picked[TOPK];
  int ids[TOPK];
#pragma unroll
  for (int j = 0; j < TOPK; ++j) {
    float best = neg_inf();
    int bi = E;
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const int e = lane + 32 * p;
      if (e < E && (v[p] > best || bi == E)) {
        best = v[p];
        bi = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ob > best || (ob == best && oi < bi)) {
        best = ob;
        bi = oi;
      }
    }
    picked[j] = best;
    ids[j] = bi;
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p == bi) v[p] = neg_inf();
  }
  if (lane != 0) return;
  if constexpr (MODE == 1) {
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < TOPK; ++j) sum += picked[j];
    const float total = to_float(static_cast<T>(sum));
#pragma unroll
    for (int j = 0; j < TOPK; ++j) picked[j] = picked[j] / total;
  } else if constexpr (MODE == 2) {
    // picked[0] is the largest logit; kept apart, as the loop below overwrites picked[0] first.
    const float top = picked[0];
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < TOPK; ++j) sum += expf(picked[j] - top);
#pragma unroll
    for (int j = 0; j < TOPK; ++j) picked[j] = expf(picked[j] - top) / sum;
  }
#pragma unroll
  for (int j = 0; j < TOPK; ++j) {
    idx[j] = static_cast<uint32_t>(ids[j]);
    scores[j] = static_cast<T>(picked[j]);
  }
}

}  // namespace rmx
