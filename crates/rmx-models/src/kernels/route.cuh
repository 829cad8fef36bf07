namespace rmx {

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
