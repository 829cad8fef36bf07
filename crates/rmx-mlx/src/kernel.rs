//! Custom kernels inside MLX graphs: `fast::metal_kernel` on Apple GPUs and `fast::cuda_kernel`
//! (NVRTC JIT) on NVIDIA, so rmx can ship fused kernels where MLX's own are slow.

use cxx::UniquePtr;

use crate::array::{Array, List};
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ffi::bridge;

/// Which JIT the kernel source is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelLang {
    Metal,
    Cuda,
}

/// A template argument of a kernel.
#[derive(Debug, Clone)]
pub enum TemplateArg {
    Int(i32),
    Bool(bool),
    Dtype(Dtype),
}

/// One launch's description.
pub struct Launch<'a> {
    pub inputs: &'a [&'a Array],
    pub output_shapes: &'a [&'a [i32]],
    pub output_dtypes: &'a [Dtype],
    pub grid: [i32; 3],
    pub threadgroup: [i32; 3],
    pub template: &'a [(&'a str, TemplateArg)],
    /// Fill outputs with this value before the kernel runs.
    pub init_value: Option<f32>,
}

/// A kernel built once and launched many times.
pub struct Kernel {
    raw: UniquePtr<bridge::Kernel>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Kernel {
    /// Builds a kernel whose body is `source` (MLX generates the signature from the names).
    pub fn new(
        lang: KernelLang,
        name: &str,
        input_names: &[&str],
        output_names: &[&str],
        source: &str,
        header: &str,
    ) -> Result<Kernel> {
        Kernel::with_shared_memory(lang, name, input_names, output_names, source, header, 0)
    }

    /// As `new`, with `shared_memory` bytes of dynamic shared memory per block (CUDA's
    /// `extern __shared__`; MLX raises the kernel's limit past the default 48 KB). Metal ignores it.
    pub fn with_shared_memory(
        lang: KernelLang,
        name: &str,
        input_names: &[&str],
        output_names: &[&str],
        source: &str,
        header: &str,
        shared_memory: i32,
    ) -> Result<Kernel> {
        let ins: Vec<String> = input_names.iter().map(|s| s.to_string()).collect();
        let outs: Vec<String> = output_names.iter().map(|s| s.to_string()).collect();
        let raw = match lang {
            KernelLang::Metal => check(
                "metal_kernel",
                bridge::metal_kernel(name, &ins, &outs, source, header, true, false),
            )?,
            KernelLang::Cuda => check(
                "cuda_kernel",
                bridge::cuda_kernel(name, &ins, &outs, source, header, true, shared_memory),
            )?,
        };
        Ok(Kernel {
            raw,
            _not_send: std::marker::PhantomData,
        })
    }

    pub fn launch(&self, l: &Launch<'_>) -> Result<Vec<Array>> {
        let inputs = List::of(l.inputs.iter().copied());
        let shapes_flat: Vec<i32> = l
            .output_shapes
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect();
        let shape_lens: Vec<i32> = l.output_shapes.iter().map(|s| s.len() as i32).collect();
        let dtypes: Vec<u8> = l.output_dtypes.iter().map(|d| d.code()).collect();
        let names: Vec<String> = l.template.iter().map(|(n, _)| n.to_string()).collect();
        let (kinds, values): (Vec<u8>, Vec<i32>) = l
            .template
            .iter()
            .map(|(_, a)| match a {
                TemplateArg::Int(v) => (0, *v),
                TemplateArg::Bool(b) => (1, *b as i32),
                TemplateArg::Dtype(d) => (2, d.code() as i32),
            })
            .unzip();
        let k = self
            .raw
            .as_ref()
            .expect("rmx-mlx invariant: Kernel is non-null");
        let out = check(
            "kernel launch",
            bridge::kernel_call(
                k,
                inputs.inner(),
                &shapes_flat,
                &shape_lens,
                &dtypes,
                l.grid,
                l.threadgroup,
                &names,
                &kinds,
                &values,
                l.init_value.is_some(),
                l.init_value.unwrap_or(0.0),
            ),
        )?;
        List(out).into_vec("kernel launch")
    }
}
