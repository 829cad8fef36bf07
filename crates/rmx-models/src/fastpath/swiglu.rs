//! `silu(gate) * up` in one elementwise kernel instead of three ops.

use rmx_mlx::{Array, Dtype, Launch, TemplateArg};

use super::gemv::rows;
use super::launch::{kernel, Spec};
use super::settings::fast_path;
use crate::error::Result;

const SWIGLU: Spec = Spec {
    name: "rmx_swiglu",
    section: "swiglu",
    inputs: &["gate", "up"],
    outputs: &["y"],
    body: "rmx::swiglu<T, F, GS, US, GOFF, UOFF>(gate, up, y);",
};

/// `silu(gate) * up` as one kernel; with `up` None, `gate` is a fused `[.., 2F]` product (gate
/// first). `None` off the fast path or for shapes the kernel does not take.
pub fn swiglu(gate: &Array, up: Option<&Array>) -> Result<Option<Array>> {
    let dtype = gate.dtype();
    let width = gate.dim(-1);
    let f = if up.is_some() { width } else { width / 2 };
    let rows = rows(gate) as i32;
    if !fast_path().kernels
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || rows > 65535
        || up.is_some_and(|u| u.shape() != gate.shape() || u.dtype() != dtype)
        || (up.is_none() && width % 2 != 0)
    {
        return Ok(None);
    }
    let (up, stride, up_off) = match up {
        Some(u) => (u, f, 0),
        None => (gate, width, f),
    };
    let mut shape = gate.shape();
    *shape.last_mut().expect("gate has a last axis") = f;
    let y = kernel(&SWIGLU)?.launch(&Launch {
        inputs: &[gate, up],
        output_shapes: &[&shape],
        output_dtypes: &[dtype],
        grid: [f, rows, 1],
        threadgroup: [256, 1, 1],
        template: &[
            ("T", TemplateArg::Dtype(dtype)),
            ("F", TemplateArg::Int(f)),
            ("GS", TemplateArg::Int(stride)),
            ("US", TemplateArg::Int(stride)),
            ("GOFF", TemplateArg::Int(0)),
            ("UOFF", TemplateArg::Int(up_off)),
        ],
        init_value: None,
    })?;
    Ok(y.into_iter().next())
}
