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

namespace rmx {

// One 16-byte chunk's worth of x (PER = 128/BITS values) as floats, and their sum. With NORM
// the chunk is multiplied by the RMS-norm weight nw and its squares are added to ss: the norm's
// 1/rms is a common factor of every output, applied once at the end, so the input norm of a
// layer rides in the product that reads it instead of being an op of its own.
template <typename T, int PER, bool NORM>
__device__ __forceinline__ void load_x(
    const T* xr, const T* nw, int c, float* xf, float& xsum, float& ss) {
#pragma unroll
  for (int i = 0; i < PER / 8; ++i) Vec8<T>::load(xr + PER * c + 8 * i, xf + 8 * i);
  if constexpr (NORM) {
#pragma unroll
    for (int i = 0; i < PER / 8; ++i) {
      float wf[8];
      Vec8<T>::load(nw + PER * c + 8 * i, wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        ss = fmaf(xf[8 * i + j], xf[8 * i + j], ss);
        xf[8 * i + j] *= wf[j];
      }
    }
  }
  xsum = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) xsum += xf[i];
}

// Dot products of one 16-byte chunk of each of ROWS rows with the matching slice of x (xf).
// A chunk holds PER = 128/BITS weights: 32 at 4-bit, 16 at 8-bit.
template <typename T, int BITS, int G, int ROWS>
__device__ __forceinline__ void chunk_dot(
    const float* xf, float xsum, const uint32_t* w, const T* scales, const T* biases,
    int row0, int N, int c, int words_per_row, int groups_per_row, float* acc) {
  constexpr int PER = 128 / BITS;
  constexpr int VPW = 32 / BITS;  // values per word
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
      const uint32_t hi = u[q] >> 16;
#pragma unroll
      for (int j = 0; j < VPW; ++j) d = fmaf(xf[VPW * q + j], field<BITS>(u[q], hi, j), d);
    }
    acc[r] = fmaf(s, d, fmaf(b, xsum, acc[r]));
  }
}

// 1/rms of a K-wide row from the warp's partial sums of squares (NORM only).
template <int K>
__device__ __forceinline__ float inv_rms(float ss, const float* eps) {
  return rsqrtf(warp_sum(ss) / K + eps[0]);
}

// y[m, n] for ROWS rows per warp; grid.y indexes m. K must be a multiple of one chunk (128/BITS)
// and G of the chunk, which MLX's quantization (G >= 32) gives. With RES, y = x W^T + res: the
// product is rounded to T first and then added, as the separate ops would. With NORM, x is first
// RMS-normed with weight nw (T[K]) and eps (float[1]).
template <typename T, int BITS, int G, int ROWS, int K, bool RES = false, bool NORM = false>
__device__ __forceinline__ void qgemv(
    const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int N,
    const T* res = nullptr, const T* nw = nullptr, const float* eps = nullptr) {
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
  float ss = 0.f;
#pragma unroll 4
  for (int c = lane; c < CHUNKS; c += 32) {
    float xf[PER], xsum;
    load_x<T, PER, NORM>(xr, nw, c, xf, xsum, ss);
    chunk_dot<T, BITS, G, ROWS>(xf, xsum, w, scales, biases, row0, N, c, WORDS, GROUPS, acc);
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = warp_sum(acc[r]);
  if constexpr (NORM) {
    const float inv = inv_rms<K>(ss, eps);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] *= inv;
  }
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
// reaches memory. ROWS outputs per warp means 2*ROWS weight rows. NORM as in qgemv.
// With EXPERTS, w/scales/biases stack such weights per expert ([E, 2F, K]), row m of the output
// is expert idx[m]'s, and every row reads the one token x (a MoE layer's decode step). With OAI
// (GPT-OSS's experts), each expert's linear bias lb ([E, 2F], gate's first) is added to gate and
// up, and the activation is mlx-lm's swiglu_oai with ap = {alpha, limit}:
// (clip(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate, limit), each op rounded
// to T as mlx-lm's ops round it.
template <typename T, int BITS, int G, int ROWS, int K, bool NORM = false, bool EXPERTS = false,
          bool OAI = false>
__device__ __forceinline__ void qgemv_swiglu(
    const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int F,
    const T* nw = nullptr, const float* eps = nullptr, const uint32_t* idx = nullptr,
    const T* lb = nullptr, const float* ap = nullptr) {
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int m = blockIdx.y;
  const int row0 = warp * ROWS;
  if (row0 >= F) return;
  const T* xr = x + (EXPERTS ? 0 : (size_t)m * K);
  if constexpr (EXPERTS) {
    const size_t e = idx[m];
    w += e * 2 * F * WORDS;
    scales += e * 2 * F * GROUPS;
    biases += e * 2 * F * GROUPS;
    if constexpr (OAI) lb += e * 2 * F;
  }
  float g[ROWS], u[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) g[r] = u[r] = 0.f;
  float ss = 0.f;
#pragma unroll 2
  for (int c = lane; c < CHUNKS; c += 32) {
    float xf[PER], xsum;
    load_x<T, PER, NORM>(xr, nw, c, xf, xsum, ss);
    chunk_dot<T, BITS, G, ROWS>(xf, xsum, w, scales, biases, row0, F, c, WORDS, GROUPS, g);
    chunk_dot<T, BITS, G, ROWS>(
        xf, xsum, w + (size_t)F * WORDS, scales + (size_t)F * GROUPS,
        biases + (size_t)F * GROUPS, row0, F, c, WORDS, GROUPS, u);
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    g[r] = warp_sum(g[r]);
    u[r] = warp_sum(u[r]);
  }
  if constexpr (NORM) {
    const float inv = inv_rms<K>(ss, eps);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      g[r] *= inv;
      u[r] *= inv;
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r < F) {
        // Round gate and up to T first, as mlx-lm's separate matmuls would.
        if constexpr (OAI) {
          y[(size_t)m * F + row0 + r] = swiglu_oai_t<T>(
              g[r], u[r], to_float(lb[row0 + r]), to_float(lb[F + row0 + r]), ap);
        } else {
          const float gt = to_float(static_cast<T>(g[r]));
          const float ut = to_float(static_cast<T>(u[r]));
          float silu = gt / (1.f + __expf(-gt));
          y[(size_t)m * F + row0 + r] = static_cast<T>(to_float(static_cast<T>(silu)) * ut);
        }
      }
    }
  }
}

// A few rows of x at once (a batch's decode step): each warp loads its ROWS weight rows' chunk
// once and applies it to up to MR rows of x (grid.y = ceil(M / MR)), so the weights are read once
// per MR rows instead of once per row. Each output is accumulated in qgemv's order, so a row
// gets the bits qgemv gives it alone. SWIGLU: W is [gate; up] ([2N, K]) and y = silu(g) * u as
// qgemv_swiglu; RES: y = x W^T + res as qgemv's.
template <typename T, int BITS, int G, int ROWS, int K, int MR, bool RES = false,
          bool SWIGLU = false>
__device__ __forceinline__ void qgemm_rows(
    const T* x, const uint32_t* w, const T* scales, const T* biases, T* y, int N, int M,
    const T* res = nullptr) {
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  constexpr int VPW = 32 / BITS;
  constexpr int HALVES = SWIGLU ? 2 : 1;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int m0 = blockIdx.y * MR;
  const int row0 = warp * ROWS;
  if (row0 >= N || m0 >= M) return;
  const int mrows = min(MR, M - m0);
  float acc[HALVES][MR][ROWS];
#pragma unroll
  for (int h = 0; h < HALVES; ++h)
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[h][i][r] = 0.f;
  for (int c = lane; c < CHUNKS; c += 32) {
    const int g = (PER * c) / G;
#pragma unroll
    for (int h = 0; h < HALVES; ++h) {
      const size_t off = (size_t)h * N;
      // The chunk's quantized values as floats, unpacked once for all MR rows of x (unpacking
      // per row made the kernel compute-bound).
      float fld[ROWS][PER];
      float sc[ROWS], bi[ROWS];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) {
        const size_t row = off + min(row0 + r, N - 1);
        const uint4 wv = load_stream(w + row * WORDS + 4 * c);
        sc[r] = to_float(scales[row * GROUPS + g]);
        bi[r] = to_float(biases[row * GROUPS + g]);
        const uint32_t u[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint32_t hi = u[q] >> 16;
#pragma unroll
          for (int j = 0; j < VPW; ++j) fld[r][VPW * q + j] = field<BITS>(u[q], hi, j);
        }
      }
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        if (i < mrows) {
          float xf[PER], xsum, ss = 0.f;
          load_x<T, PER, false>(x + (size_t)(m0 + i) * K, nullptr, c, xf, xsum, ss);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            float d = 0.f;
#pragma unroll
            for (int p = 0; p < PER; ++p) d = fmaf(xf[p], fld[r][p], d);
            acc[h][i][r] = fmaf(sc[r], d, fmaf(bi[r], xsum, acc[h][i][r]));
          }
        }
      }
    }
  }
#pragma unroll
  for (int h = 0; h < HALVES; ++h)
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int r = 0; r < ROWS; ++r) acc[h][i][r] = warp_sum(acc[h][i][r]);
  if (lane != 0) return;
#pragma unroll
  for (int i = 0; i < MR; ++i) {
    if (i >= mrows) break;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (row0 + r >= N) break;
      const size_t o = (size_t)(m0 + i) * N + row0 + r;
      if constexpr (SWIGLU) {
        float gt = to_float(static_cast<T>(acc[0][i][r]));
        float ut = to_float(static_cast<T>(acc[HALVES - 1][i][r]));
        float silu = gt / (1.f + __expf(-gt));
        y[o] = static_cast<T>(to_float(static_cast<T>(silu)) * ut);
      } else if constexpr (RES) {
        y[o] = static_cast<T>(to_float(static_cast<T>(acc[0][i][r])) + to_float(res[o]));
      } else {
        y[o] = static_cast<T>(acc[0][i][r]);
      }
    }
  }
}

}  // namespace rmx
