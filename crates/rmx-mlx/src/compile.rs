//! `compile`: trace a Rust function over arrays once, then replay the fused graph. MLX calls the
//! Rust closure back (through `call_compile_fn`) only while tracing.

use cxx::UniquePtr;

use crate::array::{Array, List};
use crate::error::{check, Result};
use crate::ffi::{bridge, CompileFn};

/// One trace of `f`: MLX's inputs as `Array`s in, `f`'s outputs back as MLX's list.
fn trace(
    f: &dyn Fn(&[Array]) -> Result<Vec<Array>>,
    inputs: &bridge::ArrayList,
) -> std::result::Result<UniquePtr<bridge::ArrayList>, String> {
    let ins = (0..bridge::list_len(inputs))
        .map(|i| bridge::list_get(inputs, i).map(Array::from_raw))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.what().to_string())?;
    let outs = f(&ins).map_err(|e| e.to_string())?;
    Ok(List::of(outs.iter()).0)
}

/// A compiled function. Like arrays, it stays on the thread that made it.
pub struct Compiled {
    raw: UniquePtr<bridge::Compiled>,
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Compiles `f`. With `shapeless`, one trace serves inputs of any shape (only safe when `f`
/// does not branch on shapes).
pub fn compile(
    f: impl Fn(&[Array]) -> Result<Vec<Array>> + 'static,
    shapeless: bool,
) -> Result<Compiled> {
    let raw = check(
        "compile",
        bridge::compile(
            Box::new(CompileFn(Box::new(move |inputs| trace(&f, inputs)))),
            shapeless,
        ),
    )?;
    Ok(Compiled {
        raw,
        _not_send: std::marker::PhantomData,
    })
}

impl Compiled {
    pub fn call(&self, inputs: &[&Array]) -> Result<Vec<Array>> {
        let l = List::of(inputs.iter().copied());
        let c = self
            .raw
            .as_ref()
            .expect("rmx-mlx invariant: Compiled is non-null");
        List(check("compiled call", bridge::call_compiled(c, l.inner()))?).into_vec("compiled call")
    }
}
