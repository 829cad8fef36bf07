namespace rmx {

// A Gated DeltaNet layer's tensors (Qwen3.5's linear-attention layers with a dense MLP).
// Weights, MLX affine BITS-bit with groups of G: the joined input projection [qkv | z | b | a]
// (wi*), the out projection (wo*), fused [gate; up] (wg*), down (wd*). n1, n2: the input and
// post-mixer norm weights; cw: the convolution [C, K]; dtb: dt_bias; rate: -exp(A_log) (float);
// nw: the output norm's weight. cvin, stin: the convolution cache and the state the step reads
// (float [Hv, Dv, Dk]); cvout, stout: where it writes the new ones (outputs of the launch, so a
// snapshot of the old state stays valid).
template <typename T>
struct DeltaPtrs {
  const uint32_t* wi;
  const T* si;
  const T* bi;
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
  const T* cw;
  const T* dtb;
  const float* rate;
  const T* nw;
  const T* cvin;
  const float* stin;
  T* cvout;
  float* stout;
};

// nl consecutive DeltaNet layers of one sequence's decode step in one launch, five phases a layer
// on decode_layers' tickets: 1. P = rms_norm(x) Wi^T; 2. the step (delta_head, a ticket per
// value head: the convolution, q/k norms, the delta rule, the gated norm) into y; 3. h = x +
// y Wo^T; 4-5. the MLP (ffn_phases). Where the per-op path took five launches a layer. MLP
// false: the first three only, then the experts' three phases (MOE: moe_phases), or h the
// launch's output (a MoE layer whose experts run after it).
// par = {eps, q/k eps, (unused), the output norm's eps}.
// scratch (float): P (T) from 0, y (T) at O_Y, h (T) at O_H, the SwiGLU activations (T) at
// O_ACT, a layer's output that the next reads (T) at O_X.
// Dynamic shared memory: max(HID, HV*DV, F) + max(...)/PER + 32 floats.
template <typename T, int BITS, int G, int HID, int HK, int HV, int DK, int DV, int KC, int F,
          int NT, int O_Y, int O_H, int O_ACT, int O_X, bool IDOT, bool MLP,
          typename MOE = NoMoe>
__device__ __forceinline__ void decode_delta_layers(const T* x, const DeltaPtrs<T>* tab, int nl,
                                                    const float* par, const uint32_t* bar_in,
                                                    T* y, float* scratch,
                                                    const MoePtrs<T>* mtab = nullptr) {
  constexpr int C = 2 * HK * DK + HV * DV;
  constexpr int P = C + HV * DV + 2 * HV;
  constexpr int KMAX = (HID > HV * DV ? HID : HV * DV) > F ? (HID > HV * DV ? HID : HV * DV) : F;
  static_assert(P % 2 == 0 && HID % 2 == 0, "rows are taken two at a time");
  extern __shared__ float smem[];
  T* proj = reinterpret_cast<T*>(scratch);
  T* yd = reinterpret_cast<T*>(scratch + O_Y);
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
  int t = tk.first();

  for (int l = 0; l < nl; ++l) {
    const DeltaPtrs<T>& L = tab[l];
    const T* xin = l == 0 ? x : xb;
    T* yout = l + 1 == nl ? y : xb;
    const int p0 = NPH * l;
    if (l > 0) t = tk.wait(p0 - 1);
    // 1. The joined input projection of the normed row.
    tk.run(p0, t, l > 0,
           [&] { stage_x<IDOT, T, HID, BITS, NT, true, KMAX>(xin, L.n1, par[0], smem); },
           [&](int t) {
             for (int r = 2 * (t * warps + warp); r < P; r += 2 * nw) {
               float a, b;
               dot2<IDOT, T, BITS, G, HID, KMAX>(smem, L.wi, L.si, L.bi, r, r + 1, a, b);
               if (lane == 0) {
                 proj[r] = static_cast<T>(a);
                 proj[r + 1] = static_cast<T>(b);
               }
             }
           });
    t = tk.wait(p0);

    // 2. The step, a value head a ticket (HV of the grid's tickets have work).
    tk.run(p0 + 1, t, true, [] {}, [&](int t) {
      for (int n = t; n < HV; n += gridDim.x) {
        delta_head<T, T, DK, DV, HK, HV, KC, NT, true>(n, proj, L.cvin, L.cw, L.dtb, L.rate, L.nw,
                                                       L.stin, par[3], par[1], yd, L.cvout, L.stout);
      }
    });
    t = tk.wait(p0 + 1);

    // 3. h = x + y Wo^T.
    out_phase<IDOT, T, BITS, G, HID, HV * DV, NT, KMAX>(tk, p0 + 2, t, yd, L.wo, L.so, L.bo, xin,
                                                        MLP || MOE::E > 0 ? hb : yout, smem);

    // 4-5. The MLP, or 4-6 the experts.
    if constexpr (MLP) {
      t = tk.wait(p0 + 2);
      ffn_phases<IDOT, T, BITS, G, HID, F, NT, KMAX>(tk, p0 + 3, t, hb, L.n2, par[0], L.wg, L.sg,
                                                     L.bg, L.wd, L.sd, L.bd, act, yout, smem,
                                                     scratch);
    } else if constexpr (MOE::E > 0) {
      t = tk.wait(p0 + 2);
      moe_phases<IDOT, T, BITS, G, HID, NT, KMAX, MOE>(tk, p0 + 3, t, hb, L.n2, par[0], mtab[l],
                                                       act, yout, smem, scratch);
    }
  }  // layers
  tk.leave();
}

}  // namespace rmx
