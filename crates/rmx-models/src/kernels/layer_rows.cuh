namespace rmx {

// decode_layers for a batch's decode step (several sequences, one token each): the same five
// phases per layer and the same arithmetic per row, so a row gets the bits it would get decoding
// alone (batch invariance on the fast path), while each weight chunk is loaded once for up to
// MR rows. Integer products only (IDOT; decode_layer.rs falls back to the op path without), or
// with MMA (RMX_LAYER_ROWS_MMA, a batch's step only) bf16 tensor-core products, one weight load
// for up to 32 rows but no longer a row's solo bits (layer_rows_mma.cuh).
//
// The rows' x are staged side by side in shared memory, each as stage_i8 lays out one
// (RowStage<K>::STRIDE floats a row; stage_rows_i8 stages a group of them at once); a phase
// takes its rows in groups of as many as fit (mg[...]) and stages each group in turn, reading
// its weights again per group (from L2).
//
// The caches are a left-padded batch ([B, KV, cap, D]; batch_cache.rs): every row writes column
// `col`, and row b's positions start after its pads[b] columns, so its offset is col - pads[b].
// Attention splits each row's positions as decode_layers splits a lone sequence's (the same S for
// the same length), so its partials and their merge are the same sums.
//
// BLOCK: the rows are instead consecutive positions of one sequence (a speculative verify's
// k + 1 tokens; its cache [1, KV, cap, D], no padding): row b sits at position col + b and attends
// the cache's first col positions, the block's rows before it and itself. The earlier rows' keys
// and values are written into the cache in this very phase, by other warps, so a row takes them
// from the QKV rows instead (phase 1's output), normed and roped at their positions exactly as
// their writers do: the same bits as reading them back, and each row's sums are then the ones a
// decode step at its position makes alone.
// pos: {col, cap, B, SB, mg at HID, mg at H*D, mg at F (MMA: the spans of a staged part at each
// width, rows.rs's mma_part_spans), then the scratch offsets in floats of m/l, partial rows,
// attended rows, residual rows, activations, layer outputs, phase clocks}; SB is the splits'
// stride (the most splits of any row). With RMX_ROWS_TIMES defined (RMX_LAYER_TIMES=1), block 0
// writes %globaltimer as it starts and as it leaves each phase's wait (u64 slots 0 .. 5 nl - 1
// at the last offset) and every block its finish (slot 5 nl + its index).
#ifdef RMX_ROWS_TIMES
// Clock slot i (u64, pos[13] floats into scratch) gets %globaltimer.
__device__ __forceinline__ void rows_clock(float* scratch, const int32_t* pos, int i) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  reinterpret_cast<unsigned long long*>(scratch + __ldg(pos + 13))[i] = t;
}
#define RMX_ROWS_TIME(i) \
  if (blockIdx.x == 0 && threadIdx.x == 0) rows_clock(scratch, pos, i)
#else
#define RMX_ROWS_TIME(i)
#endif
template <int BITS, int K>
struct RowStage {
  static constexpr int FLOATS = 32 + K / 2 + 2 * (K / (128 / BITS));
  static constexpr int STRIDE = (FLOATS + 31) / 32 * 32;
};

// stage_i8 for n rows of x (K apart), row i at smem + i * STRIDE, each with stage_i8's
// arithmetic (the same threads sum the same words in the same order: the bits a row gets alone),
// but the block waits twice in all instead of twice a row, and the next row's words are loaded
// while one is summed or quantized. The words are read twice (once per pass, from L2) rather than
// held for every row: at 14,336 wide a row's words are 16 registers a thread.
template <typename T, int K, int BITS, int NT, bool NORM, int STRIDE>
__device__ __forceinline__ void stage_rows_i8(const T* x, int n, const T* nw, float eps,
                                              float* smem) {
  constexpr int ITERS = StageWords<K, NT>::ITERS;
  uint4 cur[ITERS], next[ITERS];
  if constexpr (NORM) {
    stage_load<T, K, NT, true>(x, cur);
#pragma unroll 1
    for (int i = 0; i < n; ++i) {
      if (i + 1 < n) stage_load<T, K, NT, true>(x + (size_t)(i + 1) * K, next);
      stage_sumsq<T, K, NT>(cur, smem + i * STRIDE);
#pragma unroll
      for (int w = 0; w < ITERS; ++w) cur[w] = next[w];
    }
    __syncthreads();
  }
  stage_load<T, K, NT, true>(x, cur);
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    if (i + 1 < n) stage_load<T, K, NT, true>(x + (size_t)(i + 1) * K, next);
    const float inv = NORM ? stage_inv<K, NT>(smem + i * STRIDE, eps) : 1.f;
    stage_quant<T, K, BITS, NT, NORM>(cur, nw, inv, smem + i * STRIDE);
#pragma unroll
    for (int w = 0; w < ITERS; ++w) cur[w] = next[w];
  }
  __syncthreads();
}

// row_dot2_i8 for up to MR staged rows (mr of them used), each product summed in row_dot2_i8's
// order: ya[i], yb[i] are weight rows ra, rb against staged row i. The next chunk's weights and
// scales are loaded before this one's products (with stage_rows_i8 and the stores by lane: a
// 32-row step 29.8 -> 27.1 ms on the H100, 4 rows unchanged; docs/perf.md, session 28).
template <typename T, int BITS, int G, int K, int MR>
__device__ __forceinline__ void rows_dot2_i8(
    float* smem, int mr, const uint32_t* w, const T* scales, const T* biases, int ra, int rb,
    float* ya, float* yb) {
  using L = I8Layout<BITS, K>;
  static_assert(BITS == 4 || BITS == 8, "4 or 8 bits");
  constexpr int WORDS = K * BITS / 32;
  constexpr int GROUPS = K / G;
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  const int lane = threadIdx.x & 31;
  const uint32_t* wa = w + (size_t)ra * WORDS;
  const uint32_t* wb = w + (size_t)rb * WORDS;
  float acc_a[MR], acc_b[MR];
#pragma unroll
  for (int i = 0; i < MR; ++i) acc_a[i] = acc_b[i] = 0.f;
  uint4 va, vb;
  float sa, ba, sb, bb;
  auto fetch = [&](int c) {
    va = load_stream(wa + 4 * c);
    vb = load_stream(wb + 4 * c);
    const int g = (L::PER * c) / G;
    sa = to_float(scales[(size_t)ra * GROUPS + g]);
    ba = to_float(biases[(size_t)ra * GROUPS + g]);
    sb = to_float(scales[(size_t)rb * GROUPS + g]);
    bb = to_float(biases[(size_t)rb * GROUPS + g]);
  };
  if (lane < L::CHUNKS) fetch(lane);
#pragma unroll 1
  for (int c = lane; c < L::CHUNKS; c += 32) {
    // The fields once a chunk, for every row.
    const uint32_t ua[4] = {va.x, va.y, va.z, va.w};
    const uint32_t ub[4] = {vb.x, vb.y, vb.z, vb.w};
    const ChunkFields<BITS> fa(ua), fb(ub);
    const float csa = sa, cba = ba, csb = sb, cbb = bb;
    if (c + 32 < L::CHUNKS) fetch(c + 32);
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      if (i < mr) {
        float* sm = smem + i * STRIDE;
        const uint4* planes = reinterpret_cast<const uint4*>(L::planes(sm));
        const float2 m = L::meta(sm)[c];
        int ia, ib;
        chunk_sums_fields<BITS, K>(planes, c, fa, fb, ia, ib);
        acc_a[i] = fmaf(csa * m.x, static_cast<float>(ia), fmaf(cba, m.y, acc_a[i]));
        acc_b[i] = fmaf(csb * m.x, static_cast<float>(ib), fmaf(cbb, m.y, acc_b[i]));
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MR; ++i) {
    ya[i] = warp_sum(acc_a[i]);
    yb[i] = warp_sum(acc_b[i]);
  }
}

// One weight phase of a ticket over every row: x rows src (K wide, RMS-normed with nw when NORM)
// staged mg at a time. The warp's weight-row pairs are decode_layers': ra from `first` in
// steps of `step` below n, rb = ra + other; out(b, ra, rb, ya, yb) stores row b's two products.
template <typename T, int BITS, int G, int K, int NT, int MR, bool NORM, typename Out>
__device__ __forceinline__ void rows_phase(const T* src, const T* nw, float eps, int rows,
                                           int mg, const uint32_t* w, const T* scales,
                                           const T* biases, int first, int step, int n_out,
                                           int other, Out out) {
  extern __shared__ float smem[];
  constexpr int STRIDE = RowStage<BITS, K>::STRIDE;
  static_assert(MR <= 32, "a lane stores each row's sums");
  for (int b0 = 0; b0 < rows; b0 += mg) {
    const int n = min(mg, rows - b0);
    __syncthreads();  // the last group's staged rows are read by every warp before they go
    stage_rows_i8<T, K, BITS, NT, NORM, STRIDE>(src + (size_t)b0 * K, n, nw, eps, smem);
    const int lane = threadIdx.x & 31;
    for (int ra = first; ra < n_out; ra += step) {
      const int rb = ra + other;
      for (int i0 = 0; i0 < n; i0 += MR) {
        float ya[MR], yb[MR];
        rows_dot2_i8<T, BITS, G, K, MR>(smem + i0 * STRIDE, min(MR, n - i0), w, scales, biases,
                                        ra, rb, ya, yb);
        // Every lane holds the sums (warp_sum's butterfly gives each the same bits): lane i
        // stores row i's, so the rows' residual reads are in flight together, not one by one
        // behind the stores that might alias them.
        float a = 0.f, c = 0.f;
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          if (lane == i) a = ya[i], c = yb[i];
        }
        if (lane < min(MR, n - i0)) out(b0 + i0 + lane, ra, rb, a, c);
      }
    }
  }
}

// A row's split s of head bh published; the head's last split merges all S into its attended
// row, rounded to T, and clears the head's counter for the next layer.
template <typename T, int D>
__device__ __forceinline__ void row_split_done(float* ml, float* part, T* att,
                                               unsigned int* heads_done, int bh, int SB, int s,
                                               int S, float m, float l, const float* o) {
  constexpr int PL = D / 32;
  if (publish_split<D>(ml, part, bh * SB + s, heads_done + bh, S, m, l, o)) {
    float num[PL];
    merge_splits<D>(ml, part, bh * SB, S, num);
    store_pl<T, PL>(att + (size_t)bh * D + (threadIdx.x & 31) * PL, num);
    if ((threadIdx.x & 31) == 0) heads_done[bh] = 0;
  }
}

// BLOCK's attention when every row of the block gets the same splits S (a lone sequence's S
// stops growing at SMAX, from ~500 positions on): an item is a head's run of splits for up to
// RG consecutive rows, so a position's key and value are loaded from the cache (or, for the
// block's own positions, normed and roped from the QKV rows) once for RG rows instead of once a
// row (S is every row's splits, so also their partials' stride). Each row still makes its own
// split sums chunk by chunk with the counts it has alone, and its position is written to the
// cache by its own group only (the group's first head of each KV head, as in the row-by-row
// loop): the same bits as that loop. Not inlined: its registers
// are allocated on their own (ptxas, sm_90: inlined, the kernel's spill stores grew 522 -> 1,586
// bytes at Llama-3-8B's shape; called, 1,002, and 84-172 in the function).
template <typename T, int D, bool QKNORM, bool TRADITIONAL, int H, int KV, int RG>
__device__ __noinline__ void block_attention_shared(
    const T* qkv, const T* qn, const T* kn, T* kc, T* vc, float eps, const float* inv_freq,
    int col, int cap, int rows, int S, float qscale, float* ml, float* part, T* att,
    unsigned int* heads_done, int first_item, int nw) {
  constexpr int NQKV = (H + 2 * KV) * D;
  constexpr int PL = D / 32;
  constexpr int CH = 32 / PL;
  constexpr int GQ = H / KV;
  const int lane = threadIdx.x & 31;
  const int groups = (rows + RG - 1) / RG;
  const int RUN = max(1, (groups * H * S + nw - 1) / nw);
  const int SG = (S + RUN - 1) / RUN;
  for (int item = first_item; item < groups * H * SG; item += nw) {
    const int b0 = (item / (H * SG)) * RG;
    const int h = (item / SG) % H;
    const int s0 = (item % SG) * RUN;
    const int nr = min(RG, rows - b0);
    const int g = h / GQ;
    const int n_max = col + b0 + nr;  // the group's last row attends the positions before it
    const size_t base = (size_t)g * cap * D + lane * PL;
    float q[RG][PL];
#pragma unroll
    for (int r = 0; r < RG; ++r) {
      if (r < nr) {
        head_rope<T, D, QKNORM, TRADITIONAL>(qkv + (size_t)(b0 + r) * NQKV + h * D, qn, eps,
                                             inv_freq, col + b0 + r, q[r]);
#pragma unroll
        for (int p = 0; p < PL; ++p) q[r][p] *= qscale;
      }
    }
    for (int s = s0; s < min(s0 + RUN, S); ++s) {
      float o[RG][PL], m[RG], lsum[RG];
#pragma unroll
      for (int r = 0; r < RG; ++r) {
        m[r] = neg_inf();
        lsum[r] = 0.f;
#pragma unroll
        for (int p = 0; p < PL; ++p) o[r][p] = 0.f;
      }
      for (int j0 = s; j0 < n_max; j0 += CH * S) {
        Words<PL / 2> kr[CH], vr[CH];
#pragma unroll
        for (int i = 0; i < CH; ++i) {
          const int j = j0 + i * S;
          if (j < col) {
            kr[i].template load<false>(kc + base + (size_t)j * D);
            vr[i].template load<false>(vc + base + (size_t)j * D);
          } else if (j < n_max) {
            const int w = j - col;  // the block's row at position j
            const T* rj = qkv + (size_t)w * NQKV;
            const bool store = h % GQ == 0 && w >= b0;
            position_kv<T, D, QKNORM, TRADITIONAL>(rj + (H + g) * D, rj + (H + KV + g) * D, kn,
                                                   eps, inv_freq, j, 1.f, store,
                                                   kc + base + (size_t)j * D,
                                                   vc + base + (size_t)j * D, kr[i], vr[i]);
          }
        }
#pragma unroll
        for (int r = 0; r < RG; ++r) {
          const int n = col + b0 + r + 1;
          if (r < nr && j0 < n) {
            online_chunk<T, PL, CH>(q[r], kr, vr, min(CH, (n - j0 + S - 1) / S), m[r], lsum[r],
                                    o[r]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < RG; ++r) {
        if (r < nr) {
          row_split_done<T, D>(ml, part, att, heads_done, (b0 + r) * H + h, S, s, S, m[r],
                               lsum[r], o[r]);
        }
      }
    }
  }
}

template <typename T, int BITS, int G, int HID, int H, int KV, int D, int F, bool QKNORM,
          bool TRADITIONAL, int NT, int SMAX, int MR, bool BLOCK = false,
          bool SHARE = false, bool MMA = false>
__device__ __forceinline__ void decode_layers_rows(
    const T* x, const LayerPtrs<T>* tab, int nl, const float* inv_freq, const int32_t* pos,
    const int32_t* pads, const float* par, const uint32_t* bar_in, T* y, float* scratch) {
  constexpr int NQKV = (H + 2 * KV) * D;
  constexpr int PL = D / 32;
  constexpr int CH = 32 / PL;
  constexpr int GQ = H / KV;
  static_assert(D % 64 == 0 && D <= 256, "head size");
  // The launch's sizes and offsets are read where they are used, not held: kept in registers
  // across the phases they took the kernel past 128 registers a thread (ptxas: 168), which a
  // 512-thread block cannot have.
  T* qkv = reinterpret_cast<T*>(scratch);
  auto region = [&](int i) { return scratch + __ldg(pos + i); };
  unsigned int* bar = const_cast<unsigned int*>(bar_in);
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int warp = threadIdx.x >> 5;
  const int nw = gridDim.x * warps;
  __shared__ int ticket_slot;
  Tickets tk(bar, &ticket_slot, LAYER_PHASES * nl);
  unsigned int* heads_done = bar + TK_HEADS;  // per row and head
  int t = tk.first();
  RMX_ROWS_TIME(0);

  for (int l = 0; l < nl; ++l) {
    const LayerPtrs<T>& L = tab[l];
    const T* xin = l == 0 ? x : reinterpret_cast<const T*>(region(12));
    T* kc = const_cast<T*>(L.kc);
    T* vc = const_cast<T*>(L.vc);
    const int p0 = LAYER_PHASES * l;
    if (l > 0) {
      t = tk.wait(p0 - 1);
      RMX_ROWS_TIME(p0);
    }
    // 1. QKV = rms_norm(x) Wqkv^T.
    tk.run(p0, t, l > 0, [] {}, [&](int t) {
      auto out = [&](int b, int ra, int rb, float a, float c) {
        qkv[(size_t)b * NQKV + ra] = static_cast<T>(a);
        qkv[(size_t)b * NQKV + rb] = static_cast<T>(c);
      };
      if constexpr (MMA) {
        rows_phase_mma<T, G, HID, NT, true>(xin, L.n1, par[0], __ldg(pos + 2), __ldg(pos + 4),
                                               L.wq, L.sq, L.bq, t, NQKV, 1, out);
      } else {
        rows_phase<T, BITS, G, HID, NT, MR, true>(
            xin, L.n1, par[0], __ldg(pos + 2), __ldg(pos + 4), L.wq, L.sq, L.bq, 2 * (t * warps + warp), 2 * nw, NQKV, 1, out);
      }
    });
    t = tk.wait(p0);
    RMX_ROWS_TIME(p0 + 1);

    // 2. Attention, per row as decode_layers' phase 2 for one sequence.
    const float qscale = par[2] * 1.44269504088896340736f;
    tk.run(p0 + 1, t, true, [] {}, [&](int t) {
      const int col = __ldg(pos), cap = __ldg(pos + 1), SB = __ldg(pos + 3);
      float* ml = region(7);
      float* part = region(8);
      T* att = reinterpret_cast<T*>(region(9));
      // Splits a warp takes in turn, of one row and head: one while the grid's warps cover every
      // split, else enough to go round the warps once, so the query is normed and roped once for
      // all of them (each split still makes its own sums: a row's bits do not depend on RUN).
      const int rows = __ldg(pos + 2);
      if constexpr (BLOCK && SHARE) {
        // The splits of the block's first and last rows (those between lie between).
        if (head_splits(col + 1, SMAX, H, nw) == SB) {
          block_attention_shared<T, D, QKNORM, TRADITIONAL, H, KV, 4>(
              qkv, L.qn, L.kn, kc, vc, par[1], inv_freq, col, cap, rows, SB, qscale, ml,
              part, att, heads_done, t * warps + warp, nw);
          return;
        }
      }
      const int RUN = max(1, (rows * H * SB + nw - 1) / nw);
      const int SG = (SB + RUN - 1) / RUN;  // runs of RUN splits a (row, head)
      for (int item = t * warps + warp; item < rows * H * SG; item += nw) {
        const int b = item / (H * SG);
        const int h = (item / SG) % H;
        const int s0 = (item % SG) * RUN;
        const int pad = BLOCK ? 0 : pads[b];
        const int offset = BLOCK ? col + b : col - pad;
        // Positions before `cached` are in the cache already (BLOCK: the block's start).
        const int cached = BLOCK ? col : offset;
        const int n = offset + 1;
        const int S = head_splits(n, SMAX, H, nw);
        const int g = h / GQ;
        const T* row = qkv + (size_t)b * NQKV;
        float q[PL];
        for (int s = s0; s < min(s0 + RUN, S); ++s) {
          float o[PL];
#pragma unroll
          for (int p = 0; p < PL; ++p) o[p] = 0.f;
          float m = neg_inf(), lsum = 0.f;
          const size_t base = (((size_t)(BLOCK ? 0 : b) * KV + g) * cap + pad) * D + lane * PL;
          for (int j0 = s; j0 < n; j0 += CH * S) {
            Words<PL / 2> kr[CH], vr[CH];
#pragma unroll
            for (int i = 0; i < CH; ++i) {
              const int j = j0 + i * S;
              if (j < cached) {
                kr[i].template load<false>(kc + base + (size_t)j * D);
                vr[i].template load<false>(vc + base + (size_t)j * D);
              } else if (BLOCK && j < offset) {
                // An earlier row of the block: its key and value as its writer makes them.
                const T* rj = qkv + (size_t)(j - col) * NQKV;
                position_kv<T, D, QKNORM, TRADITIONAL>(rj + (H + g) * D, rj + (H + KV + g) * D,
                                                       L.kn, par[1], inv_freq, j, 1.f, false,
                                                       nullptr, nullptr, kr[i], vr[i]);
              }
            }
            if (j0 == s && s == s0) {
              head_rope<T, D, QKNORM, TRADITIONAL>(row + h * D, L.qn, par[1], inv_freq, offset, q);
#pragma unroll
              for (int p = 0; p < PL; ++p) q[p] *= qscale;
            }
#pragma unroll
            for (int i = 0; i < CH; ++i) {
              if (j0 + i * S == offset) {
                position_kv<T, D, QKNORM, TRADITIONAL>(
                    row + (H + g) * D, row + (H + KV + g) * D, L.kn, par[1], inv_freq, offset, 1.f,
                    h % GQ == 0, kc + base + (size_t)offset * D, vc + base + (size_t)offset * D,
                    kr[i], vr[i]);
              }
            }
            online_chunk<T, PL, CH>(q, kr, vr, min(CH, (n - j0 + S - 1) / S), m, lsum, o);
          }
          row_split_done<T, D>(ml, part, att, heads_done, b * H + h, SB, s, S, m, lsum, o);
        }
      }
    });
    t = tk.wait(p0 + 1);
    RMX_ROWS_TIME(p0 + 2);

    // 3. h = x + att Wo^T.
    tk.run(p0 + 2, t, true, [] {}, [&](int t) {
      T* hb = reinterpret_cast<T*>(region(10));
      auto out = [&](int b, int ra, int rb, float a, float c) {
        const size_t i = (size_t)b * HID;
        hb[i + ra] = static_cast<T>(round_t<T>(a) + load1<true>(xin + i + ra));
        hb[i + rb] = static_cast<T>(round_t<T>(c) + load1<true>(xin + i + rb));
      };
      const T* att = reinterpret_cast<const T*>(region(9));
      if constexpr (MMA) {
        rows_phase_mma<T, G, H * D, NT, false>(att, nullptr, 0.f, __ldg(pos + 2), __ldg(pos + 5), L.wo,
                                                  L.so, L.bo, t, HID, 1, out);
      } else {
        rows_phase<T, BITS, G, H * D, NT, MR, false>(
            att, nullptr, 0.f, __ldg(pos + 2), __ldg(pos + 5), L.wo, L.so, L.bo, 2 * (t * warps + warp), 2 * nw, HID, 1, out);
      }
    });
    t = tk.wait(p0 + 2);
    RMX_ROWS_TIME(p0 + 3);

    // 4. act = silu(gate) * up of rms_norm(h).
    tk.run(p0 + 3, t, true, [] {}, [&](int t) {
      T* act = reinterpret_cast<T*>(region(11));
      auto out = [&](int b, int ra, int rb, float gv, float uv) {
        act[(size_t)b * F + ra] = swiglu_t<T>(gv, uv);
      };
      const T* hb = reinterpret_cast<const T*>(region(10));
      if constexpr (MMA) {
        rows_phase_mma<T, G, HID, NT, true>(hb, L.n2, par[0], __ldg(pos + 2), __ldg(pos + 4),
                                               L.wg, L.sg, L.bg, t, F, F, out);
      } else {
        rows_phase<T, BITS, G, HID, NT, MR, true>(
            hb, L.n2, par[0], __ldg(pos + 2), __ldg(pos + 4), L.wg, L.sg, L.bg, t * warps + warp, nw, F, F, out);
      }
    });
    t = tk.wait(p0 + 3);
    RMX_ROWS_TIME(p0 + 4);

    // 5. y = h + act Wd^T.
    tk.run(p0 + 4, t, true, [] {}, [&](int t) {
      const T* hb = reinterpret_cast<const T*>(region(10));
      T* yout = l + 1 == nl ? y : reinterpret_cast<T*>(region(12));
      auto out = [&](int b, int ra, int rb, float a, float c) {
        const size_t i = (size_t)b * HID;
        yout[i + ra] = static_cast<T>(round_t<T>(a) + load1<true>(hb + i + ra));
        yout[i + rb] = static_cast<T>(round_t<T>(c) + load1<true>(hb + i + rb));
      };
      const T* act = reinterpret_cast<const T*>(region(11));
      if constexpr (MMA) {
        rows_phase_mma<T, G, F, NT, false>(act, nullptr, 0.f, __ldg(pos + 2), __ldg(pos + 6), L.wd, L.sd,
                                              L.bd, t, HID, 1, out);
      } else {
        rows_phase<T, BITS, G, F, NT, MR, false>(
            act, nullptr, 0.f, __ldg(pos + 2), __ldg(pos + 6), L.wd, L.sd, L.bd, 2 * (t * warps + warp), 2 * nw, HID, 1, out);
      }
    });
  }
#ifdef RMX_ROWS_TIMES
  if (threadIdx.x == 0) rows_clock(scratch, pos, LAYER_PHASES * nl + blockIdx.x);
#endif
  tk.leave();
}

}  // namespace rmx
