// Implementations of the bridge functions declared in rmx_mlx.h. Kept mechanical on purpose:
// any decision about semantics lives on the Rust side (src/*.rs) where it is documented.
#include "rmx_mlx.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "mlx/backend/cuda/cuda.h"
#include "mlx/backend/gpu/device_info.h"

#include <dlfcn.h>
#include "mlx/backend/metal/metal.h"
#include "mlx/compile_impl.h"
#include "rmx-mlx/src/ffi.rs.h"

namespace rmx {

namespace {

// Codes shared with src/dtype.rs.
mx::Dtype to_dtype(uint8_t code) {
  switch (code) {
    case 0: return mx::bool_;
    case 1: return mx::uint8;
    case 2: return mx::uint16;
    case 3: return mx::uint32;
    case 4: return mx::uint64;
    case 5: return mx::int8;
    case 6: return mx::int16;
    case 7: return mx::int32;
    case 8: return mx::int64;
    case 9: return mx::float16;
    case 10: return mx::float32;
    case 11: return mx::bfloat16;
    case 12: return mx::complex64;
    case 13: return mx::float64;
  }
  throw std::invalid_argument("unknown dtype code " + std::to_string(code));
}

uint8_t from_dtype(mx::Dtype d) {
  switch (d.val()) {
    case mx::Dtype::Val::bool_: return 0;
    case mx::Dtype::Val::uint8: return 1;
    case mx::Dtype::Val::uint16: return 2;
    case mx::Dtype::Val::uint32: return 3;
    case mx::Dtype::Val::uint64: return 4;
    case mx::Dtype::Val::int8: return 5;
    case mx::Dtype::Val::int16: return 6;
    case mx::Dtype::Val::int32: return 7;
    case mx::Dtype::Val::int64: return 8;
    case mx::Dtype::Val::float16: return 9;
    case mx::Dtype::Val::float32: return 10;
    case mx::Dtype::Val::bfloat16: return 11;
    case mx::Dtype::Val::complex64: return 12;
    case mx::Dtype::Val::float64: return 13;
  }
  throw std::invalid_argument("unsupported dtype");
}

ArrayPtr wrap(mx::array a) { return std::make_unique<Array>(std::move(a)); }

ListPtr wrap_list(std::vector<mx::array> v) {
  auto l = std::make_unique<ArrayList>();
  l->items = std::move(v);
  return l;
}

mx::Shape to_shape(rust::Slice<const int32_t> s) { return mx::Shape(s.begin(), s.end()); }
std::vector<int> to_ints(rust::Slice<const int32_t> s) { return std::vector<int>(s.begin(), s.end()); }

std::optional<mx::array> opt(const Array* a) {
  if (a == nullptr) return std::nullopt;
  return a->inner;
}

mx::Device device_of(uint8_t type) {
  return type == 1 ? mx::Device(mx::Device::gpu) : mx::Device(mx::Device::cpu);
}

}  // namespace

Compiled::~Compiled() {
  // Drop the traced graphs MLX cached for this function; they hold arrays alive.
  mx::detail::compile_erase(mx::detail::compile_cache(), id);
}

ArrayPtr from_bytes(rust::Slice<const uint8_t> data, rust::Slice<const int32_t> shape, uint8_t dtype) {
  auto dt = to_dtype(dtype);
  auto sh = to_shape(shape);
  size_t n = 1;
  for (auto d : sh) n *= static_cast<size_t>(d);
  if (n * dt.size() != data.size()) {
    throw std::invalid_argument("data has " + std::to_string(data.size()) + " bytes, shape needs " +
                                std::to_string(n * dt.size()));
  }
  auto buf = mx::allocator::malloc(data.size());
  if (data.size() > 0) std::memcpy(buf.buffer().raw_ptr(), data.data(), data.size());
  return wrap(mx::array(std::move(buf), sh, dt));
}

ArrayPtr full(rust::Slice<const int32_t> shape, double value, uint8_t dtype) {
  auto dt = to_dtype(dtype);
  // Python MLX turns a Python float into a C++ float first, then into the target type; doing
  // the same keeps scalars bit-identical (double -> bf16 directly could round differently).
  mx::array v = mx::issubdtype(dt, mx::floating)
                    ? mx::array(static_cast<float>(value), dt)
                    : mx::astype(mx::array(static_cast<int64_t>(value), mx::int64), dt);
  return wrap(mx::full(to_shape(shape), v, dt));
}

ArrayPtr arange(double start, double stop, double step, uint8_t dtype) {
  return wrap(mx::arange(start, stop, step, to_dtype(dtype)));
}
ArrayPtr linspace(double start, double stop, int32_t num, uint8_t dtype) {
  return wrap(mx::linspace(start, stop, num, to_dtype(dtype)));
}

ArrayPtr clone_array(const Array& a) { return wrap(a.inner); }

void to_bytes(const Array& a, uint8_t dtype, rust::Slice<uint8_t> out) {
  auto dt = to_dtype(dtype);
  // Wait for this array alone first. A new op (contiguous, astype) would be queued behind all
  // the work already submitted on its stream -- the engine's next decode step -- so reading a
  // token would wait for the following token too and CPU and GPU would take turns.
  mx::array c = a.inner;
  c.eval();
  if (c.dtype() != dt || !c.flags().row_contiguous) {
    c = mx::contiguous(c.dtype() == dt ? c : mx::astype(c, dt));
    c.eval();
  }
  if (c.nbytes() != out.size()) {
    throw std::invalid_argument("read-back buffer has " + std::to_string(out.size()) +
                                " bytes, array has " + std::to_string(c.nbytes()));
  }
  if (c.nbytes() > 0) std::memcpy(out.data(), c.data<uint8_t>(), c.nbytes());
}

rust::Vec<int32_t> shape(const Array& a) {
  rust::Vec<int32_t> v;
  for (auto d : a.inner.shape()) v.push_back(d);
  return v;
}
uint8_t dtype(const Array& a) { return from_dtype(a.inner.dtype()); }
size_t size(const Array& a) { return a.inner.size(); }
size_t nbytes(const Array& a) { return a.inner.nbytes(); }
rust::String describe(const Array& a) {
  std::ostringstream os;
  os << a.inner;
  return rust::String(os.str());
}

ListPtr list_new() { return std::make_unique<ArrayList>(); }
void list_push(ArrayList& l, const Array& a) { l.items.push_back(a.inner); }
size_t list_len(const ArrayList& l) { return l.items.size(); }
ArrayPtr list_get(const ArrayList& l, size_t i) { return wrap(l.items.at(i)); }

// Codes shared with src/ops.rs (BinaryOp / UnaryOp).
ArrayPtr binary(const Array& a, const Array& b, uint8_t op) {
  const auto& x = a.inner;
  const auto& y = b.inner;
  switch (op) {
    case 0: return wrap(mx::add(x, y));
    case 1: return wrap(mx::subtract(x, y));
    case 2: return wrap(mx::multiply(x, y));
    case 3: return wrap(mx::divide(x, y));
    case 4: return wrap(mx::maximum(x, y));
    case 5: return wrap(mx::minimum(x, y));
    case 6: return wrap(mx::power(x, y));
    case 7: return wrap(mx::equal(x, y));
    case 8: return wrap(mx::not_equal(x, y));
    case 9: return wrap(mx::less(x, y));
    case 10: return wrap(mx::less_equal(x, y));
    case 11: return wrap(mx::greater(x, y));
    case 12: return wrap(mx::greater_equal(x, y));
    case 13: return wrap(mx::logical_and(x, y));
    case 14: return wrap(mx::logical_or(x, y));
    case 15: return wrap(mx::floor_divide(x, y));
    case 16: return wrap(mx::remainder(x, y));
    case 17: return wrap(mx::logaddexp(x, y));
  }
  throw std::invalid_argument("unknown binary op " + std::to_string(op));
}

ArrayPtr unary(const Array& a, uint8_t op) {
  const auto& x = a.inner;
  switch (op) {
    case 0: return wrap(mx::negative(x));
    case 1: return wrap(mx::exp(x));
    case 2: return wrap(mx::log(x));
    case 3: return wrap(mx::rsqrt(x));
    case 4: return wrap(mx::sqrt(x));
    case 5: return wrap(mx::sigmoid(x));
    case 6: return wrap(mx::tanh(x));
    case 7: return wrap(mx::erf(x));
    case 8: return wrap(mx::abs(x));
    case 9: return wrap(mx::square(x));
    case 10: return wrap(mx::sin(x));
    case 11: return wrap(mx::cos(x));
    case 12: return wrap(mx::logical_not(x));
    case 13: return wrap(mx::floor(x));
    case 14: return wrap(mx::ceil(x));
    case 15: return wrap(mx::log1p(x));
    case 16: return wrap(mx::stop_gradient(x));
    case 17: return wrap(mx::copy(x));
    case 18: return wrap(mx::isnan(x));
    case 19: return wrap(mx::reciprocal(x));
  }
  throw std::invalid_argument("unknown unary op " + std::to_string(op));
}

ArrayPtr where_(const Array& c, const Array& x, const Array& y) {
  return wrap(mx::where(c.inner, x.inner, y.inner));
}
ArrayPtr astype(const Array& a, uint8_t dtype) { return wrap(mx::astype(a.inner, to_dtype(dtype))); }

// Codes shared with src/ops.rs (Reduce). Empty axes means every axis.
ArrayPtr reduce(const Array& a, rust::Slice<const int32_t> axes, bool keepdims, uint8_t op) {
  std::vector<int> ax = to_ints(axes);
  if (ax.empty()) {
    for (int i = 0; i < static_cast<int>(a.inner.ndim()); ++i) ax.push_back(i);
  }
  const auto& x = a.inner;
  switch (op) {
    case 0: return wrap(mx::sum(x, ax, keepdims));
    case 1: return wrap(mx::mean(x, ax, keepdims));
    case 2: return wrap(mx::max(x, ax, keepdims));
    case 3: return wrap(mx::min(x, ax, keepdims));
    case 4: return wrap(mx::logsumexp(x, ax, keepdims));
    case 5: return wrap(mx::prod(x, ax, keepdims));
    case 6: return wrap(mx::all(x, ax, keepdims));
    case 7: return wrap(mx::any(x, ax, keepdims));
  }
  throw std::invalid_argument("unknown reduction " + std::to_string(op));
}

ArrayPtr arg_reduce(const Array& a, int32_t axis, bool keepdims, bool is_max) {
  return wrap(is_max ? mx::argmax(a.inner, axis, keepdims) : mx::argmin(a.inner, axis, keepdims));
}
ArrayPtr softmax(const Array& a, rust::Slice<const int32_t> axes, bool precise) {
  return wrap(mx::softmax(a.inner, to_ints(axes), precise));
}
ArrayPtr cumsum(const Array& a, int32_t axis, bool reverse, bool inclusive) {
  return wrap(mx::cumsum(a.inner, axis, reverse, inclusive));
}

ArrayPtr sort(const Array& a, int32_t axis) { return wrap(mx::sort(a.inner, axis)); }
ArrayPtr argsort(const Array& a, int32_t axis) { return wrap(mx::argsort(a.inner, axis)); }
ArrayPtr argpartition(const Array& a, int32_t kth, int32_t axis) {
  return wrap(mx::argpartition(a.inner, kth, axis));
}
ArrayPtr topk(const Array& a, int32_t k, int32_t axis) { return wrap(mx::topk(a.inner, k, axis)); }

ArrayPtr reshape(const Array& a, rust::Slice<const int32_t> shape) {
  return wrap(mx::reshape(a.inner, to_shape(shape)));
}
ArrayPtr transpose(const Array& a, rust::Slice<const int32_t> axes) {
  if (axes.empty()) return wrap(mx::transpose(a.inner));
  return wrap(mx::transpose(a.inner, to_ints(axes)));
}
ArrayPtr swapaxes(const Array& a, int32_t a1, int32_t a2) { return wrap(mx::swapaxes(a.inner, a1, a2)); }
ArrayPtr expand_dims(const Array& a, rust::Slice<const int32_t> axes) {
  return wrap(mx::expand_dims(a.inner, to_ints(axes)));
}
ArrayPtr squeeze(const Array& a, rust::Slice<const int32_t> axes) {
  if (axes.empty()) return wrap(mx::squeeze(a.inner));
  return wrap(mx::squeeze(a.inner, to_ints(axes)));
}
ArrayPtr broadcast_to(const Array& a, rust::Slice<const int32_t> shape) {
  return wrap(mx::broadcast_to(a.inner, to_shape(shape)));
}
ArrayPtr concatenate(const ArrayList& l, int32_t axis) { return wrap(mx::concatenate(l.items, axis)); }
ArrayPtr stack(const ArrayList& l, int32_t axis) { return wrap(mx::stack(l.items, axis)); }
ListPtr split_sections(const Array& a, int32_t num, int32_t axis) {
  return wrap_list(mx::split(a.inner, num, axis));
}
ListPtr split_indices(const Array& a, rust::Slice<const int32_t> indices, int32_t axis) {
  return wrap_list(mx::split(a.inner, to_shape(indices), axis));
}
ArrayPtr slice(const Array& a, rust::Slice<const int32_t> start, rust::Slice<const int32_t> stop,
               rust::Slice<const int32_t> strides) {
  return wrap(mx::slice(a.inner, to_shape(start), to_shape(stop), to_shape(strides)));
}
ArrayPtr slice_dynamic(const Array& a, const Array& start, rust::Slice<const int32_t> axes,
                       rust::Slice<const int32_t> sizes) {
  return wrap(mx::slice(a.inner, start.inner, to_ints(axes), to_shape(sizes)));
}
ArrayPtr slice_update(const Array& src, const Array& upd, rust::Slice<const int32_t> start,
                      rust::Slice<const int32_t> stop, rust::Slice<const int32_t> strides) {
  return wrap(mx::slice_update(src.inner, upd.inner, to_shape(start), to_shape(stop), to_shape(strides)));
}
ArrayPtr slice_update_dynamic(const Array& src, const Array& upd, const Array& start,
                              rust::Slice<const int32_t> axes) {
  return wrap(mx::slice_update(src.inner, upd.inner, start.inner, to_ints(axes)));
}
ArrayPtr take(const Array& a, const Array& idx, int32_t axis) { return wrap(mx::take(a.inner, idx.inner, axis)); }
ArrayPtr take_flat(const Array& a, const Array& idx) { return wrap(mx::take(a.inner, idx.inner)); }
ArrayPtr take_along_axis(const Array& a, const Array& idx, int32_t axis) {
  return wrap(mx::take_along_axis(a.inner, idx.inner, axis));
}
ArrayPtr repeat_axis(const Array& a, int32_t repeats, int32_t axis) {
  return wrap(mx::repeat(a.inner, repeats, axis));
}
ArrayPtr conv1d(const Array& x, const Array& w, int32_t stride, int32_t padding, int32_t dilation,
                int32_t groups) {
  return wrap(mx::conv1d(x.inner, w.inner, stride, padding, dilation, groups));
}
ArrayPtr conv3d(const Array& x, const Array& w, int32_t st, int32_t sh, int32_t sw) {
  return wrap(mx::conv3d(x.inner, w.inner, {st, sh, sw}, {0, 0, 0}));
}
ArrayPtr conv2d(const Array& x, const Array& w, int32_t stride, int32_t padding) {
  return wrap(mx::conv2d(x.inner, w.inner, {stride, stride}, {padding, padding}));
}
ArrayPtr put_along_axis(const Array& a, const Array& idx, const Array& values, int32_t axis) {
  return wrap(mx::put_along_axis(a.inner, idx.inner, values.inner, axis));
}
ArrayPtr contiguous(const Array& a) { return wrap(mx::contiguous(a.inner)); }
ArrayPtr pad(const Array& a, rust::Slice<const int32_t> axes, rust::Slice<const int32_t> low,
             rust::Slice<const int32_t> high, const Array& value) {
  return wrap(mx::pad(a.inner, to_ints(axes), to_shape(low), to_shape(high), value.inner));
}

ArrayPtr matmul(const Array& a, const Array& b) { return wrap(mx::matmul(a.inner, b.inner)); }
ArrayPtr addmm(const Array& c, const Array& a, const Array& b, float alpha, float beta) {
  return wrap(mx::addmm(c.inner, a.inner, b.inner, alpha, beta));
}
ListPtr quantize(const Array& w, int32_t group_size, int32_t bits, rust::Str mode) {
  return wrap_list(mx::quantize(w.inner, group_size, bits, std::string(mode)));
}
ArrayPtr dequantize(const Array& w, const Array& scales, const Array* biases, int32_t group_size,
                    int32_t bits, rust::Str mode, int32_t out_dtype) {
  std::optional<mx::Dtype> dt;
  if (out_dtype >= 0) dt = to_dtype(static_cast<uint8_t>(out_dtype));
  return wrap(mx::dequantize(w.inner, scales.inner, opt(biases), group_size, bits, std::string(mode),
                             std::nullopt, dt));
}
ArrayPtr quantized_matmul(const Array& x, const Array& w, const Array& scales, const Array* biases,
                          bool transpose, int32_t group_size, int32_t bits, rust::Str mode) {
  return wrap(mx::quantized_matmul(x.inner, w.inner, scales.inner, opt(biases), transpose, group_size,
                                   bits, std::string(mode)));
}
ArrayPtr gather_qmm(const Array& x, const Array& w, const Array& scales, const Array* biases,
                    const Array* lhs, const Array* rhs, bool transpose, int32_t group_size,
                    int32_t bits, rust::Str mode, bool sorted) {
  return wrap(mx::gather_qmm(x.inner, w.inner, scales.inner, opt(biases), opt(lhs), opt(rhs), transpose,
                             group_size, bits, std::string(mode), std::nullopt, sorted));
}
ArrayPtr gather_mm(const Array& a, const Array& b, const Array* lhs, const Array* rhs, bool sorted) {
  return wrap(mx::gather_mm(a.inner, b.inner, opt(lhs), opt(rhs), sorted));
}

ArrayPtr rms_norm(const Array& x, const Array* weight, float eps) {
  return wrap(mx::fast::rms_norm(x.inner, opt(weight), eps));
}
ArrayPtr layer_norm(const Array& x, const Array* weight, const Array* bias, float eps) {
  return wrap(mx::fast::layer_norm(x.inner, opt(weight), opt(bias), eps));
}
ArrayPtr rope(const Array& x, int32_t dims, bool traditional, bool has_base, float base, float scale,
              int32_t offset, const Array* freqs) {
  std::optional<float> b;
  if (has_base) b = base;
  return wrap(mx::fast::rope(x.inner, dims, traditional, b, scale, offset, opt(freqs)));
}
ArrayPtr rope_dynamic(const Array& x, int32_t dims, bool traditional, bool has_base, float base,
                      float scale, const Array& offset, const Array* freqs) {
  std::optional<float> b;
  if (has_base) b = base;
  return wrap(mx::fast::rope(x.inner, dims, traditional, b, scale, offset.inner, opt(freqs)));
}
ArrayPtr sdpa(const Array& q, const Array& k, const Array& v, float scale, rust::Str mask_mode,
              const Array* mask, const Array* sinks) {
  return wrap(mx::fast::scaled_dot_product_attention(q.inner, k.inner, v.inner, scale,
                                                     std::string(mask_mode), opt(mask), opt(sinks)));
}
ListPtr gated_delta_update(const Array& q, const Array& k, const Array& v, const Array& g,
                           const Array& beta, const Array* state, const Array* mask) {
  return wrap_list(mx::fast::gated_delta_update(q.inner, k.inner, v.inner, g.inner, beta.inner,
                                                opt(state), opt(mask)));
}

namespace {
std::vector<std::string> to_strings(rust::Slice<const rust::String> s) {
  std::vector<std::string> v;
  for (const auto& x : s) v.emplace_back(std::string(x));
  return v;
}
}  // namespace

std::unique_ptr<Kernel> metal_kernel(rust::Str name, rust::Slice<const rust::String> inputs,
                                     rust::Slice<const rust::String> outputs, rust::Str source,
                                     rust::Str header, bool row_contiguous, bool atomic_outputs) {
  auto k = std::make_unique<Kernel>();
  k->fn = mx::fast::metal_kernel(std::string(name), to_strings(inputs), to_strings(outputs),
                                 std::string(source), std::string(header), row_contiguous, atomic_outputs);
  return k;
}

std::unique_ptr<Kernel> cuda_kernel(rust::Str name, rust::Slice<const rust::String> inputs,
                                    rust::Slice<const rust::String> outputs, rust::Str source,
                                    rust::Str header, bool row_contiguous, int32_t shared_memory) {
  auto k = std::make_unique<Kernel>();
  k->fn = mx::fast::cuda_kernel(std::string(name), to_strings(inputs), to_strings(outputs),
                                std::string(source), std::string(header), row_contiguous, shared_memory);
  return k;
}

ListPtr kernel_call(const Kernel& k, const ArrayList& inputs, rust::Slice<const int32_t> shapes_flat,
                    rust::Slice<const int32_t> shape_lens, rust::Slice<const uint8_t> out_dtypes,
                    std::array<int32_t, 3> grid, std::array<int32_t, 3> threadgroup,
                    rust::Slice<const rust::String> targ_names, rust::Slice<const uint8_t> targ_kinds,
                    rust::Slice<const int32_t> targ_values, bool has_init, float init_value) {
  std::vector<mx::Shape> shapes;
  size_t pos = 0;
  for (auto len : shape_lens) {
    mx::Shape s;
    for (int32_t i = 0; i < len; ++i) s.push_back(shapes_flat[pos++]);
    shapes.push_back(s);
  }
  std::vector<mx::Dtype> dtypes;
  for (auto d : out_dtypes) dtypes.push_back(to_dtype(d));
  std::vector<std::pair<std::string, mx::fast::TemplateArg>> targs;
  for (size_t i = 0; i < targ_names.size(); ++i) {
    std::string n(targ_names[i]);
    switch (targ_kinds[i]) {
      case 0: targs.emplace_back(n, mx::fast::TemplateArg(static_cast<int>(targ_values[i]))); break;
      case 1: targs.emplace_back(n, mx::fast::TemplateArg(targ_values[i] != 0)); break;
      default: targs.emplace_back(n, mx::fast::TemplateArg(to_dtype(static_cast<uint8_t>(targ_values[i]))));
    }
  }
  std::optional<float> init;
  if (has_init) init = init_value;
  return wrap_list(k.fn(inputs.items, shapes, dtypes, {grid[0], grid[1], grid[2]},
                        {threadgroup[0], threadgroup[1], threadgroup[2]}, targs, init, false, {}));
}

ArrayPtr random_key(uint64_t seed) { return wrap(mx::random::key(seed)); }
ArrayPtr random_split(const Array& key, int32_t num) { return wrap(mx::random::split(key.inner, num)); }
ArrayPtr random_categorical(const Array& logits, int32_t axis, const Array* key) {
  return wrap(mx::random::categorical(logits.inner, axis, opt(key)));
}
ArrayPtr random_uniform(const Array& low, const Array& high, rust::Slice<const int32_t> shape,
                        uint8_t dtype, const Array* key) {
  return wrap(mx::random::uniform(low.inner, high.inner, to_shape(shape), to_dtype(dtype), opt(key)));
}
ArrayPtr random_normal(rust::Slice<const int32_t> shape, uint8_t dtype, float loc, float scale,
                       const Array* key) {
  return wrap(mx::random::normal(to_shape(shape), to_dtype(dtype), loc, scale, opt(key)));
}
void random_seed(uint64_t seed) { mx::random::seed(seed); }

std::unique_ptr<NamedArrays> load_safetensors(rust::Str path) {
  auto [arrays, meta] = mx::load_safetensors(std::string(path));
  auto n = std::make_unique<NamedArrays>();
  for (auto& [k, v] : arrays) {
    n->names.push_back(k);
    n->arrays.push_back(v);
  }
  for (auto& [k, v] : meta) {
    n->meta_keys.push_back(k);
    n->meta_values.push_back(v);
  }
  return n;
}

std::unique_ptr<NamedArrays> load_gguf(rust::Str path) {
  auto [arrays, meta] = mx::load_gguf(std::string(path));
  auto n = std::make_unique<NamedArrays>();
  for (auto& [k, v] : arrays) {
    n->names.push_back(k);
    n->arrays.push_back(v);
  }
  // Only string metadata crosses; array-valued metadata (vocabularies) is read by rmx-gguf.
  for (auto& [k, v] : meta) {
    if (auto s = std::get_if<std::string>(&v)) {
      n->meta_keys.push_back(k);
      n->meta_values.push_back(*s);
    }
  }
  return n;
}

std::unique_ptr<NamedArrays> named_new() { return std::make_unique<NamedArrays>(); }
void named_push(NamedArrays& n, rust::Str name, const Array& a) {
  n.names.emplace_back(std::string(name));
  n.arrays.push_back(a.inner);
}
void named_push_meta(NamedArrays& n, rust::Str key, rust::Str value) {
  n.meta_keys.emplace_back(std::string(key));
  n.meta_values.emplace_back(std::string(value));
}
size_t named_len(const NamedArrays& n) { return n.names.size(); }
rust::String named_name(const NamedArrays& n, size_t i) { return rust::String(n.names.at(i)); }
ArrayPtr named_array(const NamedArrays& n, size_t i) { return wrap(n.arrays.at(i)); }
size_t named_meta_len(const NamedArrays& n) { return n.meta_keys.size(); }
rust::String named_meta_key(const NamedArrays& n, size_t i) { return rust::String(n.meta_keys.at(i)); }
rust::String named_meta_value(const NamedArrays& n, size_t i) { return rust::String(n.meta_values.at(i)); }

void save_safetensors(rust::Str path, const NamedArrays& n) {
  std::unordered_map<std::string, mx::array> m;
  for (size_t i = 0; i < n.names.size(); ++i) m.insert_or_assign(n.names[i], n.arrays[i]);
  std::unordered_map<std::string, std::string> meta;
  for (size_t i = 0; i < n.meta_keys.size(); ++i) meta[n.meta_keys[i]] = n.meta_values[i];
  mx::save_safetensors(std::string(path), m, meta);
}

void eval(const ArrayList& l) { mx::eval(l.items); }
void async_eval(const ArrayList& l) { mx::async_eval(l.items); }

std::unique_ptr<Compiled> compile(rust::Box<CompileFn> f, bool shapeless) {
  auto holder = std::make_shared<rust::Box<CompileFn>>(std::move(f));
  auto id = reinterpret_cast<std::uintptr_t>(holder.get());
  auto fun = [holder](const std::vector<mx::array>& in) {
    ArrayList l;
    l.items = in;
    auto out = call_compile_fn(**holder, l);
    return out->items;
  };
  auto c = std::make_unique<Compiled>();
  c->fn = mx::detail::compile(fun, id, shapeless);
  c->id = id;
  return c;
}

ListPtr call_compiled(const Compiled& c, const ArrayList& inputs) { return wrap_list(c.fn(inputs.items)); }

bool distributed_available(rust::Str backend) {
  auto b = std::string(backend);
  return b == "any" ? mx::distributed::is_available() : mx::distributed::is_available(b);
}

std::unique_ptr<Group> distributed_init(bool strict, rust::Str backend) {
  return std::make_unique<Group>(mx::distributed::init(strict, std::string(backend)));
}

std::unique_ptr<Group> group_clone(const Group& g) { return std::make_unique<Group>(g.inner); }
int32_t group_rank(const Group& g) { return g.inner.rank(); }
int32_t group_size(const Group& g) { return g.inner.size(); }

std::unique_ptr<Group> group_split(const Group& g, int32_t color, int32_t key) {
  return std::make_unique<Group>(g.inner.split(color, key));
}

ArrayPtr all_sum(const Array& x, const Group& g) {
  return wrap(mx::distributed::all_sum(x.inner, g.inner));
}
ArrayPtr all_gather(const Array& x, const Group& g) {
  return wrap(mx::distributed::all_gather(x.inner, g.inner));
}
ArrayPtr all_max(const Array& x, const Group& g) {
  return wrap(mx::distributed::all_max(x.inner, g.inner));
}
ArrayPtr all_min(const Array& x, const Group& g) {
  return wrap(mx::distributed::all_min(x.inner, g.inner));
}
ArrayPtr send(const Array& x, int32_t dst, const Group& g) {
  return wrap(mx::distributed::send(x.inner, dst, g.inner));
}
ArrayPtr recv(rust::Slice<const int32_t> shape, uint8_t dtype, int32_t src, const Group& g) {
  return wrap(mx::distributed::recv(to_shape(shape), to_dtype(dtype), src, g.inner));
}
ArrayPtr recv_like(const Array& like, int32_t src, const Group& g) {
  return wrap(mx::distributed::recv_like(like.inner, src, g.inner));
}
ListPtr depends(const ArrayList& inputs, const ArrayList& dependencies) {
  auto l = std::make_unique<ArrayList>();
  l->items = mx::depends(inputs.items, dependencies.items);
  return l;
}

size_t active_memory() { return mx::get_active_memory(); }
size_t peak_memory() { return mx::get_peak_memory(); }
void reset_peak_memory() { mx::reset_peak_memory(); }
size_t cache_memory() { return mx::get_cache_memory(); }
size_t set_cache_limit(size_t limit) { return mx::set_cache_limit(limit); }
size_t set_memory_limit(size_t limit) { return mx::set_memory_limit(limit); }
void clear_cache() { mx::clear_cache(); }
rust::String version() { return rust::String(mx::version()); }
bool metal_available() { return mx::metal::is_available(); }
bool cuda_available() { return mx::cu::is_available(); }
bool gpu_available() { return mx::gpu::is_available(); }
uint8_t default_device_type() { return mx::default_device().type == mx::Device::gpu ? 1 : 0; }
void set_default_device(uint8_t type) { mx::set_default_device(device_of(type)); }
void synchronize() { mx::synchronize(); }

void guard_exit() {
  static const bool registered = [] {
    std::atexit([] { exit_guard(); });
    return true;
  }();
  (void)registered;
}

// An attribute of CUDA device 0 from the driver. MLX does not report what the layer kernels
// need (how many blocks can be resident at once, how much shared memory a block may opt into);
// the driver API is reached through dlopen so that builds against the CPU or Metal libmlx need
// no CUDA at all; 0 means "unknown".
static int32_t cuda_device_attribute(int attribute) {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return 0;
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int);
  using Attr = int (*)(int*, int, int);
  auto init = reinterpret_cast<Init>(dlsym(h, "cuInit"));
  auto get = reinterpret_cast<Get>(dlsym(h, "cuDeviceGet"));
  auto attr = reinterpret_cast<Attr>(dlsym(h, "cuDeviceGetAttribute"));
  int dev = 0, n = 0;
  if (!init || !get || !attr || init(0) != 0 || get(&dev, 0) != 0 ||
      attr(&n, attribute, dev) != 0) {
    n = 0;
  }
  dlclose(h);
  return n;
}

// CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
int32_t cuda_sm_count() { return cuda_device_attribute(16); }

// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
int32_t cuda_shared_memory_optin() { return cuda_device_attribute(97); }

rust::String device_info_json(uint8_t type) {
  // A flat JSON object; values are strings or integers (MLX's own variant).
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (auto& [k, v] : mx::device_info(device_of(type))) {
    if (!first) os << ",";
    first = false;
    os << "\"" << k << "\":";
    if (auto s = std::get_if<std::string>(&v)) {
      os << "\"";
      for (char ch : *s) {
        if (ch == '"' || ch == '\\') os << '\\';
        if (static_cast<unsigned char>(ch) >= 0x20) os << ch;
      }
      os << "\"";
    } else {
      os << std::get<size_t>(v);
    }
  }
  os << "}";
  return rust::String(os.str());
}

// What float32 products on the CPU run on: cpu_blas.cc's kernels on Linux; on macOS MLX's own
// (Accelerate), which needs no help.
#if defined(__linux__)
extern "C" {
void rmx_cpu_blas_select(int mlx);
int rmx_cpu_blas_is_mlx();
uint64_t rmx_cpu_blas_calls();
const char* rmx_cpu_blas_kernels();
}
void cpu_blas_select(bool mlx) { rmx_cpu_blas_select(mlx ? 1 : 0); }
bool cpu_blas_is_mlx() { return rmx_cpu_blas_is_mlx() != 0; }
uint64_t cpu_blas_calls() { return rmx_cpu_blas_calls(); }
rust::String cpu_blas_describe() {
  if (cpu_blas_is_mlx()) return rust::String("the MLX runtime's own BLAS");
  return rust::String(std::string("rmx's row-stable kernels (") + rmx_cpu_blas_kernels() + ")");
}
#else
void cpu_blas_select(bool) {}
bool cpu_blas_is_mlx() { return true; }
uint64_t cpu_blas_calls() { return 0; }
rust::String cpu_blas_describe() { return rust::String("Accelerate (MLX's own)"); }
#endif

}  // namespace rmx
