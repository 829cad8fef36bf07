namespace rmx {

// Rows of an affine-quantized embedding for token ids, as MLX's take (weights, scales, biases)
// and affine_dequantize compute them (each value `T(q) * scale + bias`, both steps rounded to
// T by T's own operators, as there), in one launch instead of four (17 us a decode step on the
// H100, docs/perf.md session 23). An id past the table reads its last row.
// Grid: x over a row's 32-bit words, y over the ids.
template <typename T, typename I, int BITS, int G, int DIM, int VOCAB>
__device__ __forceinline__ void embed_rows(const I* ids, const uint32_t* w, const T* scales,
                                           const T* biases, T* out) {
  constexpr int VPW = 32 / BITS;  // values a word
  constexpr int WPR = DIM / VPW;  // words a row
  static_assert(DIM % VPW == 0 && G % VPW == 0, "whole words, a group's");
  const int wi = blockIdx.x * blockDim.x + threadIdx.x;
  if (wi >= WPR) return;
  const size_t tok = blockIdx.y;
  const long long id = static_cast<long long>(ids[tok]);
  const size_t r = id < 0 ? 0 : (id >= VOCAB ? VOCAB - 1 : static_cast<size_t>(id));
  const uint32_t u = w[r * WPR + wi];
  const size_t g = r * (DIM / G) + (wi * VPW) / G;
  const T s = scales[g];
  const T b = biases[g];
  T* o = out + tok * DIM + (size_t)wi * VPW;
#pragma unroll
  for (int j = 0; j < VPW; ++j) {
    const T q = static_cast<T>(static_cast<float>((u >> (BITS * j)) & ((1u << BITS) - 1u)));
    o[j] = q * s + b;
  }
}

}  // namespace rmx
