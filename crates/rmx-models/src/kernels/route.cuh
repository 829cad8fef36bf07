namespace rmx {

// A router's choice for one token in one launch, where mlx-lm runs softmax, argpartition,
// take_along_axis and the renormalization as separate ops. MODE 0: the softmax of the E logits
// (in float32, written in T as softmax(precise=True) writes it), its TOPK largest entries and
// their ids; MODE 1: those entries divided by their sum (norm_topk_prob); MODE 2 (GPT-OSS): the
// TOPK largest logits and a softmax over them. logits: [E]; idx: uint32 [TOPK]; scores: T
// [TOPK]. One warp.
//
// Which experts and in what order follow MLX's CUDA backend, where mlx-lm's
// `argpartition(gates, kth=-k)[..., -k:]` is a stable ascending sort: of equal scores (common
// in bf16) the higher id is chosen, and the chosen come smallest first, equal ones by id. The
// order matters: MLX sums a bf16 row (the renormalization's total) and the experts' weighted
// products (`.sum(axis=-2)`) in T, one rounding an addition, in that order (`seq_sum`).
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
    // As MLX's softmax kernel: fast exponentials, times the sum's reciprocal.
    float sum = 0.f;
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p < E) sum += __expf(v[p] - mx);
    const float inv = 1.f / warp_sum(sum);
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p < E) v[p] = round_t<T>(__expf(v[p] - mx) * inv);
  }
  // The largest (score, id) first; stored in reverse, smallest first.
  float picked[TOPK];
  int ids[TOPK];
#pragma unroll
  for (int j = 0; j < TOPK; ++j) {
    float best = neg_inf();
    int bi = -1;
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const int e = lane + 32 * p;
      if (e < E && v[p] >= best) {  // ascending ids: a tie goes to the later one
        best = v[p];
        bi = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ob > best || (ob == best && oi > bi)) {
        best = ob;
        bi = oi;
      }
    }
    picked[TOPK - 1 - j] = best;
    ids[TOPK - 1 - j] = bi;
#pragma unroll
    for (int p = 0; p < PL; ++p)
      if (lane + 32 * p == bi) v[p] = neg_inf();
  }
  if (lane != 0) return;
  if constexpr (MODE == 1) {
    const float total = seq_sum<T, TOPK>(picked);
#pragma unroll
    for (int j = 0; j < TOPK; ++j) picked[j] = picked[j] / total;
  } else if constexpr (MODE == 2) {
    // The softmax over the chosen logits, as MLX's kernel computes it.
    float top = picked[0];
#pragma unroll
    for (int j = 1; j < TOPK; ++j) top = fmaxf(top, picked[j]);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < TOPK; ++j) sum += __expf(picked[j] - top);
    const float inv = 1.f / sum;
#pragma unroll
    for (int j = 0; j < TOPK; ++j) picked[j] = __expf(picked[j] - top) * inv;
  }
#pragma unroll
  for (int j = 0; j < TOPK; ++j) {
    idx[j] = static_cast<uint32_t>(ids[j]);
    scores[j] = static_cast<T>(picked[j]);
  }
}

}  // namespace rmx
