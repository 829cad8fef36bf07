//! The raw cxx bridge. Nothing outside this crate sees these items: `Array` and the modules
//! beside this file wrap them in a safe API. Codes for dtypes and op kinds are shared with
//! cpp/rmx_mlx.cc (see `Dtype::code` and the op enums).

use cxx::UniquePtr;

/// The Rust side of a compiled function, owned by the C++ `Compiled` and called back while MLX
/// traces. A closure over the raw lists, so the bridge needs nothing above it: `compile.rs`
/// wraps the caller's function over `Array`s into one.
pub struct CompileFn(pub(crate) Box<RawBody>);

pub(crate) type RawBody =
    dyn Fn(&bridge::ArrayList) -> Result<UniquePtr<bridge::ArrayList>, String>;

fn call_compile_fn(
    f: &CompileFn,
    inputs: &bridge::ArrayList,
) -> Result<UniquePtr<bridge::ArrayList>, String> {
    (f.0)(inputs)
}

/// Called by the C++ side's `atexit` handler (`guard_exit`): see `eval_lock::exit_guard`.
fn exit_guard() {
    crate::eval_lock::exit_guard();
}

#[allow(clippy::too_many_arguments)]
#[cxx::bridge(namespace = "rmx")]
pub(crate) mod bridge {
    extern "Rust" {
        type CompileFn;
        fn call_compile_fn(f: &CompileFn, inputs: &ArrayList) -> Result<UniquePtr<ArrayList>>;
        fn exit_guard();
    }

    unsafe extern "C++" {
        include!("rmx-mlx/cpp/rmx_mlx.h");

        type Array;
        type ArrayList;
        type NamedArrays;
        type Kernel;
        type Compiled;
        type Group;

        fn from_bytes(data: &[u8], shape: &[i32], dtype: u8) -> Result<UniquePtr<Array>>;
        fn full(shape: &[i32], value: f64, dtype: u8) -> Result<UniquePtr<Array>>;
        fn arange(start: f64, stop: f64, step: f64, dtype: u8) -> Result<UniquePtr<Array>>;
        fn linspace(start: f64, stop: f64, num: i32, dtype: u8) -> Result<UniquePtr<Array>>;
        fn clone_array(a: &Array) -> UniquePtr<Array>;
        fn to_bytes(a: &Array, dtype: u8, out: &mut [u8]) -> Result<()>;
        fn shape(a: &Array) -> Vec<i32>;
        fn dtype(a: &Array) -> Result<u8>;
        fn size(a: &Array) -> usize;
        fn nbytes(a: &Array) -> usize;
        fn describe(a: &Array) -> Result<String>;

        fn list_new() -> UniquePtr<ArrayList>;
        fn list_push(l: Pin<&mut ArrayList>, a: &Array);
        fn list_len(l: &ArrayList) -> usize;
        fn list_get(l: &ArrayList, i: usize) -> Result<UniquePtr<Array>>;

        fn binary(a: &Array, b: &Array, op: u8) -> Result<UniquePtr<Array>>;
        fn unary(a: &Array, op: u8) -> Result<UniquePtr<Array>>;
        fn where_(c: &Array, x: &Array, y: &Array) -> Result<UniquePtr<Array>>;
        fn astype(a: &Array, dtype: u8) -> Result<UniquePtr<Array>>;

        fn reduce(a: &Array, axes: &[i32], keepdims: bool, op: u8) -> Result<UniquePtr<Array>>;
        fn arg_reduce(
            a: &Array,
            axis: i32,
            keepdims: bool,
            is_max: bool,
        ) -> Result<UniquePtr<Array>>;
        fn softmax(a: &Array, axes: &[i32], precise: bool) -> Result<UniquePtr<Array>>;
        fn cumsum(a: &Array, axis: i32, reverse: bool, inclusive: bool)
            -> Result<UniquePtr<Array>>;

        fn sort(a: &Array, axis: i32) -> Result<UniquePtr<Array>>;
        fn argsort(a: &Array, axis: i32) -> Result<UniquePtr<Array>>;
        fn argpartition(a: &Array, kth: i32, axis: i32) -> Result<UniquePtr<Array>>;
        fn topk(a: &Array, k: i32, axis: i32) -> Result<UniquePtr<Array>>;

        fn reshape(a: &Array, shape: &[i32]) -> Result<UniquePtr<Array>>;
        fn transpose(a: &Array, axes: &[i32]) -> Result<UniquePtr<Array>>;
        fn swapaxes(a: &Array, a1: i32, a2: i32) -> Result<UniquePtr<Array>>;
        fn expand_dims(a: &Array, axes: &[i32]) -> Result<UniquePtr<Array>>;
        fn squeeze(a: &Array, axes: &[i32]) -> Result<UniquePtr<Array>>;
        fn broadcast_to(a: &Array, shape: &[i32]) -> Result<UniquePtr<Array>>;
        fn concatenate(l: &ArrayList, axis: i32) -> Result<UniquePtr<Array>>;
        fn stack(l: &ArrayList, axis: i32) -> Result<UniquePtr<Array>>;
        fn split_sections(a: &Array, num: i32, axis: i32) -> Result<UniquePtr<ArrayList>>;
        fn split_indices(a: &Array, indices: &[i32], axis: i32) -> Result<UniquePtr<ArrayList>>;
        fn slice(
            a: &Array,
            start: &[i32],
            stop: &[i32],
            strides: &[i32],
        ) -> Result<UniquePtr<Array>>;
        fn slice_dynamic(
            a: &Array,
            start: &Array,
            axes: &[i32],
            sizes: &[i32],
        ) -> Result<UniquePtr<Array>>;
        fn slice_update(
            src: &Array,
            upd: &Array,
            start: &[i32],
            stop: &[i32],
            strides: &[i32],
        ) -> Result<UniquePtr<Array>>;
        fn slice_update_dynamic(
            src: &Array,
            upd: &Array,
            start: &Array,
            axes: &[i32],
        ) -> Result<UniquePtr<Array>>;
        fn take(a: &Array, idx: &Array, axis: i32) -> Result<UniquePtr<Array>>;
        fn take_flat(a: &Array, idx: &Array) -> Result<UniquePtr<Array>>;
        fn take_along_axis(a: &Array, idx: &Array, axis: i32) -> Result<UniquePtr<Array>>;
        fn repeat_axis(a: &Array, repeats: i32, axis: i32) -> Result<UniquePtr<Array>>;
        fn conv1d(
            x: &Array,
            w: &Array,
            stride: i32,
            padding: i32,
            dilation: i32,
            groups: i32,
        ) -> Result<UniquePtr<Array>>;
        fn conv2d(x: &Array, w: &Array, stride: i32, padding: i32) -> Result<UniquePtr<Array>>;
        fn conv3d(x: &Array, w: &Array, st: i32, sh: i32, sw: i32) -> Result<UniquePtr<Array>>;
        fn put_along_axis(
            a: &Array,
            idx: &Array,
            values: &Array,
            axis: i32,
        ) -> Result<UniquePtr<Array>>;
        fn contiguous(a: &Array) -> Result<UniquePtr<Array>>;
        fn pad(
            a: &Array,
            axes: &[i32],
            low: &[i32],
            high: &[i32],
            value: &Array,
        ) -> Result<UniquePtr<Array>>;

        fn matmul(a: &Array, b: &Array) -> Result<UniquePtr<Array>>;
        fn addmm(
            c: &Array,
            a: &Array,
            b: &Array,
            alpha: f32,
            beta: f32,
        ) -> Result<UniquePtr<Array>>;
        fn quantize(
            w: &Array,
            group_size: i32,
            bits: i32,
            mode: &str,
        ) -> Result<UniquePtr<ArrayList>>;
        unsafe fn dequantize(
            w: &Array,
            scales: &Array,
            biases: *const Array,
            group_size: i32,
            bits: i32,
            mode: &str,
            out_dtype: i32,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn quantized_matmul(
            x: &Array,
            w: &Array,
            scales: &Array,
            biases: *const Array,
            transpose: bool,
            group_size: i32,
            bits: i32,
            mode: &str,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn gather_qmm(
            x: &Array,
            w: &Array,
            scales: &Array,
            biases: *const Array,
            lhs: *const Array,
            rhs: *const Array,
            transpose: bool,
            group_size: i32,
            bits: i32,
            mode: &str,
            sorted: bool,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn gather_mm(
            a: &Array,
            b: &Array,
            lhs: *const Array,
            rhs: *const Array,
            sorted: bool,
        ) -> Result<UniquePtr<Array>>;

        unsafe fn rms_norm(x: &Array, weight: *const Array, eps: f32) -> Result<UniquePtr<Array>>;
        unsafe fn layer_norm(
            x: &Array,
            weight: *const Array,
            bias: *const Array,
            eps: f32,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn rope(
            x: &Array,
            dims: i32,
            traditional: bool,
            has_base: bool,
            base: f32,
            scale: f32,
            offset: i32,
            freqs: *const Array,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn rope_dynamic(
            x: &Array,
            dims: i32,
            traditional: bool,
            has_base: bool,
            base: f32,
            scale: f32,
            offset: &Array,
            freqs: *const Array,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn sdpa(
            q: &Array,
            k: &Array,
            v: &Array,
            scale: f32,
            mask_mode: &str,
            mask: *const Array,
            sinks: *const Array,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn gated_delta_update(
            q: &Array,
            k: &Array,
            v: &Array,
            g: &Array,
            beta: &Array,
            state: *const Array,
            mask: *const Array,
        ) -> Result<UniquePtr<ArrayList>>;

        fn metal_kernel(
            name: &str,
            inputs: &[String],
            outputs: &[String],
            source: &str,
            header: &str,
            row_contiguous: bool,
            atomic_outputs: bool,
        ) -> Result<UniquePtr<Kernel>>;
        fn cuda_kernel(
            name: &str,
            inputs: &[String],
            outputs: &[String],
            source: &str,
            header: &str,
            row_contiguous: bool,
            shared_memory: i32,
        ) -> Result<UniquePtr<Kernel>>;
        fn kernel_call(
            k: &Kernel,
            inputs: &ArrayList,
            shapes_flat: &[i32],
            shape_lens: &[i32],
            out_dtypes: &[u8],
            grid: [i32; 3],
            threadgroup: [i32; 3],
            targ_names: &[String],
            targ_kinds: &[u8],
            targ_values: &[i32],
            has_init: bool,
            init_value: f32,
        ) -> Result<UniquePtr<ArrayList>>;

        fn random_key(seed: u64) -> Result<UniquePtr<Array>>;
        fn random_split(key: &Array, num: i32) -> Result<UniquePtr<Array>>;
        unsafe fn random_categorical(
            logits: &Array,
            axis: i32,
            key: *const Array,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn random_uniform(
            low: &Array,
            high: &Array,
            shape: &[i32],
            dtype: u8,
            key: *const Array,
        ) -> Result<UniquePtr<Array>>;
        unsafe fn random_normal(
            shape: &[i32],
            dtype: u8,
            loc: f32,
            scale: f32,
            key: *const Array,
        ) -> Result<UniquePtr<Array>>;
        fn random_seed(seed: u64);

        fn load_safetensors(path: &str) -> Result<UniquePtr<NamedArrays>>;
        fn load_gguf(path: &str) -> Result<UniquePtr<NamedArrays>>;
        fn named_new() -> UniquePtr<NamedArrays>;
        fn named_push(n: Pin<&mut NamedArrays>, name: &str, a: &Array);
        fn named_push_meta(n: Pin<&mut NamedArrays>, key: &str, value: &str);
        fn named_len(n: &NamedArrays) -> usize;
        fn named_name(n: &NamedArrays, i: usize) -> Result<String>;
        fn named_array(n: &NamedArrays, i: usize) -> Result<UniquePtr<Array>>;
        fn named_meta_len(n: &NamedArrays) -> usize;
        fn named_meta_key(n: &NamedArrays, i: usize) -> Result<String>;
        fn named_meta_value(n: &NamedArrays, i: usize) -> Result<String>;
        fn save_safetensors(path: &str, n: &NamedArrays) -> Result<()>;

        fn eval(l: &ArrayList) -> Result<()>;
        fn async_eval(l: &ArrayList) -> Result<()>;
        fn compile(f: Box<CompileFn>, shapeless: bool) -> Result<UniquePtr<Compiled>>;
        fn call_compiled(c: &Compiled, inputs: &ArrayList) -> Result<UniquePtr<ArrayList>>;

        fn distributed_available(backend: &str) -> bool;
        fn distributed_init(strict: bool, backend: &str) -> Result<UniquePtr<Group>>;
        fn group_clone(g: &Group) -> UniquePtr<Group>;
        fn group_rank(g: &Group) -> i32;
        fn group_size(g: &Group) -> i32;
        fn group_split(g: &Group, color: i32, key: i32) -> Result<UniquePtr<Group>>;
        fn all_sum(x: &Array, g: &Group) -> Result<UniquePtr<Array>>;
        fn all_gather(x: &Array, g: &Group) -> Result<UniquePtr<Array>>;
        fn all_max(x: &Array, g: &Group) -> Result<UniquePtr<Array>>;
        fn all_min(x: &Array, g: &Group) -> Result<UniquePtr<Array>>;
        fn send(x: &Array, dst: i32, g: &Group) -> Result<UniquePtr<Array>>;
        fn recv(shape: &[i32], dtype: u8, src: i32, g: &Group) -> Result<UniquePtr<Array>>;
        fn recv_like(like: &Array, src: i32, g: &Group) -> Result<UniquePtr<Array>>;
        fn depends(inputs: &ArrayList, dependencies: &ArrayList) -> Result<UniquePtr<ArrayList>>;

        fn active_memory() -> usize;
        fn peak_memory() -> usize;
        fn reset_peak_memory();
        fn cache_memory() -> usize;
        fn set_cache_limit(limit: usize) -> usize;
        fn set_memory_limit(limit: usize) -> usize;
        fn clear_cache();
        fn version() -> String;
        fn metal_available() -> bool;
        fn cuda_available() -> bool;
        fn gpu_available() -> bool;
        fn default_device_type() -> u8;
        fn set_default_device(device_type: u8) -> Result<()>;
        fn synchronize() -> Result<()>;
        fn guard_exit();
        fn device_info_json(device_type: u8) -> Result<String>;
        fn cuda_sm_count() -> i32;
        fn cuda_shared_memory_optin() -> i32;

        fn cpu_blas_select(mlx: bool);
        fn cpu_blas_describe() -> String;
        fn cpu_blas_is_mlx() -> bool;
        fn cpu_blas_calls() -> u64;
    }
}
