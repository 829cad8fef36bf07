// scripts/bench/layer_lab.py times the phases by defining RMX_LAYER_TIMES (a float
// offset into scratch, past the kernel's own regions): block 0 writes %globaltimer at the start
// and after each wait (slots 0-4), every block raises slot 5 to when it finished; slots 6-9
// split block 0's part of the attention phase (see there).
#ifdef RMX_LAYER_TIMES
#define RMX_LAYER_TIME(i)                                                                 \
  if (blockIdx.x == 0 && threadIdx.x == 0) {                                              \
    unsigned long long t_;                                                                \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                                \
    reinterpret_cast<unsigned long long*>(scratch + RMX_LAYER_TIMES)[i] = t_;             \
  }
#else
#define RMX_LAYER_TIME(i)
#endif
namespace rmx {

// A whole quantized pre-norm decoder layer (Llama, Qwen3) for one token in one launch: MLX
// spends several µs of CPU per graph node, so five kernels per layer bound decode on small
// models; here the five steps are phases of one kernel, each waiting for the one before. The
// grid is one block per SM (decode_layer.rs asks the driver how many).
//
// Every phase that reads a vector first stages it in shared memory as float (the input norms
// applied there, rounded as MLX's rms_norm rounds), with the sum of each 16-byte weight chunk's
// slice, so the weight loop spends its instructions on the weights alone: unpacking is one LOP3
// and one FADD per weight, the product one FFMA, and the quantization bias one FFMA per chunk.
// In the standalone kernels each lane also loads, converts (and norms) its x slice and sums it,
// about as many instructions again as the weights take (estimated from the source: ~180 per
// 16-byte chunk and row at 4-bit with a norm, ~105 here). Each block stages once per phase and
// then serves ~1/132 of the phase's rows, which a standalone 4-warp block could not amortize.

// Work and waiting across the grid. A phase's work is gridDim.x tickets (a ticket: what one
// block's warps do, by their index in it); a block claims a ticket from the phase's counter
// before it works, and counts it finished after, and the next phase starts once all are. A
// plain grid barrier would need every block resident at once, which nothing guarantees: two
// models decoding on two streams (MLX gives each thread its own) can each hold part of the
// GPU and wait for blocks that the other's occupy. Here blocks that are running take all the
// tickets, and one that starts late finds none left.
//
// A block claims its first ticket of the next phase before it counts its first ticket of this
// one finished, so every block that works in a phase holds a ticket of the next before any
// block can pass the wait; the claim that finds none left then goes out while the block works
// (an "early" claim), off the critical path. The counters (bar, in 32-bit words; decode_layer.rs
// sizes the array): claims per phase from TK_CLAIMS, finished per phase from TK_FINISHED, blocks
// out at TK_OUT, the attention's per-head counters from TK_HEADS; the last block out of the
// launch zeroes them.
constexpr int LAYER_PHASES = 5;  // per layer
constexpr int TK_PMAX = 160;     // phases of one launch: 32 layers
constexpr int TK_CLAIMS = 32;
constexpr int TK_FINISHED = TK_CLAIMS + TK_PMAX;
constexpr int TK_OUT = TK_FINISHED + TK_PMAX;
constexpr int TK_HEADS = TK_OUT + 32;

struct Tickets {
  unsigned int* claims;
  unsigned int* finished;
  unsigned int* out;
  int* shared;  // where thread 0 hands a ticket to the block's threads
  int phases;   // of this launch
  // Thread 0's: the block's first ticket of the next phase, once claimed.
  unsigned int upcoming = 0;
  bool holds_upcoming = false;

  __device__ __forceinline__ Tickets(unsigned int* bar, int* sh, int np)
      : claims(bar + TK_CLAIMS), finished(bar + TK_FINISHED), out(bar + TK_OUT), shared(sh),
        phases(np) {}

  __device__ __forceinline__ int broadcast(unsigned int t) const {
    if (threadIdx.x == 0) *shared = static_cast<int>(t);
    __syncthreads();
    const int v = *shared;
    __syncthreads();
    return v;
  }

  // Phase 0's first ticket, at the start.
  __device__ __forceinline__ int first() const {
    unsigned int t = 0;
    if (threadIdx.x == 0) t = atomicAdd(claims, 1u);
    return broadcast(t);
  }

  // Runs phase p's tickets for this block, from its first, t: stage() once if there are any,
  // then work(ticket) for each. early: claim the next ticket before working (only once every
  // working block holds its first, i.e. not in phase 0).
  template <typename Stage, typename Work>
  __device__ __forceinline__ void run(int p, int t, bool early, Stage stage, Work work) {
    bool staged = false;
    while (t < static_cast<int>(gridDim.x)) {
      unsigned int next = 0;
      if (early && threadIdx.x == 0) next = atomicAdd(claims + p, 1u);
      if (!staged) {
        stage();
        staged = true;
      }
      work(t);
      __syncthreads();
      if (threadIdx.x == 0) {
        if (p + 1 < phases && !holds_upcoming) {
          upcoming = atomicAdd(claims + p + 1, 1u);
          holds_upcoming = true;
        }
        __threadfence();
        atomicAdd(finished + p, 1u);
        if (!early) next = atomicAdd(claims + p, 1u);
      }
      t = broadcast(next);
    }
  }

  // Waits until phase p's tickets are all finished; the block's first ticket of phase p + 1.
  // The ticket is handed over before thread 0 spins (a barrier on each side of the spin instead
  // of broadcast's two after it): Llama-3-8B 4-bit on the H100 395.4 -> 397.4 tok/s (docs/perf.md,
  // session 29, where warming L2 with the next phase's weights during this wait lost 1-3.5%).
  __device__ __forceinline__ int wait(int p) {
    if (threadIdx.x == 0) {
      if (!holds_upcoming) upcoming = atomicAdd(claims + p + 1, 1u);
      holds_upcoming = false;
      *shared = static_cast<int>(upcoming);
    }
    __syncthreads();
    const int next = *shared;  // written again only after the barrier below
    if (threadIdx.x == 0) {
      volatile unsigned int* f = finished + p;
      // A wait that never ends means a bug, not a block that never ran (its tickets go to the
      // others): fail the launch after 2 s (MLX reports the CUDA error) rather than hang.
      unsigned long long t0, now;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
      while (*f < gridDim.x) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - t0 > 2000000000ull) __trap();
      }
      __threadfence();
    }
    __syncthreads();
    return next;
  }

  // The block leaves the launch; the last one out zeroes the counters for the next.
  __device__ __forceinline__ void leave() const {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(out, 1u) == gridDim.x - 1) {
        for (int p = 0; p < phases; ++p) {
          claims[p] = 0;
          finished[p] = 0;
        }
        *out = 0;
        __threadfence();
      }
    }
  }
};

// Two T packed in a word, as floats, and back (rounded to nearest).
template <typename T>
__device__ __forceinline__ void unpack2(uint32_t u, float* out);
template <>
__device__ __forceinline__ void unpack2<__nv_bfloat16>(uint32_t u, float* out) {
  out[0] = __uint_as_float(u << 16);
  out[1] = __uint_as_float(u & 0xffff0000u);
}
template <>
__device__ __forceinline__ void unpack2<__half>(uint32_t u, float* out) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u));
  out[0] = f.x;
  out[1] = f.y;
}
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 v = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// N 32-bit words of a row (2N values of a 16-bit T: N = 1, 2 or 4, one 4-, 8- or 16-byte
// access), kept as loaded until they are used. CG reads through L2 only: for what other blocks
// wrote earlier in this launch.
template <int N>
struct Words {
  uint32_t u[N];

  template <bool CG, typename T>
  __device__ __forceinline__ void load(const T* p) {
    if constexpr (N == 1) {
      const unsigned int* q = reinterpret_cast<const unsigned int*>(p);
      u[0] = CG ? __ldcg(q) : *q;
    } else if constexpr (N == 2) {
      const uint2* q = reinterpret_cast<const uint2*>(p);
      const uint2 v = CG ? __ldcg(q) : *q;
      u[0] = v.x;
      u[1] = v.y;
    } else {
      static_assert(N == 4, "1, 2 or 4 words");
      const uint4* q = reinterpret_cast<const uint4*>(p);
      const uint4 v = CG ? __ldcg(q) : *q;
      u[0] = v.x;
      u[1] = v.y;
      u[2] = v.z;
      u[3] = v.w;
    }
  }

  template <typename T>
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (N == 1) {
      *reinterpret_cast<unsigned int*>(p) = u[0];
    } else if constexpr (N == 2) {
      *reinterpret_cast<uint2*>(p) = make_uint2(u[0], u[1]);
    } else {
      *reinterpret_cast<uint4*>(p) = make_uint4(u[0], u[1], u[2], u[3]);
    }
  }

  template <typename T>
  __device__ __forceinline__ void pack(const float* v) {
#pragma unroll
    for (int i = 0; i < N; ++i) u[i] = pack2<T>(v[2 * i], v[2 * i + 1]);
  }

  template <typename T>
  __device__ __forceinline__ void unpack(float* v) const {
#pragma unroll
    for (int i = 0; i < N; ++i) unpack2<T>(u[i], v + 2 * i);
  }
};

// PL consecutive T (PL = 2, 4 or 8) as floats, and back.
template <typename T, int PL, bool CG>
__device__ __forceinline__ void load_pl(const T* p, float* out) {
  Words<PL / 2> w;
  w.template load<CG>(p);
  w.template unpack<T>(out);
}

template <typename T, int PL>
__device__ __forceinline__ void store_pl(T* p, const float* v) {
  Words<PL / 2> w;
  w.template pack<T>(v);
  w.template store<T>(p);
}

// PL consecutive floats that other blocks wrote earlier in this launch (through L2).
template <int PL>
__device__ __forceinline__ void load_pl_f32(const float* p, float* out) {
#pragma unroll
  for (int i = 0; i < PL; i += 4) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(p + i));
    out[i] = v.x;
    out[i + 1] = v.y;
    out[i + 2] = v.z;
    out[i + 3] = v.w;
  }
}

// CH key/value positions of a warp's online softmax at once (scores in log2 units: q carries
// log2(e)), of which the first cnt are real: the CH scores' warp sums interleave, and the
// running max, sum and row are rescaled once per chunk instead of once per position.
template <typename T, int PL, int CH>
__device__ __forceinline__ void online_chunk(const float* q, const Words<PL / 2>* kr,
                                             const Words<PL / 2>* vr, int cnt, float& m,
                                             float& l, float* o) {
  float sc[CH];
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    float kv[PL];
    kr[i].template unpack<T>(kv);
    sc[i] = 0.f;
#pragma unroll
    for (int p = 0; p < PL; ++p) sc[i] = fmaf(q[p], kv[p], sc[i]);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int i = 0; i < CH; ++i) sc[i] += __shfl_xor_sync(0xffffffffu, sc[i], off);
  }
  float mn = m;
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    if (i < cnt) mn = fmaxf(mn, sc[i]);
  }
  const float f = exp2f(m - mn);
  l *= f;
#pragma unroll
  for (int p = 0; p < PL; ++p) o[p] *= f;
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    if (i < cnt) {
      const float e = exp2f(sc[i] - mn);
      l += e;
      float vv[PL];
      vr[i].template unpack<T>(vv);
#pragma unroll
      for (int p = 0; p < PL; ++p) o[p] = fmaf(e, vv[p], o[p]);
    }
  }
  m = mn;
}

template <bool CG, typename T>
__device__ __forceinline__ float load1(const T* p) {
  if constexpr (CG) {
    return to_float(__ldcg(p));
  } else {
    return to_float(*p);
  }
}

// The low nibble of n as an e2m1 value (mxfp4): 0, 0.5, 1, 1.5, 2, 3, 4, 6, negative where its
// top bit is set. A normal value's exponent and mantissa bits moved into a float's.
__device__ __forceinline__ float e2m1f(uint32_t n) {
  const uint32_t e = (n >> 1) & 3u, m = n & 1u;
  const float v = e != 0u ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * m;
  return (n & 8u) != 0u ? -v : v;
}

// An mxfp4 group's e8m0 scale, 2^(e - 127) (e = 0, 2^-127, reads as 0).
__device__ __forceinline__ float e8m0(unsigned char e) {
  return __uint_as_float(static_cast<uint32_t>(e) << 23);
}

// Where float4 slot i of chunk c (PER floats: the x slice of one 16-byte weight chunk) lives in
// a staged vector. The slots are permuted per chunk so that the eight lanes of a quarter warp,
// which read eight consecutive chunks, hit eight different 16-byte bank groups.
template <int PER>
__device__ __forceinline__ int slot(int c, int i) {
  constexpr int SL = PER / 4;
  return c * SL + (i ^ ((c / (8 / SL)) & (SL - 1)));
}

// Stages x[0..K) into shared memory (xs, K floats) with each chunk's sum (sums, K / PER). With
// NORM, x is RMS-normed with weight nw first, rounded as MLX's rms_norm rounds: T(w * T(x/rms)).
// NT threads load 16-byte vectors, all issued before any is used. With a loop of scalar loads
// here (and one row per pass) the kernel ran Llama-3-8B 4-bit at 251 tok/s, no faster than five
// kernels (258); with this and row_dot2, 316 (docs/perf.md, row 10).
// red: 32 floats of scratch. Ends with the block synchronized.
template <typename T, int K, int PER, int NT, bool NORM, bool CG>
__device__ __forceinline__ void stage(
    const T* x, const T* nw, float eps, float* xs, float* sums, float* red) {
  static_assert(K % 8 == 0 && PER % 8 == 0, "whole 16-byte vectors");
  constexpr int V = K / 8;
  constexpr int ITERS = (V + NT - 1) / NT;
  const int t = threadIdx.x;
  float4* x4 = reinterpret_cast<float4*>(xs);
  uint4 raw[ITERS];
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    const int v = t + i * NT;
    if (v < V) {
      const uint4* p = reinterpret_cast<const uint4*>(x) + v;
      raw[i] = CG ? __ldcg(p) : *p;
    }
  }
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    const int v = t + i * NT;
    if (v < V) {
      float f[8];
      unpack2<T>(raw[i].x, f);
      unpack2<T>(raw[i].y, f + 2);
      unpack2<T>(raw[i].z, f + 4);
      unpack2<T>(raw[i].w, f + 6);
      if constexpr (NORM) {
#pragma unroll
        for (int j = 0; j < 8; ++j) ss = fmaf(f[j], f[j], ss);
      }
      const int c = (8 * v) / PER;
      const int s0 = ((8 * v) % PER) / 4;
      x4[slot<PER>(c, s0)] = make_float4(f[0], f[1], f[2], f[3]);
      x4[slot<PER>(c, s0 + 1)] = make_float4(f[4], f[5], f[6], f[7]);
    }
  }
  if constexpr (NORM) {
    ss = warp_sum(ss);
    if ((t & 31) == 0) red[t >> 5] = ss;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < NT / 32; ++w) total += red[w];
    const float inv = rsqrtf(total / K + eps);
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int v = t + i * NT;
      if (v < V) {
        float wf[8];
        Vec8<T>::load(nw + 8 * v, wf);
        const int c = (8 * v) / PER;
        const int s0 = ((8 * v) % PER) / 4;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float4 q = x4[slot<PER>(c, s0 + h)];
          q.x = round_t<T>(wf[4 * h] * round_t<T>(q.x * inv));
          q.y = round_t<T>(wf[4 * h + 1] * round_t<T>(q.y * inv));
          q.z = round_t<T>(wf[4 * h + 2] * round_t<T>(q.z * inv));
          q.w = round_t<T>(wf[4 * h + 3] * round_t<T>(q.w * inv));
          x4[slot<PER>(c, s0 + h)] = q;
        }
      }
    }
  }
  __syncthreads();
  for (int c = t; c < K / PER; c += NT) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PER / 4; ++i) {
      const float4 q = x4[slot<PER>(c, i)];
      s += (q.x + q.y) + (q.z + q.w);
    }
    sums[c] = s;
  }
  __syncthreads();
}

// Weight rows ra and rb (K inputs) against the staged x, for one warp; every lane gets both
// totals. Two rows per pass share the x reads and keep twice the weight loads in flight. c0: the
// staged chunk the rows' first input meets (a MoE layer's down products read their expert's
// slice of the staged activations of all chosen experts). LG: the lanes that share the rows (32,
// or a group of LG lanes each with its own rows, whose totals every lane of the group gets).
// MX: mxfp4 weights (e2m1 values, an e8m0 byte scale per 32 where `scales` points, no biases)
// against x as staged floats, as MLX's fp_qmv sums them: per group, float products of the values
// and x, times the group's scale (row_dot2_i8's MX stages x as integers instead).
template <typename T, int BITS, int G, int K, int LG = 32, bool MX = false>
__device__ __forceinline__ void row_dot2(
    const float* xs, const float* sums, const uint32_t* w, const T* scales, const T* biases,
    int ra, int rb, float& ya, float& yb, int c0 = 0) {
  static_assert(!MX || (BITS == 4 && G == 32), "mxfp4: 4-bit values, a scale per 32");
  constexpr int PER = 128 / BITS;
  constexpr int CHUNKS = K / PER;
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  constexpr int VPW = 32 / BITS;
  const int lane = threadIdx.x & (LG - 1);
  const uint32_t* wa = w + (size_t)ra * WORDS;
  const uint32_t* wb = w + (size_t)rb * WORDS;
  const float4* x4 = reinterpret_cast<const float4*>(xs);
  float acc_a = 0.f, acc_b = 0.f;
#pragma unroll 4
  for (int c = lane; c < CHUNKS; c += LG) {
    const uint4 va = load_stream(wa + 4 * c);
    const uint4 vb = load_stream(wb + 4 * c);
    const int g = (PER * c) / G;  // MX: one group a chunk, g == c
    float sa, ba = 0.f, sb, bb = 0.f;
    if constexpr (MX) {
      const unsigned char* s8 = reinterpret_cast<const unsigned char*>(scales);
      sa = e8m0(s8[(size_t)ra * GROUPS + g]);
      sb = e8m0(s8[(size_t)rb * GROUPS + g]);
    } else {
      sa = to_float(scales[(size_t)ra * GROUPS + g]);
      ba = to_float(biases[(size_t)ra * GROUPS + g]);
      sb = to_float(scales[(size_t)rb * GROUPS + g]);
      bb = to_float(biases[(size_t)rb * GROUPS + g]);
    }
    const uint32_t ua[4] = {va.x, va.y, va.z, va.w};
    const uint32_t ub[4] = {vb.x, vb.y, vb.z, vb.w};
    float da = 0.f, db = 0.f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t ha = ua[q] >> 16, hb = ub[q] >> 16;
#pragma unroll
      for (int i = 0; i < VPW / 4; ++i) {
        const float4 xv = x4[slot<PER>(c0 + c, q * (VPW / 4) + i)];
        const float xe[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if constexpr (MX) {
            const int sh = BITS * (4 * i + e);
            da = fmaf(xe[e], e2m1f(ua[q] >> sh), da);
            db = fmaf(xe[e], e2m1f(ub[q] >> sh), db);
          } else {
            da = fmaf(xe[e], field<BITS>(ua[q], ha, 4 * i + e), da);
            db = fmaf(xe[e], field<BITS>(ub[q], hb, 4 * i + e), db);
          }
        }
      }
    }
    if constexpr (MX) {
      acc_a = fmaf(sa, da, acc_a);
      acc_b = fmaf(sb, db, acc_b);
    } else {
      const float sc = sums[c0 + c];
      acc_a = fmaf(sa, da, fmaf(ba, sc, acc_a));
      acc_b = fmaf(sb, db, fmaf(bb, sc, acc_b));
    }
  }
  ya = group_sum<LG>(acc_a);
  yb = group_sum<LG>(acc_b);
}

// Integer products (IDOT): x staged as 8-bit integers, so a 4-bit weight word costs two LOP3
// and four DP4A (eight weights), 0.75 instructions a weight against row_dot2's three (LOP3, FADD,
// FFMA), which bound the 4-bit phases (gate/up at 1.97 TB/s where 8-bit reaches 2.57). Each
// 16-byte chunk's slice of x (PER elements) is scaled by its largest magnitude and kept in two
// planes, x ~ s (hi + lo / 254) with hi, lo in [-127, 127]: a relative error of ~1e-5 of the
// chunk's largest element, far below the bf16 rounding of the products (llama.cpp keeps one
// plane and loses ~0.5%). Shared memory: 32 floats (red), the planes (2K bytes: plane, then
// 16-byte slot of the chunk, then chunk, so a warp's lanes read consecutive 16-byte words), then
// per chunk {s', sum of x} with s' = s / 254 (/ 16 at 4-bit, whose odd fields stay in place, x16).
__device__ __forceinline__ int dot4(uint32_t w, uint32_t x, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(w), "r"(x), "r"(c));
  return d;
}

// dp4a with signed weights (mxfp4's values, e2m1x4).
__device__ __forceinline__ int dot4s(uint32_t w, uint32_t x, int c) {
  int d;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(w), "r"(x), "r"(c));
  return d;
}

// Four e2m1 nibbles, one in the low half of each byte, as signed bytes of twice their values
// (0, 1, 2, 3, 4, 6, 8, 12, negative where the nibble's top bit is set): mxfp4's weights as
// integers for dp4a. The magnitude comes from a byte_perm table, the sign by bytes.
__device__ __forceinline__ uint32_t e2m1x4(uint32_t n) {
  const uint32_t m = n & 0x07070707u;
  const uint32_t sel = (m | (m >> 4)) & 0x00ff00ffu;
  const uint32_t mag = __byte_perm(0x03020100u, 0x0c080604u, (sel | (sel >> 8)) & 0xffffu);
  const uint32_t neg = ((n >> 3) & 0x01010101u) * 0xffu;
  return (mag & ~neg) | (__vneg4(mag) & neg);
}

__device__ __forceinline__ uint32_t bytes4(int a, int b, int c, int d) {
  return (static_cast<uint32_t>(a) & 0xffu) | ((static_cast<uint32_t>(b) & 0xffu) << 8) |
         ((static_cast<uint32_t>(c) & 0xffu) << 16) | (static_cast<uint32_t>(d) << 24);
}

template <int BITS, int K>
struct I8Layout {
  static constexpr int PER = 128 / BITS;  // x elements per 16-byte weight chunk
  static constexpr int CHUNKS = K / PER;
  static constexpr int SL = PER / 16;  // 16-byte slots of a chunk in each plane
  __device__ __forceinline__ static unsigned char* planes(float* smem) {
    return reinterpret_cast<unsigned char*>(smem + 32);
  }
  __device__ __forceinline__ static float2* meta(float* smem) {
    return reinterpret_cast<float2*>(planes(smem) + 2 * K);
  }
};

// stage() for IDOT. The PER / 8 threads of a chunk (consecutive, 8 elements each) agree on its
// scale by shuffles; at 4 bits a word's even fields (byte-masked in place) meet x's even elements
// and its odd fields (x16) the odd ones, so each 8-element group is stored evens first.
// In pieces (stage_load, stage_sumsq, stage_inv, stage_quant) so that a batch's rows
// (layer_rows.cuh's stage_rows_i8) are staged with the very same arithmetic: thread t holds
// x's 16-byte words t, t + NT, ... (StageWords) in every caller.
template <int K, int NT>
struct StageWords {
  static constexpr int V = K / 8;
  static constexpr int ITERS = (V + NT - 1) / NT;
};

// The thread's words of x (zeros past the end).
template <typename T, int K, int NT, bool CG>
__device__ __forceinline__ void stage_load(const T* x, uint4* raw) {
  using W = StageWords<K, NT>;
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < W::ITERS; ++i) {
    const int v = t + i * NT;
    raw[i] = make_uint4(0u, 0u, 0u, 0u);
    if (v < W::V) {
      const uint4* p = reinterpret_cast<const uint4*>(x) + v;
      raw[i] = CG ? __ldcg(p) : *p;
    }
  }
}

// The warp's sum of squares of its words, into red[warp].
template <typename T, int K, int NT>
__device__ __forceinline__ void stage_sumsq(const uint4* raw, float* red) {
  using W = StageWords<K, NT>;
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < W::ITERS; ++i) {
    float f[8];
    Words<4>{{raw[i].x, raw[i].y, raw[i].z, raw[i].w}}.template unpack<T>(f);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss = fmaf(f[j], f[j], ss);
  }
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
}

// The RMS norm's scale from the warps' sums (once every warp has written its own).
template <int K, int NT>
__device__ __forceinline__ float stage_inv(const float* red, float eps) {
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < NT / 32; ++w) total += red[w];
  return rsqrtf(total / K + eps);
}

// The thread's words normed (NORM: inv, weights nw) and stored as the two planes and their meta.
template <typename T, int K, int BITS, int NT, bool NORM>
__device__ __forceinline__ void stage_quant(const uint4* raw, const T* nw, float inv,
                                            float* smem) {
  using L = I8Layout<BITS, K>;
  using W = StageWords<K, NT>;
  static_assert(K % L::PER == 0 && NT % 4 == 0, "whole chunks");
  unsigned char* planes = L::planes(smem);
  float2* meta = L::meta(smem);
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < W::ITERS; ++i) {
    const int v = t + i * NT;
    float f[8];
    Words<4>{{raw[i].x, raw[i].y, raw[i].z, raw[i].w}}.template unpack<T>(f);
    if (NORM && v < W::V) {
      float wf[8];
      Vec8<T>::load(nw + 8 * v, wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) f[j] = round_t<T>(wf[j] * round_t<T>(f[j] * inv));
    }
    // Threads past the end hold zeros and still take part in the shuffles.
    float mx = 0.f, sum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      mx = fmaxf(mx, fabsf(f[j]));
      sum += f[j];
    }
#pragma unroll
    for (int o = 1; o < L::PER / 8; o <<= 1) {
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    }
    const float q = mx > 0.f ? 127.f / mx : 0.f;
    int hi[8], lo[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float y = f[j] * q;
      hi[j] = __float2int_rn(y);
      lo[j] = __float2int_rn((y - static_cast<float>(hi[j])) * 254.f);
    }
    if (v < W::V) {
      uint2 ph, pl;
      if constexpr (BITS == 4) {
        ph = make_uint2(bytes4(hi[0], hi[2], hi[4], hi[6]), bytes4(hi[1], hi[3], hi[5], hi[7]));
        pl = make_uint2(bytes4(lo[0], lo[2], lo[4], lo[6]), bytes4(lo[1], lo[3], lo[5], lo[7]));
      } else {
        ph = make_uint2(bytes4(hi[0], hi[1], hi[2], hi[3]), bytes4(hi[4], hi[5], hi[6], hi[7]));
        pl = make_uint2(bytes4(lo[0], lo[1], lo[2], lo[3]), bytes4(lo[4], lo[5], lo[6], lo[7]));
      }
      const int c = (8 * v) / L::PER;
      const int off = (8 * v) % L::PER;
      const int at = ((off / 16) * L::CHUNKS + c) * 16 + off % 16;
      *reinterpret_cast<uint2*>(planes + at) = ph;
      *reinterpret_cast<uint2*>(planes + L::SL * L::CHUNKS * 16 + at) = pl;
      if (off == 0) {
        meta[c] = make_float2(mx * (1.f / 127.f) / (BITS == 4 ? 254.f * 16.f : 254.f), sum);
      }
    }
  }
}

template <typename T, int K, int BITS, int NT, bool NORM, bool CG>
__device__ __forceinline__ void stage_i8(const T* x, const T* nw, float eps, float* smem) {
  uint4 raw[StageWords<K, NT>::ITERS];
  stage_load<T, K, NT, CG>(x, raw);
  float inv = 1.f;
  if constexpr (NORM) {
    stage_sumsq<T, K, NT>(raw, smem);
    __syncthreads();
    inv = stage_inv<K, NT>(smem, eps);
  }
  stage_quant<T, K, BITS, NT, NORM>(raw, nw, inv, smem);
  __syncthreads();
}

// Chunk c's words of x's two planes (stage_i8's layout): 4 * SL of each.
template <int BITS, int K>
__device__ __forceinline__ void chunk_planes(const uint4* planes, int c, uint32_t* xh,
                                             uint32_t* xl) {
  using L = I8Layout<BITS, K>;
#pragma unroll
  for (int s = 0; s < L::SL; ++s) {
    const uint4 h = planes[s * L::CHUNKS + c];
    const uint4 l = planes[(L::SL + s) * L::CHUNKS + c];
    xh[4 * s] = h.x, xh[4 * s + 1] = h.y, xh[4 * s + 2] = h.z, xh[4 * s + 3] = h.w;
    xl[4 * s] = l.x, xl[4 * s + 1] = l.y, xl[4 * s + 2] = l.z, xl[4 * s + 3] = l.w;
  }
}

// A weight chunk's words as dp4a takes them: at 4 bits the even fields (byte-masked in place,
// f[2q]) and the odd ones (x16, f[2q + 1]) of each word; at 8 bits the words themselves.
template <int BITS>
struct ChunkFields {
  static constexpr int N = BITS == 4 ? 8 : 4;
  uint32_t f[N];
  __device__ __forceinline__ explicit ChunkFields(const uint32_t* u) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if constexpr (BITS == 4) {
        f[2 * q] = u[q] & 0x0f0f0f0fu;
        f[2 * q + 1] = u[q] & 0xf0f0f0f0u;
      } else {
        f[q] = u[q];
      }
    }
  }
};

// Chunk c's integer sums for two weight rows (fa, fb: their chunks' fields) against x's two
// planes (stage_i8's layout), combined as hi * 254 + lo: row_dot2_i8 and rows_dot2_i8 scale them.
template <int BITS, int K>
__device__ __forceinline__ void chunk_sums_fields(const uint4* planes, int c,
                                                  const ChunkFields<BITS>& fa,
                                                  const ChunkFields<BITS>& fb, int& ia, int& ib) {
  constexpr int XW = 4 * I8Layout<BITS, K>::SL;  // x words of a chunk in each plane
  uint32_t xh[XW], xl[XW];
  chunk_planes<BITS, K>(planes, c, xh, xl);
  if constexpr (BITS == 4) {
    int hea = 0, hoa = 0, lea = 0, loa = 0, heb = 0, hob = 0, leb = 0, lob = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      hea = dot4(fa.f[2 * q], xh[2 * q], hea);
      hoa = dot4(fa.f[2 * q + 1], xh[2 * q + 1], hoa);
      lea = dot4(fa.f[2 * q], xl[2 * q], lea);
      loa = dot4(fa.f[2 * q + 1], xl[2 * q + 1], loa);
      heb = dot4(fb.f[2 * q], xh[2 * q], heb);
      hob = dot4(fb.f[2 * q + 1], xh[2 * q + 1], hob);
      leb = dot4(fb.f[2 * q], xl[2 * q], leb);
      lob = dot4(fb.f[2 * q + 1], xl[2 * q + 1], lob);
    }
    // |16 hi-sum| <= 32 * 15 * 127 * 16 < 2^20: x254 stays below 2^31.
    ia = (16 * hea + hoa) * 254 + (16 * lea + loa);
    ib = (16 * heb + hob) * 254 + (16 * leb + lob);
  } else {
    int ha = 0, la = 0, hb = 0, lb = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      ha = dot4(fa.f[q], xh[q], ha);
      la = dot4(fa.f[q], xl[q], la);
      hb = dot4(fb.f[q], xh[q], hb);
      lb = dot4(fb.f[q], xl[q], lb);
    }
    ia = ha * 254 + la;
    ib = hb * 254 + lb;
  }
}

// chunk_sums_fields from the chunks' words (ua, ub).
template <int BITS, int K>
__device__ __forceinline__ void chunk_sums_i8(const uint4* planes, int c, const uint32_t* ua,
                                              const uint32_t* ub, int& ia, int& ib) {
  chunk_sums_fields<BITS, K>(planes, c, ChunkFields<BITS>(ua), ChunkFields<BITS>(ub), ia, ib);
}

// chunk_sums_i8 for mxfp4 weights (a 16-byte chunk holds 32 e2m1 values, one group): each
// word's even and odd nibbles as signed bytes (e2m1x4, twice the values) against x's even and
// odd elements, which stage_i8 keeps apart at 4 bits. Unlike the affine fields, the odd ones are
// shifted down first, so the sums carry no factor of 16.
template <int K>
__device__ __forceinline__ void chunk_sums_mx(const uint4* planes, int c, const uint32_t* ua,
                                              const uint32_t* ub, int& ia, int& ib) {
  uint32_t xh[8], xl[8];
  chunk_planes<4, K>(planes, c, xh, xl);
  int ha = 0, la = 0, hb = 0, lb = 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t ea = e2m1x4(ua[q] & 0x0f0f0f0fu), oa = e2m1x4((ua[q] >> 4) & 0x0f0f0f0fu);
    const uint32_t eb = e2m1x4(ub[q] & 0x0f0f0f0fu), ob = e2m1x4((ub[q] >> 4) & 0x0f0f0f0fu);
    ha = dot4s(oa, xh[2 * q + 1], dot4s(ea, xh[2 * q], ha));
    la = dot4s(oa, xl[2 * q + 1], dot4s(ea, xl[2 * q], la));
    hb = dot4s(ob, xh[2 * q + 1], dot4s(eb, xh[2 * q], hb));
    lb = dot4s(ob, xl[2 * q + 1], dot4s(eb, xl[2 * q], lb));
  }
  // |hi-sum| <= 32 * 12 * 127 < 2^16: x254 stays far below 2^31.
  ia = ha * 254 + la;
  ib = hb * 254 + lb;
}

// row_dot2() for IDOT: per chunk and row, integer sums of the fields against both planes, then
// one I2F and three float instructions for the chunk's scales and bias. KS: the staged length
// (its layout), of which the rows read K from chunk c0; LG as row_dot2's. MX: mxfp4 weights
// (e2m1 values, an e8m0 scale per 32 held as uint8 where `scales` points, no biases), as MLX's
// fp_qmv computes them: sum over groups of scale * (values . x).
template <typename T, int BITS, int G, int K, int KS = K, int LG = 32, bool MX = false>
__device__ __forceinline__ void row_dot2_i8(
    float* smem, const uint32_t* w, const T* scales, const T* biases, int ra, int rb, float& ya,
    float& yb, int c0 = 0) {
  using L = I8Layout<BITS, KS>;
  static_assert(BITS == 4 || BITS == 8, "4 or 8 bits");
  static_assert(!MX || (BITS == 4 && G == 32), "mxfp4: 4-bit values, a scale per 32");
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  constexpr int CHUNKS = K / L::PER;
  const int lane = threadIdx.x & (LG - 1);
  const uint32_t* wa = w + (size_t)ra * WORDS;
  const uint32_t* wb = w + (size_t)rb * WORDS;
  const uint4* planes = reinterpret_cast<const uint4*>(L::planes(smem));
  const float2* meta = L::meta(smem);
  float acc_a = 0.f, acc_b = 0.f;
  if constexpr (MX) {
    const unsigned char* s8 = reinterpret_cast<const unsigned char*>(scales);
#pragma unroll 2
    for (int c = lane; c < CHUNKS; c += LG) {
      const uint4 va = load_stream(wa + 4 * c);
      const uint4 vb = load_stream(wb + 4 * c);
      // One group a chunk; the planes' scale (no factor of 16 here) and the table's 2.
      const float m = meta[c0 + c].x * 8.f;
      const float sa = e8m0(s8[(size_t)ra * GROUPS + c]) * m;
      const float sb = e8m0(s8[(size_t)rb * GROUPS + c]) * m;
      const uint32_t ua[4] = {va.x, va.y, va.z, va.w};
      const uint32_t ub[4] = {vb.x, vb.y, vb.z, vb.w};
      int ia, ib;
      chunk_sums_mx<KS>(planes, c0 + c, ua, ub, ia, ib);
      acc_a = fmaf(sa, static_cast<float>(ia), acc_a);
      acc_b = fmaf(sb, static_cast<float>(ib), acc_b);
    }
  } else {
#pragma unroll 2
    for (int c = lane; c < CHUNKS; c += LG) {
      const uint4 va = load_stream(wa + 4 * c);
      const uint4 vb = load_stream(wb + 4 * c);
      const int g = (L::PER * c) / G;
      const float sa = to_float(scales[(size_t)ra * GROUPS + g]);
      const float ba = to_float(biases[(size_t)ra * GROUPS + g]);
      const float sb = to_float(scales[(size_t)rb * GROUPS + g]);
      const float bb = to_float(biases[(size_t)rb * GROUPS + g]);
      const float2 m = meta[c0 + c];
      const uint32_t ua[4] = {va.x, va.y, va.z, va.w};
      const uint32_t ub[4] = {vb.x, vb.y, vb.z, vb.w};
      int ia, ib;
      chunk_sums_i8<BITS, KS>(planes, c0 + c, ua, ub, ia, ib);
      acc_a = fmaf(sa * m.x, static_cast<float>(ia), fmaf(ba, m.y, acc_a));
      acc_b = fmaf(sb * m.x, static_cast<float>(ib), fmaf(bb, m.y, acc_b));
    }
  }
  ya = group_sum<LG>(acc_a);
  yb = group_sum<LG>(acc_b);
}

// The lane's PL elements of one head's row (src: written by other blocks in this launch),
// RMS-normed with nw (NORM) and roped at `offset`, each step rounded to T as MLX's ops round.
// Not TRADITIONAL: element e pairs with e + D/2, which lives in lane ^ 16.
// ROT < D turns only the first ROT dimensions (Qwen3.5's partial rotary factor, as MLX's rope
// with dims < D): not TRADITIONAL, e pairs with e + ROT/2, which lives in lane ^ (ROT/2/PL).
// ms: the rotated part's input scale (YaRN's mscale, in T as mlx-lm's `mscale * x` has it; 1 for
// other ropes, which leaves v as it is).
template <typename T, int D, bool NORM, bool TRADITIONAL, int ROT = D>
__device__ __forceinline__ void head_rope(
    const T* src, const T* nw, float eps, const float* inv_freq, int offset, float* v,
    float ms = 1.f) {
  constexpr int PL = D / 32;
  constexpr int HALF = ROT / 2 / PL;  // lanes of a rotated half
  static_assert(ROT <= D && (ROT / 2) % PL == 0 && (HALF & (HALF - 1)) == 0, "rotated lanes");
  const int lane = threadIdx.x & 31;
  load_pl<T, PL, true>(src + lane * PL, v);
  if constexpr (NORM) {
    float ss = 0.f;
#pragma unroll
    for (int p = 0; p < PL; ++p) ss = fmaf(v[p], v[p], ss);
    const float inv = rsqrtf(warp_sum(ss) / D + eps);
    float wv[PL];
    load_pl<T, PL, false>(nw + lane * PL, wv);
#pragma unroll
    for (int p = 0; p < PL; ++p) v[p] = round_t<T>(round_t<T>(v[p] * inv) * wv[p]);
  }
  const bool turns = lane < ROT / PL;
  if (turns) {
    const float mt = round_t<T>(ms);
#pragma unroll
    for (int p = 0; p < PL; ++p) v[p] = round_t<T>(v[p] * mt);
  }
  if constexpr (TRADITIONAL) {
#pragma unroll
    for (int p = 0; p < PL; p += 2) {
      if (turns) {
        const float theta = static_cast<float>(offset) * inv_freq[(lane * PL + p) / 2];
        const float c = cos(theta), s = sin(theta);
        const float x1 = v[p], x2 = v[p + 1];
        v[p] = round_t<T>(x1 * c - x2 * s);
        v[p + 1] = round_t<T>(x1 * s + x2 * c);
      }
    }
  } else {
    const bool first = (lane & HALF) == 0;
#pragma unroll
    for (int p = 0; p < PL; ++p) {
      const float other = __shfl_xor_sync(0xffffffffu, v[p], HALF);
      if (turns) {
        const float theta = static_cast<float>(offset) * inv_freq[(lane & (HALF - 1)) * PL + p];
        const float c = cos(theta), s = sin(theta);
        v[p] = first ? round_t<T>(v[p] * c - other * s) : round_t<T>(other * s + v[p] * c);
      }
    }
  }
}

// A position's key (k: its head's slice of a QKV row, normed with kn and roped at `offset`) and
// value (v) as the attention phases make them, packed for online_chunk; with `store` (the
// group's first head, for the position being written) also stored into the cache at kd, vd.
template <typename T, int D, bool QKNORM, bool TRADITIONAL, int ROT = D>
__device__ __forceinline__ void position_kv(const T* k, const T* v, const T* kn, float eps,
                                            const float* inv_freq, int offset, float ms,
                                            bool store, T* kd, T* vd, Words<D / 64>& kr,
                                            Words<D / 64>& vr) {
  constexpr int PL = D / 32;
  float kv[PL], vv[PL];
  head_rope<T, D, QKNORM, TRADITIONAL, ROT>(k, kn, eps, inv_freq, offset, kv, ms);
  load_pl<T, PL, true>(v + (threadIdx.x & 31) * PL, vv);
  if (store) {
    store_pl<T, PL>(kd, kv);
    store_pl<T, PL>(vd, vv);
  }
  kr.template pack<T>(kv);
  vr.template pack<T>(vv);
}

// Splits of one head's positions for a sequence of n positions: ~8 positions a split, at most
// smax, and no more than the grid's nw warps give each of the heads (decode_layer/rows.rs's
// `splits` chooses the same on the host).
__device__ __forceinline__ int head_splits(int n, int smax, int heads, int nw) {
  return max(1, min(min((n + 7) / 8, smax), nw / heads));
}

// A split's partial softmax (m, l and the lane's PL elements of o) published at slot a of ml and
// part, and counted on its head's counter `done`: true for the head's last split to finish,
// which then merges (merge_splits).
template <int D>
__device__ __forceinline__ bool publish_split(float* ml, float* part, int a, unsigned int* done,
                                              int S, float m, float l, const float* o) {
  constexpr int PL = D / 32;
  const int lane = threadIdx.x & 31;
  if (lane == 0) {
    ml[2 * a] = m;
    ml[2 * a + 1] = l;
  }
#pragma unroll
  for (int p = 0; p < PL; ++p) part[(size_t)a * D + lane * PL + p] = o[p];
  __threadfence();
  __syncwarp();
  unsigned int before = 0;
  if (lane == 0) before = atomicAdd(done, 1u);
  before = __shfl_sync(0xffffffffu, before, 0);
  return before == (unsigned int)(S - 1);
}

// The head's S partials (slots a0 .. a0 + S - 1) merged into the lane's PL elements of its
// attended row, in float.
template <int D>
__device__ __forceinline__ void merge_splits(const float* ml, const float* part, int a0, int S,
                                             float* num) {
  constexpr int PL = D / 32;
  const int lane = threadIdx.x & 31;
  __threadfence();
  float mx = neg_inf();
  for (int r = 0; r < S; ++r) mx = fmaxf(mx, __ldcg(ml + 2 * (a0 + r)));
  float den = 0.f;
#pragma unroll
  for (int p = 0; p < PL; ++p) num[p] = 0.f;
#pragma unroll 4
  for (int r = 0; r < S; ++r) {
    const int a = a0 + r;
    const float f = exp2f(__ldcg(ml + 2 * a) - mx);
    den = fmaf(__ldcg(ml + 2 * a + 1), f, den);
    float pv[PL];
    load_pl_f32<PL>(part + (size_t)a * D + lane * PL, pv);
#pragma unroll
    for (int p = 0; p < PL; ++p) num[p] = fmaf(pv[p], f, num[p]);
  }
#pragma unroll
  for (int p = 0; p < PL; ++p) num[p] /= den;
}

// One layer's tensors. Weights: fused [q; k; v] (wq*), o (wo*), fused [gate; up] (wg*), down
// (wd*), MLX affine BITS-bit with groups of G. n1, n2: the input and post-attention norm
// weights; qn, kn: the per-head q/k norms (QKNORM). kc, vc: the cache's [KV, cap, D] buffers,
// written in place at `offset` as decode_attn does.
template <typename T>
struct LayerPtrs {
  const uint32_t* wq;
  const T* sq;
  const T* bq;
  const uint32_t* wo;
  const T* so;
  const T* bo;
  const uint32_t* wg;
  const T* sg;
  const T* bg;
  const uint32_t* wd;
  const T* sd;
  const T* bd;
  const T* n1;
  const T* n2;
  const T* qn;
  const T* kn;
  const T* kc;
  const T* vc;
};

// What some families' attention adds (decode_layers' XTAB): the fused q/k/v projection's linear
// bias [NQKV] (lbq; Qwen2, GPT-OSS), the o projection's [HID] (lbo; GPT-OSS), per-head sink
// logits [H] (sk; GPT-OSS: an extra column of each head's softmax). Null where a layer has none.
template <typename T>
struct AttnExtras {
  const T* lbq;
  const T* lbo;
  const T* sk;
};

// A phase's staging of x[0..K) and its two-row products against it, integer (IDOT: stage_i8,
// row_dot2_i8) or float (stage, row_dot2, whose chunk sums follow the KMAX staged floats).
template <bool IDOT, typename T, int K, int BITS, int NT, bool NORM, int KMAX>
__device__ __forceinline__ void stage_x(const T* x, const T* nw, float eps, float* smem) {
  if constexpr (IDOT) {
    stage_i8<T, K, BITS, NT, NORM, true>(x, nw, eps, smem);
  } else {
    constexpr int PER = 128 / BITS;
    stage<T, K, PER, NT, NORM, true>(x, nw, eps, smem, smem + KMAX, smem + KMAX + KMAX / PER);
  }
}

// KS, c0, LG: the rows meet K of the KS staged values from chunk c0, LG lanes a row pair
// (row_dot2_i8).
// MX: mxfp4 products (integer or float, as IDOT says).
template <bool IDOT, typename T, int BITS, int G, int K, int KMAX, int KS = K, int LG = 32,
          bool MX = false>
__device__ __forceinline__ void dot2(float* smem, const uint32_t* w, const T* scales,
                                     const T* biases, int ra, int rb, float& ya, float& yb,
                                     int c0 = 0) {
  if constexpr (IDOT) {
    row_dot2_i8<T, BITS, G, K, KS, LG, MX>(smem, w, scales, biases, ra, rb, ya, yb, c0);
  } else {
    row_dot2<T, BITS, G, K, LG, MX>(smem, smem + KMAX, w, scales, biases, ra, rb, ya, yb, c0);
  }
}

// A mixer's out projection, phase p (t: the block's first ticket of it): h = x + in Wo^T over
// K inputs (attention's heads, or DeltaNet's), the product rounded to T first, as the separate
// ops would.
// lb: the projection's linear bias, added to the rounded product (GPT-OSS's o_proj), or null.
template <bool IDOT, typename T, int BITS, int G, int HID, int K, int NT, int KMAX, bool MX = false>
__device__ __forceinline__ void out_phase(Tickets& tk, int p, int t, const T* in, const uint32_t* w,
                                          const T* s, const T* b, const T* xin, T* h,
                                          float* smem, const T* lb = nullptr) {
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int warp = threadIdx.x >> 5;
  const int nw = gridDim.x * warps;
  tk.run(p, t, true, [&] { stage_x<IDOT, T, K, BITS, NT, false, KMAX>(in, nullptr, 0.f, smem); },
         [&](int t) {
           for (int r = 2 * (t * warps + warp); r < HID; r += 2 * nw) {
             float ya, yb;
             dot2<IDOT, T, BITS, G, K, KMAX, K, 32, MX>(smem, w, s, b, r, r + 1, ya, yb);
             if (lb != nullptr) {
               ya = round_t<T>(ya) + to_float(lb[r]);
               yb = round_t<T>(yb) + to_float(lb[r + 1]);
             }
             if (lane == 0) {
               h[r] = static_cast<T>(round_t<T>(ya) + load1<true>(xin + r));
               h[r + 1] = static_cast<T>(round_t<T>(yb) + load1<true>(xin + r + 1));
             }
           }
         });
}

// silu(gate) * up of two unrounded products, each step rounded to T as mlx-lm's ops round it.
template <typename T>
__device__ __forceinline__ T swiglu_t(float gate, float up) {
  const float g = round_t<T>(gate);
  const float sig = sigmoid_t<T>(g);
  return static_cast<T>(round_t<T>(g * sig) * round_t<T>(up));
}

// A layer's last two phases, p and p + 1 (t: the block's first ticket of p): act = silu(gate) *
// up of rms_norm(h), rounded as mlx-lm's ops (see the swiglu section), then y = h + act Wd^T.
// The caller waits for p + 1 before it reads y. scratch: for RMX_LAYER_TIME only.
template <bool IDOT, typename T, int BITS, int G, int HID, int F, int NT, int KMAX, bool MX = false>
__device__ __forceinline__ void ffn_phases(Tickets& tk, int p, int t, const T* hb, const T* n2,
                                           float eps, const uint32_t* wg, const T* sg,
                                           const T* bg, const uint32_t* wd, const T* sd,
                                           const T* bd, T* act, T* yout, float* smem,
                                           float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int warp = threadIdx.x >> 5;
  const int nw = gridDim.x * warps;
  tk.run(p, t, true, [&] { stage_x<IDOT, T, HID, BITS, NT, true, KMAX>(hb, n2, eps, smem); },
         [&](int t) {
           for (int r = t * warps + warp; r < F; r += nw) {
             float gv, uv;
             dot2<IDOT, T, BITS, G, HID, KMAX, HID, 32, MX>(smem, wg, sg, bg, r, F + r, gv, uv);
             if (lane == 0) act[r] = swiglu_t<T>(gv, uv);
           }
         });
  t = tk.wait(p);
  RMX_LAYER_TIME(4);
  tk.run(p + 1, t, true, [&] { stage_x<IDOT, T, F, BITS, NT, false, KMAX>(act, nullptr, 0.f, smem); },
         [&](int t) {
           for (int r = 2 * (t * warps + warp); r < HID; r += 2 * nw) {
             float a, b;
             dot2<IDOT, T, BITS, G, F, KMAX, F, 32, MX>(smem, wd, sd, bd, r, r + 1, a, b);
             if (lane == 0) {
               yout[r] = static_cast<T>(round_t<T>(a) + load1<true>(hb + r));
               yout[r + 1] = static_cast<T>(round_t<T>(b) + load1<true>(hb + r + 1));
             }
           }
         });
}

// A routed mixture of experts as a layer's feed-forward in the launch (kernels/layer_moe.cuh):
// E experts (0: none, NoMoe) of which TOPK are chosen by moe_route's MODE, each of hidden size
// FE; a shared expert of hidden size FS (0: none) behind a sigmoid gate; the router and that
// gate quantized RBITS-bit with groups of RG (mlx-lm quantizes them 8-bit). O_MOE: the scratch
// offset (floats) of the router's logits, the choice after them.
// OAI (GPT-OSS): the router and every expert's products have linear biases and the experts'
// activation is swiglu_oai (MODE 2: top-k, then a softmax over those logits).
template <int E_, int TOPK_, int FE_, int FS_, int RBITS_, int RG_, int MODE_, int O_MOE_,
          bool OAI_ = false>
struct MoeShape {
  static constexpr int E = E_;
  static constexpr int TOPK = TOPK_;
  static constexpr int FE = FE_;
  static constexpr int FS = FS_;
  static constexpr int RBITS = RBITS_;
  static constexpr int RG = RG_;
  static constexpr int MODE = MODE_;
  static constexpr int O_MOE = O_MOE_;
  static constexpr bool OAI = OAI_;
  // The activations the down products read: every chosen expert's, then the shared expert's.
  static constexpr int KA = TOPK * FE + FS;
};
using NoMoe = MoeShape<0, 1, 0, 0, 8, 64, 0, 0>;

// A MoE feed-forward's tensors, MLX affine: the router [E, HID] (wr*) and the shared expert's
// gate [1, HID] (wsg*) at RBITS; the experts' fused gate/up [E, 2FE, HID] (wg*, gate rows
// first) and down [E, HID, FE] (wd*); the shared expert's fused gate/up [2FS, HID] (wsu*) and
// down [HID, FS] (wsd*). The shared expert's are unread without one (FS 0). With OAI: the
// router's linear bias [E] (lr), the experts' gate/up biases [E, 2FE] (lg) and down biases
// [E, HID] (ld), and swiglu_oai's {alpha, limit} (ap); unread otherwise.
template <typename T>
struct MoePtrs {
  const uint32_t* wr;
  const T* sr;
  const T* br;
  const uint32_t* wsg;
  const T* ssg;
  const T* bsg;
  const uint32_t* wg;
  const T* sg;
  const T* bg;
  const uint32_t* wd;
  const T* sd;
  const T* bd;
  const uint32_t* wsu;
  const T* ssu;
  const T* bsu;
  const uint32_t* wsd;
  const T* ssd;
  const T* bsd;
  const T* lr;
  const T* lg;
  const T* ld;
  const T* ap;
};

// Phases p .. p + 2 of a MoE feed-forward: y = h + moe(rms_norm(h)) (kernels/layer_moe.cuh).
template <bool IDOT, typename T, int BITS, int G, int HID, int NT, int KMAX, typename MOE,
          bool MX = false>
__device__ __forceinline__ void moe_phases(Tickets& tk, int p, int t, const T* hb, const T* n2,
                                           float eps, const MoePtrs<T>& M, T* act, T* yout,
                                           float* smem, float* scratch);

// nl consecutive layers (tab: their tensors, in shared memory), each layer's five phases
// following the last layer's with the same tickets: one launch instead of nl, without the
// ~3.5 us between kernels. pos = {offset, cap} (every layer's cache at the same step);
// par = {eps, qk eps, attention scale}.
// scratch (float): the QKV row (T) from 0, attention partials (m, l) at O_ML and their rows at
// O_PART ([H][SMAX][D]), the attended row (T) at O_ATT, the post-attention residual (T) at O_H,
// the SwiGLU activations (T) at O_ACT, a layer's output that the next reads (T) at O_X -- each
// region on its own 128-byte lines.
// Dynamic shared memory: max(HID, H*D, F) + max(...)/PER + 32 floats.
// bar: uint32 counters that outlive the launch, zero before the first (Tickets' TK_*).
template <typename T, int BITS, int G, int HID, int H, int KV, int D, int F, bool QKNORM,
          bool TRADITIONAL, int NT, int SMAX, int O_ML, int O_PART, int O_ATT, int O_H,
          int O_ACT, int O_X, bool IDOT, bool MLP, typename MOE = NoMoe, int ROT = D,
          bool GATED = false, bool MX = false>
__device__ __forceinline__ void decode_layers(
    const T* x, const LayerPtrs<T>* tab, int nl, const float* inv_freq, const int32_t* pos,
    const float* par, const uint32_t* bar_in, T* y, float* scratch,
    const MoePtrs<T>* mtab = nullptr, const AttnExtras<T>* xtab = nullptr) {
  // GATED (Qwen3-Next / Qwen3.5): q's rows hold each head's D queries then D gate values, and
  // the attended row is multiplied by the gate's sigmoid, as mlx-lm's `output * sigmoid(gate)`.
  // ROT: the rotated dimensions of a head (head_rope). xtab: each layer's AttnExtras, or null.
  // pos = {offset, cap, ring slot, ring positions, ring capacity, ring layers}: the layers whose
  // bit is set in the last (GPT-OSS's sliding windows, mlx-lm's RotatingKVCache) keep their
  // keys and values in a ring of `ring capacity` positions, the new one written at `ring slot`,
  // the first `ring positions` attended; the others in `cap` positions, the new one at `offset`.
  // par = {eps, qk eps, attention scale, rope input scale}.
  constexpr int QS = GATED ? 2 * D : D;  // a head's q rows
  constexpr int KOFF = H * QS;           // where k's rows start, v's KV * D after
  constexpr int NQKV = KOFF + 2 * KV * D;
  constexpr int PL = D / 32;
  constexpr int CH = 32 / PL;  // positions whose keys and values a warp loads at once
  constexpr int GQ = H / KV;
  constexpr int KMAX = (HID > H * D ? HID : H * D) > F ? (HID > H * D ? HID : H * D) : F;
  static_assert(D % 64 == 0 && D <= 256, "head size");
  extern __shared__ float smem[];
  T* qkv = reinterpret_cast<T*>(scratch);
  float* ml = scratch + O_ML;
  float* part = scratch + O_PART;
  T* att = reinterpret_cast<T*>(scratch + O_ATT);
  T* hb = reinterpret_cast<T*>(scratch + O_H);
  T* act = reinterpret_cast<T*>(scratch + O_ACT);
  T* xb = reinterpret_cast<T*>(scratch + O_X);
  unsigned int* bar = const_cast<unsigned int*>(bar_in);
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int warp = threadIdx.x >> 5;
  const int nw = gridDim.x * warps;
  __shared__ int ticket_slot;
  constexpr int NPH = LAYER_PHASES - (MLP ? 0 : 2) + (MOE::E > 0 ? 3 : 0);
  Tickets tk(bar, &ticket_slot, NPH * nl);
  unsigned int* heads_done = bar + TK_HEADS;  // per head: splits finished in this layer
  const int offset = pos[0];
  const int cap = pos[1];
  int t = tk.first();

  for (int l = 0; l < nl; ++l) {
    const LayerPtrs<T>& L = tab[l];
    const T* xin = l == 0 ? x : xb;  // written by an earlier launch or layer: read through L2
    T* yout = l + 1 == nl ? y : xb;
    T* kc = const_cast<T*>(L.kc);
    T* vc = const_cast<T*>(L.vc);
    const int p0 = NPH * l;
    const AttnExtras<T> X = xtab != nullptr ? xtab[l] : AttnExtras<T>{nullptr, nullptr, nullptr};
    const bool ring = (pos[5] >> l) & 1;
    const int jn = ring ? pos[2] : offset;      // the new position's slot
    const int n = ring ? pos[3] : offset + 1;   // slots attended
    const int lcap = ring ? pos[4] : cap;
    if (l > 0) t = tk.wait(p0 - 1);
    RMX_LAYER_TIME(0);
    // 1. QKV = rms_norm(x) Wqkv^T (+ its bias).
    tk.run(p0, t, l > 0,
           [&] { stage_x<IDOT, T, HID, BITS, NT, true, KMAX>(xin, L.n1, par[0], smem); },
           [&](int t) {
             for (int r = 2 * (t * warps + warp); r < NQKV; r += 2 * nw) {
               float a, b;
               dot2<IDOT, T, BITS, G, HID, KMAX, HID, 32, MX>(smem, L.wq, L.sq, L.bq, r, r + 1, a,
                                                              b);
               if (X.lbq != nullptr) {
                 a = round_t<T>(a) + to_float(X.lbq[r]);
                 b = round_t<T>(b) + to_float(X.lbq[r + 1]);
               }
               if (lane == 0) {
                 qkv[r] = static_cast<T>(a);
                 qkv[r + 1] = static_cast<T>(b);
               }
             }
           });
    t = tk.wait(p0);
    RMX_LAYER_TIME(1);

    // 2. Attention: head h's positions are split S ways (a warp each, about 8 positions per
    // split); each warp loads its positions' keys and values all at once (CH rows of each, so the
    // split costs one memory latency, not one per position) and keeps an online softmax over
    // them. The warp whose split holds the new position makes that key and value itself; the
    // group's first head stores them in the cache. The last warp of a head to finish (a counter
    // per head) merges the head's S partials into the attended row: no wait for the merge.
    const int S = head_splits(n, SMAX, H, nw);
    const float qscale = par[2] * 1.44269504088896340736f;  // log2(e): exp2 below
    tk.run(p0 + 1, t, true, [] {}, [&](int t) {
      for (int item = t * warps + warp; item < H * S; item += nw) {
        const int h = item / S;
        const int s = item - h * S;
        const int g = h / GQ;
        float q[PL], o[PL];
#pragma unroll
        for (int p = 0; p < PL; ++p) o[p] = 0.f;
        float m = neg_inf(), l = 0.f;
        if (X.sk != nullptr && s == 0) {
          // The sink: a column of every head's softmax with no value, as MLX's attention
          // starts its first split (max = log2(e) * sink, sum = 1).
          m = 1.44269504088896340736f * to_float(X.sk[h]);
          l = 1.f;
        }
        const size_t base = (size_t)g * lcap * D + lane * PL;
        for (int j0 = s; j0 < n; j0 += CH * S) {
          Words<PL / 2> kr[CH], vr[CH];
#pragma unroll
          for (int i = 0; i < CH; ++i) {
            const int j = j0 + i * S;
            if (j < n && j != jn) {
              kr[i].template load<false>(kc + base + (size_t)j * D);
              vr[i].template load<false>(vc + base + (size_t)j * D);
            }
          }
          if (j0 == s) {
            // While those loads are in flight.
            head_rope<T, D, QKNORM, TRADITIONAL, ROT>(qkv + h * QS, L.qn, par[1], inv_freq, offset,
                                                      q, par[3]);
#pragma unroll
            for (int p = 0; p < PL; ++p) q[p] *= qscale;
            RMX_LAYER_TIME(6);
          }
#pragma unroll
          for (int i = 0; i < CH; ++i) {
            if (j0 + i * S == jn) {
              position_kv<T, D, QKNORM, TRADITIONAL, ROT>(
                  qkv + KOFF + g * D, qkv + KOFF + (KV + g) * D, L.kn, par[1], inv_freq, offset,
                  par[3], h % GQ == 0, kc + base + (size_t)jn * D, vc + base + (size_t)jn * D,
                  kr[i], vr[i]);
            }
          }
          online_chunk<T, PL, CH>(q, kr, vr, min(CH, (n - j0 + S - 1) / S), m, l, o);
        }
        RMX_LAYER_TIME(7);
        const bool last = publish_split<D>(ml, part, h * SMAX + s, heads_done + h, S, m, l, o);
        RMX_LAYER_TIME(8);
        if (last) {
          // The head's last split: merge all S, rounded to T as MLX's attention writes its output.
          float num[PL];
          merge_splits<D>(ml, part, h * SMAX, S, num);
          if constexpr (GATED) {
            float gv[PL];
            load_pl<T, PL, true>(qkv + h * QS + D + lane * PL, gv);
#pragma unroll
            for (int p = 0; p < PL; ++p) {
              num[p] = round_t<T>(num[p]) * sigmoid_t<T>(gv[p]);
            }
          }
          store_pl<T, PL>(att + h * D + lane * PL, num);
          if (lane == 0) heads_done[h] = 0;  // for the next layer or launch
        }
        RMX_LAYER_TIME(9);
      }
    });
    t = tk.wait(p0 + 1);
    RMX_LAYER_TIME(2);

    // 3. h = x + att Wo^T.
    out_phase<IDOT, T, BITS, G, HID, H * D, NT, KMAX, MX>(tk, p0 + 2, t, att, L.wo, L.so, L.bo,
                                                          xin, MLP || MOE::E > 0 ? hb : yout,
                                                          smem, X.lbo);

    // 4-5. The MLP, or 4-6 the experts (MOE), unless the layer's feed-forward runs after the
    // launch (neither: a MoE layer whose experts the launch does not take), when h is the
    // launch's output.
    if constexpr (MLP) {
      t = tk.wait(p0 + 2);
      RMX_LAYER_TIME(3);
      ffn_phases<IDOT, T, BITS, G, HID, F, NT, KMAX, MX>(tk, p0 + 3, t, hb, L.n2, par[0], L.wg,
                                                         L.sg, L.bg, L.wd, L.sd, L.bd, act, yout,
                                                         smem, scratch);
    } else if constexpr (MOE::E > 0) {
      t = tk.wait(p0 + 2);
      moe_phases<IDOT, T, BITS, G, HID, NT, KMAX, MOE, MX>(tk, p0 + 3, t, hb, L.n2, par[0],
                                                           mtab[l], act, yout, smem, scratch);
    }
  }  // layers
#ifdef RMX_LAYER_TIMES
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    atomicMax(reinterpret_cast<unsigned long long*>(scratch + RMX_LAYER_TIMES) + 5, now);
  }
#endif
  tk.leave();
}


// One layer whose tensors are the launch's parameters (decode_layer.rs with one layer a launch,
// scripts/bench/layer_lab.py).
template <typename T, int BITS, int G, int HID, int H, int KV, int D, int F, bool QKNORM,
          bool TRADITIONAL, int NT, int SMAX, int O_ML, int O_PART, int O_ATT, int O_H,
          int O_ACT, int O_X, bool IDOT>
__device__ __forceinline__ void decode_layer(
    const T* x, const uint32_t* wq, const T* sq, const T* bq, const uint32_t* wo, const T* so,
    const T* bo, const uint32_t* wg, const T* sg, const T* bg, const uint32_t* wd, const T* sd,
    const T* bd, const T* n1, const T* n2, const T* qn, const T* kn, const float* inv_freq,
    const int32_t* pos, const float* par, const T* kc, const T* vc, const uint32_t* bar, T* y,
    float* scratch) {
  __shared__ LayerPtrs<T> tab;
  if (threadIdx.x == 0) {
    tab = LayerPtrs<T>{wq, sq, bq, wo, so, bo, wg, sg, bg, wd, sd, bd, n1, n2, qn, kn, kc, vc};
  }
  __syncthreads();
  decode_layers<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, O_ML, O_PART, O_ATT,
                O_H, O_ACT, O_X, IDOT, true>(x, &tab, 1, inv_freq, pos, par, bar, y, scratch);
}

}  // namespace rmx

// Every layer kernel (MLX writes its `__global__` line after the header, which holds this
// section) runs one 512-thread block per SM, so it may hold 128 registers a thread: without the
// bound ptxas gives the rows kernel 168, the expert phases 132-154, Qwen3.5-27B's 8-bit DeltaNet
// layers 168 and Qwen2's biased layers 160, past what a 512-thread block may launch with
// (a few hundred bytes spill instead).
#undef __global__
#define __global__ __location__(global) __launch_bounds__(512, 1)
