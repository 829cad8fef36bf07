namespace rmx {

// A MoE layer's feed-forward for one token as three phases on the layer kernel's tickets,
// where the per-op path took four launches (router product, moe_route, the experts' gate/up,
// their down products) and a shared expert five more:
//   1. the router's logits (and the shared expert's gate) of rms_norm(h), at the router's bits
//      (with OAI, GPT-OSS's, each plus its linear bias);
//   2. every block routes (moe_route on the logits, one warp) while it stages rms_norm(h) again
//      at the experts' bits, then the chosen experts' gate/up rows (and the shared expert's),
//      SwiGLU as the dense MLP's (OAI: swiglu_oai of the products plus their biases):
//      act = [expert 0's FE | ... | expert TOPK-1's | shared FS];
//   3. the down products: each warp's row pair against every chosen expert at once, LG lanes
//      an expert (the lanes of a warp split over the experts, so their loads are in flight
//      together), each product rounded (OAI: plus its bias), weighted by its score and summed
//      as MLX rounds mlx-lm's `(y * scores[..., None]).sum(-2)` (moe_route's order), then the
//      shared expert's `sigmoid(gate) * down`, then the residual.
// The block with phase 2's ticket 0 writes the choice to scratch, where phase 3 reads it.
template <bool IDOT, typename T, int BITS, int G, int HID, int NT, int KMAX, typename MOE,
          bool MX>
__device__ __forceinline__ void moe_phases(Tickets& tk, int p, int t, const T* hb, const T* n2,
                                           float eps, const MoePtrs<T>& M, T* act, T* yout,
                                           float* smem, float* scratch) {
  constexpr int E = MOE::E, TOPK = MOE::TOPK, FE = MOE::FE, FS = MOE::FS, KA = MOE::KA;
  constexpr int PER = 128 / BITS;
  // Lanes per chosen expert in phase 3: 32 over the next power of two of TOPK.
  constexpr int TP = TOPK <= 1 ? 1 : TOPK <= 2 ? 2 : TOPK <= 4 ? 4 : TOPK <= 8 ? 8 : TOPK <= 16 ? 16 : 32;
  constexpr int LG = 32 / TP;
  static_assert(E % 2 == 0 && TOPK >= 1 && TOPK <= 32 && TOPK <= E, "router shape");
  static_assert(FE % G == 0 && FS % G == 0 && HID % 2 == 0, "whole groups");
  T* logits = reinterpret_cast<T*>(scratch + MOE::O_MOE);  // E, then the shared gate's
  constexpr int O_SEL = MOE::O_MOE + ((E + 2) / 2 + 31) / 32 * 32;
  uint32_t* sel_idx = reinterpret_cast<uint32_t*>(scratch + O_SEL);
  T* sel_sc = reinterpret_cast<T*>(scratch + O_SEL + TOPK);
  __shared__ T lg_s[E];
  __shared__ uint32_t idx_s[TOPK];
  __shared__ T sc_s[TOPK];
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int warp = threadIdx.x >> 5;
  const int nw = gridDim.x * warps;

  // 1. Router logits, a row pair a warp; the shared expert's gate is one more item. (Phase 0 of
  // a launch claims no ticket early: Tickets::run.)
  tk.run(p, t, p > 0,
         [&] { stage_x<IDOT, T, HID, MOE::RBITS, NT, true, KMAX>(hb, n2, eps, smem); },
         [&](int t) {
           for (int i = t * warps + warp; i < E / 2 + (FS > 0 ? 1 : 0); i += nw) {
             float a, b;
             if (i < E / 2) {
               dot2<IDOT, T, MOE::RBITS, MOE::RG, HID, KMAX>(smem, M.wr, M.sr, M.br, 2 * i,
                                                             2 * i + 1, a, b);
               if (lane == 0) {
                 if constexpr (MOE::OAI) {
                   a = round_t<T>(a) + to_float(M.lr[2 * i]);
                   b = round_t<T>(b) + to_float(M.lr[2 * i + 1]);
                 }
                 logits[2 * i] = static_cast<T>(a);
                 logits[2 * i + 1] = static_cast<T>(b);
               }
             } else {
               dot2<IDOT, T, MOE::RBITS, MOE::RG, HID, KMAX>(smem, M.wsg, M.ssg, M.bsg, 0, 0, a, b);
               if (lane == 0) logits[E] = static_cast<T>(a);
             }
           }
         });
  t = tk.wait(p);

  // 2. The choice, then the chosen experts' (and the shared expert's) gate/up rows.
  tk.run(p + 1, t, true,
         [&] {
           if (warp == 0) {
             for (int e = lane; e < E; e += 32) lg_s[e] = static_cast<T>(load1<true>(logits + e));
             __syncwarp();
             moe_route<T, E, TOPK, MOE::MODE>(lg_s, idx_s, sc_s);
           }
           stage_x<IDOT, T, HID, BITS, NT, true, KMAX>(hb, n2, eps, smem);  // ends synchronized
         },
         [&](int t) {
           if (t == 0 && threadIdx.x < TOPK) {
             sel_idx[threadIdx.x] = idx_s[threadIdx.x];
             sel_sc[threadIdx.x] = sc_s[threadIdx.x];
           }
           for (int i = t * warps + warp; i < TOPK * FE + FS; i += nw) {
             float gv, uv;
             if (i < TOPK * FE) {
               const int j = i / FE;
               const int r = i - j * FE;
               const size_t e = idx_s[j];
               // Expert e's rows of the stacked [E * 2FE, HID] weights (rows, not pointers: an
               // mxfp4 expert's scales are bytes where the table types them T).
               const int r0 = static_cast<int>(e) * 2 * FE + r;
               dot2<IDOT, T, BITS, G, HID, KMAX, HID, 32, MX>(smem, M.wg, M.sg, M.bg, r0, r0 + FE,
                                                              gv, uv);
               if constexpr (MOE::OAI) {
                 if (lane == 0) {
                   const T* lb = M.lg + e * 2 * FE;
                   act[i] = swiglu_oai_t<T>(gv, uv, to_float(lb[r]), to_float(lb[FE + r]), M.ap);
                 }
                 continue;
               }
             } else {
               const int r = i - TOPK * FE;
               dot2<IDOT, T, BITS, G, HID, KMAX, HID, 32, MX>(smem, M.wsu, M.ssu, M.bsu, r, FS + r,
                                                              gv, uv);
             }
             if (lane == 0) act[i] = swiglu_t<T>(gv, uv);
           }
         });
  t = tk.wait(p + 1);

  // 3. y = h + sum_j score_j * down_j(act_j) (+ the shared expert's), a row pair a warp.
  tk.run(p + 2, t, true,
         [&] {
           if (threadIdx.x < TOPK) {
             idx_s[threadIdx.x] = __ldcg(sel_idx + threadIdx.x);
             sc_s[threadIdx.x] = static_cast<T>(load1<true>(sel_sc + threadIdx.x));
           }
           stage_x<IDOT, T, KA, BITS, NT, false, KMAX>(act, nullptr, 0.f, smem);
         },
         [&](int t) {
           const int j = lane / LG;  // the lane's expert
           const bool mine = j < TOPK;
           const int jj = mine ? j : 0;
           const size_t e = idx_s[jj];
           const float sj = mine ? to_float(sc_s[jj]) : 0.f;
           float sg = 0.f;
           if constexpr (FS > 0) sg = sigmoid_t<T>(load1<true>(logits + E));
           for (int r = 2 * (t * warps + warp); r < HID; r += 2 * nw) {
             float a, b;
             const int r0 = static_cast<int>(e) * HID + r;  // expert e's rows, as above
             dot2<IDOT, T, BITS, G, FE, KMAX, KA, LG, MX>(smem, M.wd, M.sd, M.bd, r0, r0 + 1, a,
                                                          b, jj * (FE / PER));
             // Each group's lanes hold its expert's total. Weighted, then summed in the choice's
             // order (smallest score first) in T, as MLX's `.sum(axis=-2)` adds a column.
             a = round_t<T>(a);
             b = round_t<T>(b);
             if constexpr (MOE::OAI) {  // the expert's down bias
               a = round_t<T>(a + to_float(M.ld[e * HID + r]));
               b = round_t<T>(b + to_float(M.ld[e * HID + r + 1]));
             }
             const float pa = round_t<T>(sj * a);
             const float pb = round_t<T>(sj * b);
             float ya = 0.f, yb = 0.f;
#pragma unroll
             for (int k = 0; k < TOPK; ++k) {
               ya = round_t<T>(ya + __shfl_sync(0xffffffffu, pa, k * LG));
               yb = round_t<T>(yb + __shfl_sync(0xffffffffu, pb, k * LG));
             }
             if constexpr (FS > 0) {
               float sa, sb;
               dot2<IDOT, T, BITS, G, FS, KMAX, KA, 32, MX>(smem, M.wsd, M.ssd, M.bsd, r, r + 1, sa,
                                                            sb, TOPK * FE / PER);
               ya = round_t<T>(ya + round_t<T>(sg * round_t<T>(sa)));
               yb = round_t<T>(yb + round_t<T>(sg * round_t<T>(sb)));
             }
             if (lane == 0) {
               yout[r] = static_cast<T>(ya + load1<true>(hb + r));
               yout[r + 1] = static_cast<T>(yb + load1<true>(hb + r + 1));
             }
           }
         });
}

// One MoE feed-forward as its own launch, y = x + moe(rms_norm(x)), for a layer whose mixer
// the layer kernel does not take (Qwen3.5's gated attention): three phases where the per-op
// path took four to nine launches. par = {eps}. scratch (float): the activations (T) from 0,
// the router's logits and the choice from MOE::O_MOE.
template <typename T, int BITS, int G, int HID, int NT, int KMAX, bool IDOT, typename MOE,
          bool MX = false>
__device__ __forceinline__ void decode_moe(const T* x, const T* n2, const MoePtrs<T>* m,
                                           const float* par, const uint32_t* bar_in, T* y,
                                           float* scratch) {
  extern __shared__ float smem[];
  __shared__ int ticket_slot;
  Tickets tk(const_cast<unsigned int*>(bar_in), &ticket_slot, 3);
  const int t = tk.first();
  moe_phases<IDOT, T, BITS, G, HID, NT, KMAX, MOE, MX>(tk, 0, t, x, n2, par[0], *m,
                                                   reinterpret_cast<T*>(scratch), y, smem,
                                                   scratch);
  tk.leave();
}

}  // namespace rmx
