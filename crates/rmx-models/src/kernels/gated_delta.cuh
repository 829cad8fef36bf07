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
