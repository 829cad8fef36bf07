// The C++ half of the bridge: thin wrappers that turn MLX's API (optionals, variants, vectors,
// std::function) into shapes cxx can carry. Every function may throw; cxx turns the exception
// into a Rust `cxx::Exception`, which src/error.rs names with the operation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mlx/mlx.h"
#include "rust/cxx.h"

namespace rmx {

namespace mx = mlx::core;

struct Array {
  mx::array inner;
  explicit Array(mx::array a) : inner(std::move(a)) {}
};

struct ArrayList {
  std::vector<mx::array> items;
};

struct NamedArrays {
  std::vector<std::string> names;
  std::vector<mx::array> arrays;
  std::vector<std::string> meta_keys;
  std::vector<std::string> meta_values;
};

struct Kernel {
  mx::fast::CustomKernelFunction fn;
};

// A communication group of MLX's distributed layer (a shared handle to the backend's state).
struct Group {
  mx::distributed::Group inner;
  explicit Group(mx::distributed::Group g) : inner(std::move(g)) {}
};

struct CompileFn;  // defined in Rust
struct Compiled {
  std::function<std::vector<mx::array>(const std::vector<mx::array>&)> fn;
  std::uintptr_t id;
  ~Compiled();
};

using ArrayPtr = std::unique_ptr<Array>;
using ListPtr = std::unique_ptr<ArrayList>;

// creation and read-back
ArrayPtr from_bytes(rust::Slice<const uint8_t> data, rust::Slice<const int32_t> shape, uint8_t dtype);
ArrayPtr full(rust::Slice<const int32_t> shape, double value, uint8_t dtype);
ArrayPtr arange(double start, double stop, double step, uint8_t dtype);
ArrayPtr linspace(double start, double stop, int32_t num, uint8_t dtype);
ArrayPtr clone_array(const Array& a);
void to_bytes(const Array& a, uint8_t dtype, rust::Slice<uint8_t> out);
rust::Vec<int32_t> shape(const Array& a);
uint8_t dtype(const Array& a);
size_t size(const Array& a);
size_t nbytes(const Array& a);
rust::String describe(const Array& a);

// lists
ListPtr list_new();
void list_push(ArrayList& l, const Array& a);
size_t list_len(const ArrayList& l);
ArrayPtr list_get(const ArrayList& l, size_t i);

// elementwise
ArrayPtr binary(const Array& a, const Array& b, uint8_t op);
ArrayPtr unary(const Array& a, uint8_t op);
ArrayPtr where_(const Array& c, const Array& x, const Array& y);
ArrayPtr astype(const Array& a, uint8_t dtype);

// reductions
ArrayPtr reduce(const Array& a, rust::Slice<const int32_t> axes, bool keepdims, uint8_t op);
ArrayPtr arg_reduce(const Array& a, int32_t axis, bool keepdims, bool is_max);
ArrayPtr softmax(const Array& a, rust::Slice<const int32_t> axes, bool precise);
ArrayPtr cumsum(const Array& a, int32_t axis, bool reverse, bool inclusive);

// ordering
ArrayPtr sort(const Array& a, int32_t axis);
ArrayPtr argsort(const Array& a, int32_t axis);
ArrayPtr argpartition(const Array& a, int32_t kth, int32_t axis);
ArrayPtr topk(const Array& a, int32_t k, int32_t axis);

// shapes and indexing
ArrayPtr reshape(const Array& a, rust::Slice<const int32_t> shape);
ArrayPtr transpose(const Array& a, rust::Slice<const int32_t> axes);
ArrayPtr swapaxes(const Array& a, int32_t a1, int32_t a2);
ArrayPtr expand_dims(const Array& a, rust::Slice<const int32_t> axes);
ArrayPtr squeeze(const Array& a, rust::Slice<const int32_t> axes);
ArrayPtr broadcast_to(const Array& a, rust::Slice<const int32_t> shape);
ArrayPtr concatenate(const ArrayList& l, int32_t axis);
ArrayPtr stack(const ArrayList& l, int32_t axis);
ListPtr split_sections(const Array& a, int32_t num, int32_t axis);
ListPtr split_indices(const Array& a, rust::Slice<const int32_t> indices, int32_t axis);
ArrayPtr slice(const Array& a, rust::Slice<const int32_t> start, rust::Slice<const int32_t> stop,
               rust::Slice<const int32_t> strides);
ArrayPtr slice_dynamic(const Array& a, const Array& start, rust::Slice<const int32_t> axes,
                       rust::Slice<const int32_t> sizes);
ArrayPtr slice_update(const Array& src, const Array& upd, rust::Slice<const int32_t> start,
                      rust::Slice<const int32_t> stop, rust::Slice<const int32_t> strides);
ArrayPtr slice_update_dynamic(const Array& src, const Array& upd, const Array& start,
                              rust::Slice<const int32_t> axes);
ArrayPtr take(const Array& a, const Array& idx, int32_t axis);
ArrayPtr take_flat(const Array& a, const Array& idx);
ArrayPtr take_along_axis(const Array& a, const Array& idx, int32_t axis);
ArrayPtr repeat_axis(const Array& a, int32_t repeats, int32_t axis);
ArrayPtr conv1d(const Array& x, const Array& w, int32_t stride, int32_t padding, int32_t dilation,
                int32_t groups);
ArrayPtr conv2d(const Array& x, const Array& w, int32_t stride, int32_t padding);
ArrayPtr conv3d(const Array& x, const Array& w, int32_t st, int32_t sh, int32_t sw);
ArrayPtr put_along_axis(const Array& a, const Array& idx, const Array& values, int32_t axis);
ArrayPtr contiguous(const Array& a);
ArrayPtr pad(const Array& a, rust::Slice<const int32_t> axes, rust::Slice<const int32_t> low,
             rust::Slice<const int32_t> high, const Array& value);

// matmul and quantization
ArrayPtr matmul(const Array& a, const Array& b);
ArrayPtr addmm(const Array& c, const Array& a, const Array& b, float alpha, float beta);
ListPtr quantize(const Array& w, int32_t group_size, int32_t bits, rust::Str mode);
ArrayPtr dequantize(const Array& w, const Array& scales, const Array* biases, int32_t group_size,
                    int32_t bits, rust::Str mode, int32_t out_dtype);
ArrayPtr quantized_matmul(const Array& x, const Array& w, const Array& scales, const Array* biases,
                          bool transpose, int32_t group_size, int32_t bits, rust::Str mode);
ArrayPtr gather_qmm(const Array& x, const Array& w, const Array& scales, const Array* biases,
                    const Array* lhs, const Array* rhs, bool transpose, int32_t group_size,
                    int32_t bits, rust::Str mode, bool sorted);
ArrayPtr gather_mm(const Array& a, const Array& b, const Array* lhs, const Array* rhs, bool sorted);

// fast::
ArrayPtr rms_norm(const Array& x, const Array* weight, float eps);
ArrayPtr layer_norm(const Array& x, const Array* weight, const Array* bias, float eps);
ArrayPtr rope(const Array& x, int32_t dims, bool traditional, bool has_base, float base,
              float scale, int32_t offset, const Array* freqs);
ArrayPtr rope_dynamic(const Array& x, int32_t dims, bool traditional, bool has_base, float base,
                      float scale, const Array& offset, const Array* freqs);
ArrayPtr sdpa(const Array& q, const Array& k, const Array& v, float scale, rust::Str mask_mode,
              const Array* mask, const Array* sinks);
ListPtr gated_delta_update(const Array& q, const Array& k, const Array& v, const Array& g,
                           const Array& beta, const Array* state, const Array* mask);

// custom kernels
std::unique_ptr<Kernel> metal_kernel(rust::Str name, rust::Slice<const rust::String> inputs,
                                     rust::Slice<const rust::String> outputs, rust::Str source,
                                     rust::Str header, bool row_contiguous, bool atomic_outputs);
std::unique_ptr<Kernel> cuda_kernel(rust::Str name, rust::Slice<const rust::String> inputs,
                                    rust::Slice<const rust::String> outputs, rust::Str source,
                                    rust::Str header, bool row_contiguous, int32_t shared_memory);
ListPtr kernel_call(const Kernel& k, const ArrayList& inputs, rust::Slice<const int32_t> shapes_flat,
                    rust::Slice<const int32_t> shape_lens, rust::Slice<const uint8_t> out_dtypes,
                    std::array<int32_t, 3> grid, std::array<int32_t, 3> threadgroup,
                    rust::Slice<const rust::String> targ_names, rust::Slice<const uint8_t> targ_kinds,
                    rust::Slice<const int32_t> targ_values, bool has_init, float init_value);

// random
ArrayPtr random_key(uint64_t seed);
ArrayPtr random_split(const Array& key, int32_t num);
ArrayPtr random_categorical(const Array& logits, int32_t axis, const Array* key);
ArrayPtr random_uniform(const Array& low, const Array& high, rust::Slice<const int32_t> shape,
                        uint8_t dtype, const Array* key);
ArrayPtr random_normal(rust::Slice<const int32_t> shape, uint8_t dtype, float loc, float scale,
                       const Array* key);
void random_seed(uint64_t seed);

// io
std::unique_ptr<NamedArrays> load_safetensors(rust::Str path);
std::unique_ptr<NamedArrays> load_gguf(rust::Str path);
std::unique_ptr<NamedArrays> named_new();
void named_push(NamedArrays& n, rust::Str name, const Array& a);
void named_push_meta(NamedArrays& n, rust::Str key, rust::Str value);
size_t named_len(const NamedArrays& n);
rust::String named_name(const NamedArrays& n, size_t i);
ArrayPtr named_array(const NamedArrays& n, size_t i);
size_t named_meta_len(const NamedArrays& n);
rust::String named_meta_key(const NamedArrays& n, size_t i);
rust::String named_meta_value(const NamedArrays& n, size_t i);
void save_safetensors(rust::Str path, const NamedArrays& n);

// evaluation and compilation
void eval(const ArrayList& l);
void async_eval(const ArrayList& l);
std::unique_ptr<Compiled> compile(rust::Box<CompileFn> f, bool shapeless);
ListPtr call_compiled(const Compiled& c, const ArrayList& inputs);

// distributed: groups, collectives and point-to-point ops (src/distributed.rs)
bool distributed_available(rust::Str backend);
std::unique_ptr<Group> distributed_init(bool strict, rust::Str backend);
std::unique_ptr<Group> group_clone(const Group& g);
int32_t group_rank(const Group& g);
int32_t group_size(const Group& g);
std::unique_ptr<Group> group_split(const Group& g, int32_t color, int32_t key);
ArrayPtr all_sum(const Array& x, const Group& g);
ArrayPtr all_gather(const Array& x, const Group& g);
ArrayPtr all_max(const Array& x, const Group& g);
ArrayPtr all_min(const Array& x, const Group& g);
ArrayPtr send(const Array& x, int32_t dst, const Group& g);
ArrayPtr recv(rust::Slice<const int32_t> shape, uint8_t dtype, int32_t src, const Group& g);
ArrayPtr recv_like(const Array& like, int32_t src, const Group& g);
ListPtr depends(const ArrayList& inputs, const ArrayList& dependencies);

// memory, devices, runtime
size_t active_memory();
size_t peak_memory();
void reset_peak_memory();
size_t cache_memory();
size_t set_cache_limit(size_t limit);
size_t set_memory_limit(size_t limit);
void clear_cache();
rust::String version();
bool metal_available();
bool cuda_available();
bool gpu_available();
uint8_t default_device_type();
void set_default_device(uint8_t type);
void synchronize();
// Registers (once) an atexit handler that calls the Rust side's exit_guard().
void guard_exit();
rust::String device_info_json(uint8_t type);
int32_t cuda_sm_count();
int32_t cuda_shared_memory_optin();

// cpu_blas.cc: what float32 products on the CPU run on.
void cpu_blas_select(bool mlx);
rust::String cpu_blas_describe();
bool cpu_blas_is_mlx();
uint64_t cpu_blas_calls();

}  // namespace rmx
