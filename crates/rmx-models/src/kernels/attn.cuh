namespace rmx {

// One token's attention, from its q/k/v rows to the attended [H * D] row, in one launch: the new
// q and k are normed (Qwen3, Gemma 3) and roped at `offset` as in qkv_rope, the first query head
// of each group stores the new k and v into the cache in place (kc, vc: [KV, cap, D], handed in
// as inputs -- the cache owns them and nothing else reads position `offset` in this step), and
// every block attends over positions 0..offset, the new one from shared memory. It replaces
// mlx-lm's rope, norm, two slice_updates, two slices and the attention call, and the reshapes
// between them. One block of NW warps per query head; warp j takes keys j, j + NW, ... with an
// online softmax, as MLX's single-pass vector kernel does; then the warps' partials are merged.
// q, k and v are read at element offsets QOFF, KOFF, VOFF of qs, ks, vs: one fused QKV row
// passed three times, or three rows. pos = {offset, cap}; par = {eps, scale}.
//
// decode_attn_at is that for one row: the new k and v go to column `col` of the cache, the
// rope turns by `rope_pos`, and attention reads columns start..col. A sequence alone has
// col = rope_pos = offset and start = 0; a batch row (decode_attn_batch) writes the batch's
// common column and starts after its left padding.
//
// ROT < D rotates only a head's first ROT dimensions (Qwen3.5's partial rotary factor), as
// MLX's rope with dims < D. GATED (Qwen3-Next / Qwen3.5's gated attention): q's row holds each
// head's D queries then D gate values (so a head's q is 2D apart), and the output is
// attention * sigmoid(gate), as mlx-lm's `output * mx.sigmoid(gate)` in T.
template <typename T, int H, int KV, int D, bool NORM, bool TRADITIONAL, int QOFF, int KOFF,
          int VOFF, int ROT = D, bool GATED = false>
__device__ __forceinline__ void decode_attn_at(
    const T* qs, const T* ks, const T* vs, const T* qn, const T* kn, const float* inv_freq,
    int col, int rope_pos, int start, int cap, const float* par, T* kc, T* vc, T* out) {
  constexpr int NW = 32;
  constexpr int PL = D / 32;
  // q and k pairs fill whole warps; the warps' partial rows fit in 48 KB of shared memory.
  static_assert(D % 64 == 0 && D <= 256, "head size");
  static_assert(ROT % 2 == 0 && ROT > 0 && ROT <= D, "rotated dimensions");
  constexpr int QSTRIDE = GATED ? 2 * D : D;
  const int h = blockIdx.x;
  const int g = h / (H / KV);
  const int t = threadIdx.x;
  const int lane = t & 31;
  const int warp = t >> 5;
  __shared__ float qf[D];
  __shared__ float kf[D];
  __shared__ float vf[D];
  __shared__ float red[2][NW];
  __shared__ float acc[NW][D + 1];

  // Threads [0, D/2) own q's rotary pairs, [D/2, D) k's, [D, 2D) copy v.
  const bool active = t < D;
  const bool is_k = t >= D / 2;
  const int i = is_k ? t - D / 2 : t;
  const int i1 = TRADITIONAL ? 2 * i : i;
  const int i2 = TRADITIONAL ? 2 * i + 1 : i + D / 2;
  float x1 = 0.f, x2 = 0.f;
  if (active) {
    const T* src = is_k ? ks + KOFF + (size_t)g * D : qs + QOFF + (size_t)h * QSTRIDE;
    x1 = to_float(src[i1]);
    x2 = to_float(src[i2]);
  } else if (t < 2 * D) {
    vf[t - D] = to_float(vs[VOFF + (size_t)g * D + (t - D)]);
  }
  if constexpr (NORM) {
    const float ss = warp_sum(x1 * x1 + x2 * x2);
    if (lane == 0) red[0][warp] = ss;
    __syncthreads();
    if (active) {
      float total = 0.f;
      const int w0 = is_k ? D / 64 : 0;
#pragma unroll
      for (int j = 0; j < D / 64; ++j) total += red[0][w0 + j];
      const float inv = rsqrtf(total / D + par[0]);
      const T* w = is_k ? kn : qn;
      x1 = to_float(static_cast<T>(to_float(static_cast<T>(x1 * inv)) * to_float(w[i1])));
      x2 = to_float(static_cast<T>(to_float(static_cast<T>(x2 * inv)) * to_float(w[i2])));
    }
  }
  if constexpr (ROT == D) {
    if (active) {
      const float theta = static_cast<float>(rope_pos) * inv_freq[i];
      const float c = cos(theta), s = sin(theta);
      float* dst = is_k ? kf : qf;
      dst[i1] = to_float(static_cast<T>(x1 * c - x2 * s));
      dst[i2] = to_float(static_cast<T>(x1 * s + x2 * c));
    }
  } else {
    // The rotated pairs are (j, j + ROT/2), or (2j, 2j + 1), of the first ROT dimensions: not
    // the pairs the threads hold, so the normed head goes to shared memory first.
    if (active) {
      float* dst = is_k ? kf : qf;
      dst[i1] = x1;
      dst[i2] = x2;
    }
    __syncthreads();
    if (active && i < ROT / 2) {
      const int j1 = TRADITIONAL ? 2 * i : i;
      const int j2 = TRADITIONAL ? 2 * i + 1 : i + ROT / 2;
      float* dst = is_k ? kf : qf;
      const float a = dst[j1], b = dst[j2];
      const float theta = static_cast<float>(rope_pos) * inv_freq[i];
      const float c = cos(theta), s = sin(theta);
      dst[j1] = to_float(static_cast<T>(a * c - b * s));
      dst[j2] = to_float(static_cast<T>(a * s + b * c));
    }
  }
  __syncthreads();
  if (h % (H / KV) == 0 && t < D) {
    const size_t at = ((size_t)g * cap + col) * D + t;
    kc[at] = static_cast<T>(kf[t]);
    vc[at] = static_cast<T>(vf[t]);
  }

  const float scale = par[1] * 1.44269504088896340736f;  // log2(e): exp2 below
  float q[PL], o[PL];
#pragma unroll
  for (int p = 0; p < PL; ++p) {
    q[p] = scale * qf[lane * PL + p];
    o[p] = 0.f;
  }
  float m = neg_inf(), l = 0.f;
  const T* kb = kc + (size_t)g * cap * D + lane * PL;
  const T* vb = vc + (size_t)g * cap * D + lane * PL;
  for (int j = start + warp; j <= col; j += NW) {
    float kv[PL], vv[PL];
    if (j < col) {
#pragma unroll
      for (int p = 0; p < PL; ++p) {
        kv[p] = to_float(kb[(size_t)j * D + p]);
        vv[p] = to_float(vb[(size_t)j * D + p]);
      }
    } else {
#pragma unroll
      for (int p = 0; p < PL; ++p) {
        kv[p] = kf[lane * PL + p];
        vv[p] = vf[lane * PL + p];
      }
    }
    online_step<PL>(q, kv, vv, m, l, o);
  }

  __syncthreads();  // red is reused
  if (lane == 0) {
    red[0][warp] = m;
    red[1][warp] = l;
  }
  __syncthreads();
  float mx = neg_inf();
#pragma unroll
  for (int w = 0; w < NW; ++w) mx = fmaxf(mx, red[0][w]);
  float denom = 0.f;
#pragma unroll
  for (int w = 0; w < NW; ++w) {
    if (red[0][w] != neg_inf()) denom += red[1][w] * exp2f(red[0][w] - mx);
  }
  const float fw = m == neg_inf() ? 0.f : exp2f(m - mx);
#pragma unroll
  for (int p = 0; p < PL; ++p) acc[warp][lane * PL + p] = o[p] * fw;
  __syncthreads();
  if (t < D) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w) sum += acc[w][t];
    if constexpr (GATED) {
      const float gate = to_float(qs[QOFF + (size_t)h * QSTRIDE + D + t]);
      const float attended = to_float(static_cast<T>(sum / denom));
      const float sig = sigmoid_t<T>(gate);
      out[(size_t)h * D + t] = static_cast<T>(attended * sig);
    } else {
      out[(size_t)h * D + t] = static_cast<T>(sum / denom);
    }
  }
}

// One sequence: pos = {offset, cap}.
template <typename T, int H, int KV, int D, bool NORM, bool TRADITIONAL, int QOFF, int KOFF,
          int VOFF, int ROT = D, bool GATED = false>
__device__ __forceinline__ void decode_attn(
    const T* qs, const T* ks, const T* vs, const T* qn, const T* kn, const float* inv_freq,
    const int32_t* pos, const float* par, const T* kc_in, const T* vc_in, T* out) {
  decode_attn_at<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF, ROT, GATED>(
      qs, ks, vs, qn, kn, inv_freq, pos[0], pos[0], 0, pos[1], par, const_cast<T*>(kc_in),
      const_cast<T*>(vc_in), out);
}

// A batch's decode step, blockIdx.y = row b: qkv holds each row's fused q/k/v (S elements a
// row), the left-padded caches are [B, KV, cap, D], pos = {col, cap} (the column every row
// writes), pads[b] the columns before row b's first position (its rope position is col - pad).
template <typename T, int H, int KV, int D, bool NORM, bool TRADITIONAL, int S>
__device__ __forceinline__ void decode_attn_batch(
    const T* qkv, const T* qn, const T* kn, const float* inv_freq, const int32_t* pos,
    const int32_t* pads, const float* par, const T* kc_in, const T* vc_in, T* out) {
  const int b = blockIdx.y;
  const int col = pos[0], cap = pos[1], pad = pads[b];
  const T* row = qkv + (size_t)b * S;
  const size_t cache = (size_t)b * KV * cap * D;
  decode_attn_at<T, H, KV, D, NORM, TRADITIONAL, 0, H * D, (H + KV) * D>(
      row, row, row, qn, kn, inv_freq, col, col - pad, pad, cap, par,
      const_cast<T*>(kc_in) + cache, const_cast<T*>(vc_in) + cache, out + (size_t)b * H * D);
}

}  // namespace rmx
