// rmx's CUDA kernels, as NVRTC sources for mlx::core::fast::cuda_kernel: one file per section
// (kernel_source.rs builds a kernel's header from this file, the files its section uses, and its
// own). This file: the helpers every section uses.

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

// BITS-bit field j of a word as a float, lo = the word, hi = the word >> 16. The field is or-ed,
// in place, into the mantissa of 2^e with e = 23 - its bit position, so the float is
// 2^e + field exactly and one subtraction leaves the field: one LOP3 and one FADD per weight,
// no shift and no I2F (which runs at 1/4 rate). Fields above bit 15 come from hi, so a field's
// top bit stays within the 23-bit mantissa.
template <int BITS>
__device__ __forceinline__ float field(uint32_t lo, uint32_t hi, int j) {
  constexpr int HALF = 16 / BITS;
  const int p = j % HALF;
  const uint32_t mask = ((1u << BITS) - 1u) << (BITS * p);
  const uint32_t e = (127u + 23u - BITS * p) << 23;
  return __uint_as_float(((j < HALF ? lo : hi) & mask) | e) - __uint_as_float(e);
}

__device__ __forceinline__ float neg_inf() {
  return __int_as_float(0xff800000);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// v rounded to T and back: where mlx-lm's ops write an intermediate in the model's dtype, the
// fused kernels round there too, so they follow the op-by-op layer closely.
template <typename T>
__device__ __forceinline__ float round_t(float v) {
  return to_float(static_cast<T>(v));
}

// sigmoid(x) rounded to T, as MLX's sigmoid writes it.
template <typename T>
__device__ __forceinline__ float sigmoid_t(float x) {
  return round_t<T>(1.f / (1.f + __expf(-x)));
}

// mlx-lm's swiglu_oai (GPT-OSS's experts) of two unrounded products and their linear biases,
// each op rounded to T as its compiled ops round: g = min(gate + gb, limit), then
// (clip(up + ub, -limit, limit) + 1) * g * sigmoid(alpha * g); alpha and limit are constants
// of the model's dtype there (ap = {alpha, limit}).
template <typename T, typename P>
__device__ __forceinline__ T swiglu_oai_t(float gate, float up, float gb, float ub, const P* ap) {
  const float gt = round_t<T>(round_t<T>(gate) + gb);
  const float ut = round_t<T>(round_t<T>(up) + ub);
  const float limit = round_t<T>(to_float(ap[1]));
  const float gc = fminf(gt, limit);
  const float uc = fminf(fmaxf(ut, -limit), limit);
  const float glu = round_t<T>(gc * sigmoid_t<T>(round_t<T>(round_t<T>(to_float(ap[0])) * gc)));
  return static_cast<T>(round_t<T>(uc + 1.f) * glu);
}

// The sum of a short row of N values as MLX's CUDA backend sums a row of T (`sum(axis=-1)`,
// row_reduce_simple): in T, one rounding an addition; each thread adds 16 bytes of the row in
// order, and the threads' partial sums meet in a warp's butterfly ((p0 + p2) + (p1 + p3) for
// four).
template <typename T, int N>
__device__ __forceinline__ float seq_sum(const float* v) {
  constexpr int R = 16 / int(sizeof(T));
  constexpr int P = (N + R - 1) / R;
  static_assert(P <= 8, "a short row");
  float q[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < N; ++i) q[i / R] = round_t<T>(q[i / R] + v[i]);
#pragma unroll
  for (int o = 4; o > 0; o >>= 1) {
    if (o >= P) continue;  // adds zeros
    float n[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) n[i] = round_t<T>(q[i] + q[i ^ o]);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = n[i];
  }
  return q[0];
}

// The sum over each aligned group of LG lanes (a power of two), which every lane of the group
// gets; warp_sum's order at LG = 32.
template <int LG>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = LG / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One key/value position of a warp's online softmax (scores in log2 units: q carries
// log2(e)): the lane's PL elements of q, the key and the value; m, l and o are the running max,
// sum and weighted value row. decode_attn steps through its positions this way; the layer
// kernel takes several at once (online_chunk).
template <int PL>
__device__ __forceinline__ void online_step(
    const float* q, const float* kv, const float* vv, float& m, float& l, float* o) {
  float sc = 0.f;
#pragma unroll
  for (int p = 0; p < PL; ++p) sc = fmaf(q[p], kv[p], sc);
  sc = warp_sum(sc);
  const float mn = fmaxf(m, sc);
  const float f = exp2f(m - mn);
  const float e = exp2f(sc - mn);
  m = mn;
  l = l * f + e;
#pragma unroll
  for (int p = 0; p < PL; ++p) o[p] = fmaf(o[p], f, e * vv[p]);
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
