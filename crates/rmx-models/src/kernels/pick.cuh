namespace rmx {

// Greedy choice as mlx-lm makes it, argmax(logits - logsumexp(logits)) with the first index
// winning a tie, for R rows of V logits in one launch. MLX runs it as a subtract and a one-block
// argmax a row (23 us over 128,256 logits on the H100, docs/perf.md session 23); here BPR blocks
// share a row. Each rounds l - lse to T exactly as MLX's subtract does (the same T operator),
// keeps its best (value, first index) as MLX's ArgMax compares them (a larger value, or an equal
// one at a smaller index; NaN never wins; it starts from (-inf, 0)), and publishes it with one
// 64-bit atomicMax: the value in the high word made order-preserving, the index complemented in
// the low word so that the smaller one wins a tie. The row's last block to count itself in
// writes the token and zeroes the row's key and count for the next launch.
// keys: 2 * RMAX words (a 64-bit key a row), then a count a row; zero before the first launch.
// Grid: x over BPR blocks of NT threads, y over rows.
__device__ __forceinline__ unsigned int order_key(float f) {
  // -0 as +0, which the float comparisons hold equal (on the bits: no compiler flag folds it).
  unsigned int u = __float_as_uint(f);
  if ((u << 1) == 0u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <typename T>
__device__ __forceinline__ float minus_lse(T l, T lse) {
  return to_float(static_cast<T>(l - lse));
}

template <typename T, int NT, int BPR, int RMAX>
__device__ __forceinline__ void greedy_pick(const T* logits, const T* lse, int V,
                                            const uint32_t* keys_in, uint32_t* out) {
  uint32_t* keys = const_cast<uint32_t*>(keys_in);
  const int row = blockIdx.y;
  const T* lr = logits + (size_t)row * V;
  const T m = lse[row];
  float best = neg_inf();
  int bi = 0;
  // Each thread takes its elements in increasing order, so a later equal value never replaces.
  for (int i = blockIdx.x * NT + threadIdx.x; i < V; i += BPR * NT) {
    const float v = minus_lse<T>(lr[i], m);
    if (v > best) best = v, bi = i;
  }
  // Across threads: larger value, then smaller index (NaN was never taken).
  unsigned long long key =
      (static_cast<unsigned long long>(order_key(best)) << 32) | (0xffffffffu - (uint32_t)bi);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long k = __shfl_xor_sync(0xffffffffu, key, o);
    key = k > key ? k : key;
  }
  __shared__ unsigned long long warp_best[NT / 32];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = key;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < NT / 32; ++w) key = warp_best[w] > key ? warp_best[w] : key;
    unsigned long long* row_key = reinterpret_cast<unsigned long long*>(keys) + row;
    unsigned int* count = keys + 2 * RMAX + row;
    atomicMax(row_key, key);
    __threadfence();
    if (atomicAdd(count, 1u) == BPR - 1) {
      const unsigned long long k = atomicExch(row_key, 0ull);
      *count = 0;
      out[row] = 0xffffffffu - static_cast<uint32_t>(k & 0xffffffffull);
    }
  }
}

}  // namespace rmx
