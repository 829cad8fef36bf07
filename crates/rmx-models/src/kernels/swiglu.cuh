namespace rmx {

// silu(gate) * up elementwise for rows of F, as mlx-lm's three ops round it (sigmoid, the
// product with gate, the product with up, each to T) in one pass over memory. gate and up are
// read at row strides GS and US from element offsets GOFF and UOFF, so one fused [rows, 2F]
// product (gate first) needs no split copies.
// Grid: x over F, y over rows.
template <typename T, int F, int GS, int US, int GOFF, int UOFF>
__device__ __forceinline__ void swiglu(const T* gate, const T* up, T* y) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= F) return;
  const size_t r = blockIdx.y;
  const size_t idx = r * F + f;
  const float gv = to_float(gate[GOFF + r * GS + f]);
  const float uv = to_float(up[UOFF + r * US + f]);
  const float sig = sigmoid_t<T>(gv);
  const float a = to_float(static_cast<T>(gv * sig));
  y[idx] = static_cast<T>(a * uv);
}

}  // namespace rmx
