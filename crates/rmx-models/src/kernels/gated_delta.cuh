namespace rmx {

// The gated delta rule (Gated DeltaNet's recurrence) over T tokens in one launch, the
// computation of mlx-lm's gated_delta_ops and of its Metal kernel: for each token,
//   state *= g;  kv = state . k;  delta = (v - kv) * beta;  state += k (x) delta;  y = state . q
// with state [Dv, Dk] per value head in float32. One warp per (sequence x value head, value
// row): each lane keeps Dk/32 of the row's state in registers across all T tokens, and two warp
// sums per token give kv and y. Value head hv reads key head hv / (Hv / Hk).
// q, k: [B, T, Hk, Dk]; v, y: [B, T, Hv, Dv]; g: float [B, T, Hv]; beta: [B, T, Hv];
// state_in, state_out: float [B, Hv, Dv, Dk]; tlen: float [1] holding T (an input, so one
// compiled kernel serves every prompt length).
// Grid: x 32 lanes, y over Dv (4 rows a block), z over B * Hv.
template <typename T, int Dk, int Dv, int Hk, int Hv>
__device__ __forceinline__ void gated_delta(const T* q, const T* k, const T* v, const float* g,
                                            const T* beta, const float* state_in,
                                            const float* tlen, T* y, float* state_out) {
  constexpr int NP = Dk / 32;
  const int steps = static_cast<int>(tlen[0]);
  const int n = blockIdx.z;
  const int b = n / Hv, hv = n % Hv, hk = hv / (Hv / Hk);
  const int lane = threadIdx.x;
  const int dv = blockIdx.y * blockDim.y + threadIdx.y;
  if (dv >= Dv) return;
  const T* qp = q + (static_cast<size_t>(b) * steps * Hk + hk) * Dk + NP * lane;
  const T* kp = k + (static_cast<size_t>(b) * steps * Hk + hk) * Dk + NP * lane;
  const T* vp = v + (static_cast<size_t>(b) * steps * Hv + hv) * Dv + dv;
  T* yp = y + (static_cast<size_t>(b) * steps * Hv + hv) * Dv + dv;
  const float* gp = g + static_cast<size_t>(b) * steps * Hv + hv;
  const T* bp = beta + static_cast<size_t>(b) * steps * Hv + hv;
  const size_t row = (static_cast<size_t>(n) * Dv + dv) * Dk + NP * lane;
  float s[NP];
#pragma unroll
  for (int i = 0; i < NP; ++i) s[i] = state_in[row + i];
  for (int t = 0; t < steps; ++t) {
    const float gt = gp[static_cast<size_t>(t) * Hv];
    float kv[NP];
    float mem = 0.f;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      kv[i] = to_float(kp[static_cast<size_t>(t) * Hk * Dk + i]);
      s[i] *= gt;
      mem = fmaf(s[i], kv[i], mem);
    }
    mem = warp_sum(mem);
    const float vt = to_float(vp[static_cast<size_t>(t) * Hv * Dv]);
    const float delta = (vt - mem) * to_float(bp[static_cast<size_t>(t) * Hv]);
    float out = 0.f;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      s[i] = fmaf(kv[i], delta, s[i]);
      out = fmaf(s[i], to_float(qp[static_cast<size_t>(t) * Hk * Dk + i]), out);
    }
    out = warp_sum(out);
    if (lane == 0) yp[static_cast<size_t>(t) * Hv * Dv] = static_cast<T>(out);
  }
#pragma unroll
  for (int i = 0; i < NP; ++i) state_out[row + i] = s[i];
}

}  // namespace rmx

namespace rmx {

// One element of the projection: through L2 (CG) where another block of the same launch wrote
// it (the layer kernel's in-projection phase), as a plain load where an earlier launch did.
template <bool CG, typename T>
__device__ __forceinline__ float proj_at(const T* p) {
  if constexpr (CG) {
    return to_float(__ldcg(p));
  } else {
    return to_float(*p);
  }
}

// A Gated DeltaNet layer's decode step (one token per sequence) after its joined input
// projection, in one launch. What mlx-lm's qwen3_5.py runs as ~25 ops: the causal convolution
// over the cached inputs and this token's (with SiLU), the new convolution cache, q and k
// L2-normed (as RMS norms, q times Dk^-1, k times Dk^-1/2), beta = sigmoid(b), the decay
// g = exp(rate * softplus(a + dt_bias)), the gated delta rule on the state, and the output's RMS
// norm gated by silu(z).
// proj: [B, P] = [qkv (C) | z (Hv*Dv) | b (Hv) | a (Hv)], C = 2*Hk*Dk + Hv*Dv; conv_in and
// conv_out: [B, K-1, C]; conv_w: [C, K]; dt_bias: [Hv]; rate: float [Hv] (-exp(A_log));
// norm_w: [Dv]; state_in/out: float [B, Hv, Dv, Dk]; eps: float [2] {norm eps, q/k eps};
// y: [B, Hv*Dv]. A block per (sequence, value head) of NT threads: the threads make the key
// head's q and k and the head's v (a channel or a few each), then each warp takes value rows
// dv = warp, warp + NT/32, ... (each lane Dk/32 of a row's state, as gated_delta), then the
// block norms the head's output.
// The q/k channels of the convolution cache are written by the first value head of their key
// head, the v channels by their own.
// delta_head is sequence x value head n's share, which every thread of the block calls: the
// standalone kernel's block n (delta_step), or a ticket of the layer kernel's DeltaNet phase
// (kernels/layer_delta.cuh), which reads proj through L2 (CG: another block wrote it).
template <typename T, typename W, int Dk, int Dv, int Hk, int Hv, int K, int NT, bool CG>
__device__ __forceinline__ void delta_head(int n, const T* proj, const T* conv_in, const W* conv_w,
                                           const W* dt_bias, const float* rate, const W* norm_w,
                                           const float* state_in, float eps_norm, float eps_qk,
                                           T* y, T* conv_out, float* state_out) {
  constexpr int C = 2 * Hk * Dk + Hv * Dv;
  constexpr int P = C + Hv * Dv + 2 * Hv;
  constexpr int NW = NT / 32;
  constexpr int NP = Dk / 32;
  __shared__ float sq[Dk], sk[Dk], sv[Dv], sy[Dv], red[3];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = n / Hv, hv = n % Hv, hk = hv / (Hv / Hk);
  const T* pr = proj + static_cast<size_t>(b) * P;
  const T* ci = conv_in + static_cast<size_t>(b) * (K - 1) * C;
  T* co = conv_out + static_cast<size_t>(b) * (K - 1) * C;
  const bool owns_qk = hv % (Hv / Hk) == 0;
  for (int i = tid; i < 2 * Dk + Dv; i += NT) {
    const int c = i < Dk       ? hk * Dk + i
                  : i < 2 * Dk ? Hk * Dk + hk * Dk + (i - Dk)
                               : 2 * Hk * Dk + hv * Dv + (i - 2 * Dk);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < K - 1; ++j)
      acc = fmaf(to_float(ci[static_cast<size_t>(j) * C + c]), to_float(conv_w[c * K + j]), acc);
    const float xin = proj_at<CG>(pr + c);
    acc = fmaf(xin, to_float(conv_w[c * K + K - 1]), acc);
    const float o = round_t<T>(acc);
    const float act = round_t<T>(o * sigmoid_t<T>(o));
    if (i < Dk) sq[i] = act;
    else if (i < 2 * Dk) sk[i - Dk] = act;
    else sv[i - 2 * Dk] = act;
    if (i >= 2 * Dk || owns_qk) {
#pragma unroll
      for (int j = 0; j + 1 < K - 1; ++j)
        co[static_cast<size_t>(j) * C + c] = ci[static_cast<size_t>(j + 1) * C + c];
      co[static_cast<size_t>(K - 2) * C + c] = static_cast<T>(xin);
    }
  }
  __syncthreads();
  if (warp < 2) {
    const float* s = warp == 0 ? sq : sk;
    float acc = 0.f;
    for (int i = lane; i < Dk; i += 32) acc = fmaf(s[i], s[i], acc);
    acc = warp_sum(acc);
    if (lane == 0) red[warp] = acc;
  }
  __syncthreads();
  const float inv = rsqrtf(static_cast<float>(Dk));
  const float rq = rsqrtf(red[0] / Dk + eps_qk), rk = rsqrtf(red[1] / Dk + eps_qk);
  const float q_scale = round_t<T>(inv * inv), k_scale = round_t<T>(inv);
  float qv[NP], kv[NP];
#pragma unroll
  for (int i = 0; i < NP; ++i) {
    qv[i] = round_t<T>(round_t<T>(sq[NP * lane + i] * rq) * q_scale);
    kv[i] = round_t<T>(round_t<T>(sk[NP * lane + i] * rk) * k_scale);
  }
  const float beta = sigmoid_t<T>(proj_at<CG>(pr + C + Hv * Dv + hv));
  const float ab = round_t<T>(proj_at<CG>(pr + C + Hv * Dv + Hv + hv) + to_float(dt_bias[hv]));
  const float soft = round_t<T>(fmaxf(ab, 0.f) + log1pf(__expf(-fabsf(ab))));
  const float g = __expf(rate[hv] * soft);
  const size_t head = static_cast<size_t>(n) * Dv * Dk;
  // A warp's R value rows: all their state loads are issued before the first warp sum, so a
  // warp waits on global memory once rather than once a row (one block is all a head gets).
  constexpr int R = (Dv + NW - 1) / NW;
  float s[R][NP];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int dv = warp + r * NW;
    if (dv < Dv) {
      const float* src = state_in + head + static_cast<size_t>(dv) * Dk + NP * lane;
#pragma unroll
      for (int i = 0; i < NP; ++i) s[r][i] = src[i];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int dv = warp + r * NW;
    if (dv >= Dv) break;
    float mem = 0.f;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      s[r][i] *= g;
      mem = fmaf(s[r][i], kv[i], mem);
    }
    mem = warp_sum(mem);
    const float delta = (sv[dv] - mem) * beta;
    float out = 0.f;
    float* dst = state_out + head + static_cast<size_t>(dv) * Dk + NP * lane;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      s[r][i] = fmaf(kv[i], delta, s[r][i]);
      out = fmaf(s[r][i], qv[i], out);
      dst[i] = s[r][i];
    }
    out = warp_sum(out);
    if (lane == 0) sy[dv] = round_t<T>(out);
  }
  __syncthreads();
  if (warp == 0) {
    float acc = 0.f;
    for (int i = lane; i < Dv; i += 32) acc = fmaf(sy[i], sy[i], acc);
    acc = warp_sum(acc);
    if (lane == 0) red[2] = acc;
  }
  __syncthreads();
  const float r = rsqrtf(red[2] / Dv + eps_norm);
  for (int d = tid; d < Dv; d += NT) {
    const float normed = round_t<T>(round_t<T>(sy[d] * r) * to_float(norm_w[d]));
    const float z = proj_at<CG>(pr + C + hv * Dv + d);
    const float gate = z / (1.f + __expf(-z));
    y[static_cast<size_t>(b) * Hv * Dv + hv * Dv + d] = static_cast<T>(gate * normed);
  }
}

template <typename T, typename W, int Dk, int Dv, int Hk, int Hv, int K, int NT>
__device__ __forceinline__ void delta_step(const T* proj, const T* conv_in, const W* conv_w,
                                           const W* dt_bias, const float* rate, const W* norm_w,
                                           const float* state_in, const float* eps, T* y,
                                           T* conv_out, float* state_out) {
  delta_head<T, W, Dk, Dv, Hk, Hv, K, NT, false>(blockIdx.z, proj, conv_in, conv_w, dt_bias, rate,
                                                 norm_w, state_in, eps[0], eps[1], y, conv_out,
                                                 state_out);
}

}  // namespace rmx
