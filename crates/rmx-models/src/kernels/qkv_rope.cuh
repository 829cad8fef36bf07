namespace rmx {

// One q or k head of qkv_rope and prefill_heads, by a block of D/2 threads, thread i owning the
// rotary pair (i, i + D/2), or (2i, 2i + 1) when TRADITIONAL: the per-head RMS norm with weight
// w (rounded to T as MLX's rms_norm writes it) when NORM, then the rotation at position `at`.
// inv_freq holds MLX's per-pair inverse frequencies (times the rope scale); theta = at *
// inv_freq as in MLX's rope kernel.
template <typename T, int D, bool NORM, bool TRADITIONAL>
__device__ __forceinline__ void norm_rope_pair(const T* src, const T* w, float eps,
                                               const float* inv_freq, int at, T* dst) {
  const int i = threadIdx.x;
  const int i1 = TRADITIONAL ? 2 * i : i;
  const int i2 = TRADITIONAL ? 2 * i + 1 : i + D / 2;
  float x1 = to_float(src[i1]);
  float x2 = to_float(src[i2]);
  if constexpr (NORM) {
    __shared__ float part[32];
    float ss = warp_sum(x1 * x1 + x2 * x2);
    if ((i & 31) == 0) part[i >> 5] = ss;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int j = 0; j < (D / 2 + 31) / 32; ++j) total += part[j];
    const float inv = rsqrtf(total / D + eps);
    x1 = to_float(static_cast<T>(to_float(static_cast<T>(x1 * inv)) * to_float(w[i1])));
    x2 = to_float(static_cast<T>(to_float(static_cast<T>(x2 * inv)) * to_float(w[i2])));
  }
  const float theta = static_cast<float>(at) * inv_freq[i];
  const float c = cos(theta), s = sin(theta);
  dst[i1] = static_cast<T>(x1 * c - x2 * s);
  dst[i2] = static_cast<T>(x1 * s + x2 * c);
}

// After the fused QKV product of one token: split [q | k | v] into heads, apply the per-head RMS
// norms (Qwen3, Gemma 3) and the rotary embedding at `offset`, and write q, k, v as [1, heads, 1,
// D] -- the ops mlx-lm runs as a split, three reshapes, two norms, three transposes and two ropes,
// so one launch instead of eleven graph nodes. One block per head (norm_rope_pair).
template <typename T, int H, int KV, int D, bool NORM, bool TRADITIONAL>
__device__ __forceinline__ void qkv_rope(
    const T* qkv, const T* qn, const T* kn, const float* inv_freq, const int32_t* offset,
    const float* eps, T* q, T* k, T* v) {
  const int h = blockIdx.x;
  const int i = threadIdx.x;
  const int i1 = TRADITIONAL ? 2 * i : i;
  const int i2 = TRADITIONAL ? 2 * i + 1 : i + D / 2;
  if (h >= H + KV) {  // v: a copy into its own array
    const T* src = qkv + (size_t)(H + KV) * D + (size_t)(h - H - KV) * D;
    T* dst = v + (size_t)(h - H - KV) * D;
    dst[i1] = src[i1];
    dst[i2] = src[i2];
    return;
  }
  const bool is_q = h < H;
  T* dst = is_q ? q + (size_t)h * D : k + (size_t)(h - H) * D;
  norm_rope_pair<T, D, NORM, TRADITIONAL>(qkv + (size_t)h * D, is_q ? qn : kn, eps[0], inv_freq,
                                          offset[0], dst);
}

// A prompt chunk's n rows of the fused QKV product ([n, (H + 2 KV) * D]), each row through
// qkv_rope's math at position offset + row: q as [n, H, D], which the caller views as [1, H, n,
// D], so MLX's attention writes its output in the [n, H * D] layout the o projection reads
// without a copy; k and v as [KV, CAP, D] with rows n..CAP zeroed, so that with CAP past n they
// are a fresh cache's buffers. It replaces the split, three reshapes (copies), two norms, two
// ropes, the cache's two zero fills and its two slice_updates: 12 graph nodes and ~135 µs a layer
// of Qwen3-0.6B's 2K prefill on the H100. Block (head slot, row) of D/2 threads; CAP = gridDim.y;
// pos = {offset, n}.
template <typename T, int H, int KV, int D, bool NORM, bool TRADITIONAL>
__device__ __forceinline__ void prefill_heads(
    const T* qkv, const T* qn, const T* kn, const float* inv_freq, const int32_t* pos,
    const float* eps, T* q, T* k, T* v) {
  const int h = blockIdx.x;
  const int row = blockIdx.y;
  const int cap = gridDim.y;
  const int i = threadIdx.x;
  const int n = pos[1];
  const int i1 = TRADITIONAL ? 2 * i : i;
  const int i2 = TRADITIONAL ? 2 * i + 1 : i + D / 2;
  const bool is_q = h < H;
  const bool is_v = h >= H + KV;
  T* dst = is_q ? q + ((size_t)row * H + h) * D
                : (is_v ? v : k) + ((size_t)(h - H - (is_v ? KV : 0)) * cap + row) * D;
  if (row >= n) {  // the whole block: no thread reaches the norm's barrier
    if (!is_q) {
      dst[i1] = static_cast<T>(0.f);
      dst[i2] = static_cast<T>(0.f);
    }
    return;
  }
  const T* src = qkv + (size_t)row * (H + 2 * KV) * D + (size_t)h * D;
  if (is_v) {
    dst[i1] = src[i1];
    dst[i2] = src[i2];
    return;
  }
  norm_rope_pair<T, D, NORM, TRADITIONAL>(src, is_q ? qn : kn, eps[0], inv_freq, pos[0] + row,
                                          dst);
}

}  // namespace rmx
