namespace rmx {

// A mixture-of-experts layer's decode step for one token, in two launches, instead of MLX's
// gather_qmm (three launches that read the chosen experts at a fraction of the bandwidth) and
// the ops around it. The experts' gate and up weights are fused per expert, [E, 2F, K] (gate
// rows first), as qgemv_swiglu's [2F, K]; down is [E, N, F].
// The chosen experts' gate/up products are qgemv_swiglu with EXPERTS (section qgemv).
// moe_down: y[n] = sum_j scores[j] * (act[j] . down[e_j, n]), each expert's product rounded to
// T before it is weighted, the weighted ones summed in T in moe_route's order, as MLX runs
// mlx-lm's separate ops. K is the experts' hidden size F.
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
      // Weighted and summed in T in the choice's order, as MLX's `.sum(axis=-2)` adds them.
      total[r] = round_t<T>(total[r] + round_t<T>(sj * d));
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

}  // namespace rmx
