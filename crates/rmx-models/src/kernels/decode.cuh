// Decode kernels. Quantized matrix-vector products (a few rows of x against MLX affine-quantized
// weights), as NVRTC sources for mlx::core::fast::cuda_kernel. MLX's own CUDA qmv reaches ~0.66
// TB/s at 4-bit on an H100 (../shared/PERF-BASELINES.md); decode is bound by reading the weights
// once, so these kernels are written for bandwidth: 16-byte weight loads coalesced across a warp,
// several rows per warp so each slice of x is loaded once for all of them, nibbles turned into
// floats with the exponent trick instead of int->float conversions (which run at 1/4 rate).
//
// Layout (MLX affine, `mx.quantize`): w is uint32 [N, K*BITS/32], value j of a word in bits
// [BITS*j, BITS*j+BITS); scales and biases are T [N, K/G]; W[n,k] = w*scale + bias.
// One warp computes ROWS consecutive outputs y[m, n..n+ROWS) = x[m, :] . W[n, :].

// @section common
namespace rmx {

template <typename T>
struct Vec8;  // eight T loaded as one 16-byte vector, converted to float

template <>
struct Vec8<__nv_bfloat16> {
  __device__ __forceinline__ static void load(const __nv_bfloat16* p, float* out) {
    uint4 v = *reinterpret_cast<const uint4*>(p);
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(u[i] << 16);
      out[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  }
};

template <>
struct Vec8<__half> {
  __device__ __forceinline__ static void load(const __half* p, float* out) {
    uint4 v = *reinterpret_cast<const uint4*>(p);
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f = __half22float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
};

template <>
struct Vec8<float> {
  __device__ __forceinline__ static void load(const float* p, float* out) {
    float4 a = *reinterpret_cast<const float4*>(p);
    float4 b = *reinterpret_cast<const float4*>(p + 4);
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
  }
};

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  return static_cast<float>(v);
}

// BITS-bit field j of word u as a float: or-ing it into the mantissa of 2^23 and subtracting
// 2^23 is exact for values below 2^23 and avoids I2F.
template <int BITS>
__device__ __forceinline__ float field(uint32_t u, int j) {
  constexpr uint32_t mask = (1u << BITS) - 1u;
  return __uint_as_float(0x4b000000u | ((u >> (BITS * j)) & mask)) - 8388608.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ uint4 load_stream(const uint32_t* p) {
  // Weights are read once per token: don't let them evict x from L1.
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

}  // namespace rmx

// @section qgemv
namespace rmx {

// Dot products of one 16-byte chunk of each of ROWS rows with the matching slice of x.
// A chunk holds PER = 128/BITS weights: 32 at 4-bit, 16 at 8-bit.
template <typename T, int BITS, int G, int ROWS>
__device__ __forceinline__ void chunk_dot(
    const T* xr, const uint32_t* w, const T* scales, const T* biases,
    int row0, int N, int c, int words_per_row, int groups_per_row, float* acc) {
  constexpr int PER = 128 / BITS;
  constexpr int VPW = 32 / BITS;  // values per word
  float xf[PER];
#pragma unroll
  for (int i = 0; i < PER / 8; ++i) Vec8<T>::load(xr + PER * c + 8 * i, xf + 8 * i);
  float xsum = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) xsum += xf[i];
  uint4 wv[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    int row = min(row0 + r, N - 1);
    wv[r] = load_stream(w + (size_t)row * words_per_row + 4 * c);
  }
  const int g = (PER * c) / G;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    int row = min(row0 + r, N - 1);
    float s = to_float(scales[(size_t)row * groups_per_row + g]);
    float b = to_float(biases[(size_t)row * groups_per_row + g]);
    const uint32_t u[4] = {wv[r].x, wv[r].y, wv[r].z, wv[r].w};
    float d = 0.f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
      for (int j = 0; j < VPW; ++j) d = fmaf(xf[VPW * q + j], field<BITS>(u[q], j), d);
    }
    acc[r] = fmaf(s, d, fmaf(b, xsum, acc[r]));
  }
}

// y[m, n] for ROWS rows per warp; grid.y indexes m. K must be a multiple of one chunk (128/BITS)
// and G of the chunk, which MLX's quantization (G >= 32) gives. With RES, y = x W^T + res: the
// product is rounded to T first and then added, as the separate ops would.
template <typename T, int BITS, int G, int ROWS, int K, bool RES = false>
__device__ __forceinline__ void qgemv(
    const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int N,
    const T* res = nullptr) {
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int m = blockIdx.y;
  const int row0 = warp * ROWS;
  if (row0 >= N) return;
  const T* xr = x + (size_t)m * K;
  float acc[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
#pragma unroll 4
  for (int c = lane; c < CHUNKS; c += 32)
    chunk_dot<T, BITS, G, ROWS>(xr, w, scales, biases, row0, N, c, WORDS, GROUPS, acc);
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = warp_sum(acc[r]);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r < N) {
        size_t i = (size_t)m * N + row0 + r;
        if constexpr (RES) {
          y[i] = static_cast<T>(to_float(static_cast<T>(acc[r])) + to_float(res[i]));
        } else {
          y[i] = static_cast<T>(acc[r]);
        }
      }
    }
  }
}

// The MLP's first half for one token: gate and up are the two halves of one fused weight
// [2*F, K] (gate rows first); out[m, f] = silu(gate) * up, so the [2F] intermediate never
// reaches memory. ROWS outputs per warp means 2*ROWS weight rows.
template <typename T, int BITS, int G, int ROWS, int K>
__device__ __forceinline__ void qgemv_swiglu(
    const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int F) {
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int m = blockIdx.y;
  const int row0 = warp * ROWS;
  if (row0 >= F) return;
  const T* xr = x + (size_t)m * K;
  float g[ROWS], u[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) g[r] = u[r] = 0.f;
#pragma unroll 2
  for (int c = lane; c < CHUNKS; c += 32) {
    chunk_dot<T, BITS, G, ROWS>(xr, w, scales, biases, row0, F, c, WORDS, GROUPS, g);
    chunk_dot<T, BITS, G, ROWS>(
        xr, w + (size_t)F * WORDS, scales + (size_t)F * GROUPS, biases + (size_t)F * GROUPS,
        row0, F, c, WORDS, GROUPS, u);
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    g[r] = warp_sum(g[r]);
    u[r] = warp_sum(u[r]);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r < F) {
        // Round gate and up to T first, as mlx-lm's separate matmuls would.
        float gt = to_float(static_cast<T>(g[r]));
        float ut = to_float(static_cast<T>(u[r]));
        float silu = gt / (1.f + __expf(-gt));
        y[(size_t)m * F + row0 + r] = static_cast<T>(to_float(static_cast<T>(silu)) * ut);
      }
    }
  }
}

}  // namespace rmx

// @section qkv_rope
namespace rmx {

// After the fused QKV product of one token: split [q | k | v] into heads, apply the per-head RMS
// norms (Qwen3, Gemma 3) and the rotary embedding at `offset`, and write q, k, v as [1, heads, 1,
// D] -- the ops mlx-lm runs as a split, three reshapes, two norms, three transposes and two ropes,
// so one launch instead of eleven graph nodes. One block per head, thread i owns the rotary pair
// (i, i + D/2), or (2i, 2i + 1) when TRADITIONAL. inv_freq holds MLX's per-pair inverse
// frequencies (times the rope scale); theta = offset * inv_freq as in MLX's rope kernel.
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
  const T* src = qkv + (size_t)h * D;
  T* dst = is_q ? q + (size_t)h * D : k + (size_t)(h - H) * D;
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
    const float inv = rsqrtf(total / D + eps[0]);
    const T* w = is_q ? qn : kn;
    x1 = to_float(static_cast<T>(to_float(static_cast<T>(x1 * inv)) * to_float(w[i1])));
    x2 = to_float(static_cast<T>(to_float(static_cast<T>(x2 * inv)) * to_float(w[i2])));
  }
  const float theta = static_cast<float>(offset[0]) * inv_freq[i];
  const float c = cos(theta), s = sin(theta);
  dst[i1] = static_cast<T>(x1 * c - x2 * s);
  dst[i2] = static_cast<T>(x1 * s + x2 * c);
}

}  // namespace rmx
