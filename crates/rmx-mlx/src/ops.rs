//! Array operations. Each returns a new lazy array; nothing runs until evaluation.
//!
//! Scalar helpers (`add_scalar`, ...) make the scalar in the array's own dtype, the way Python
//! MLX treats Python numbers as weakly typed: `x_bf16 * 0.5` stays bf16. Using a float32 scalar
//! instead would promote the result to float32 and break parity with mlx-lm.

use crate::array::{Array, List};
use crate::dtype::Dtype;
use crate::error::{check, Result};
use crate::ffi::bridge;

#[derive(Clone, Copy)]
#[repr(u8)]
enum Binary {
    Add,
    Subtract,
    Multiply,
    Divide,
    Maximum,
    Minimum,
    Power,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
    FloorDivide,
    Remainder,
    LogAddExp,
}

#[derive(Clone, Copy)]
#[repr(u8)]
enum Unary {
    Negative,
    Exp,
    Log,
    Rsqrt,
    Sqrt,
    Sigmoid,
    Tanh,
    Erf,
    Abs,
    Square,
    Sin,
    Cos,
    LogicalNot,
    Floor,
    Ceil,
    Log1p,
    StopGradient,
    Copy,
    IsNan,
    Reciprocal,
}

#[derive(Clone, Copy)]
#[repr(u8)]
enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
    LogSumExp,
    Prod,
    All,
    Any,
}

fn ret(
    op: &'static str,
    r: std::result::Result<cxx::UniquePtr<bridge::Array>, cxx::Exception>,
) -> Result<Array> {
    check(op, r).map(Array::from_raw)
}

macro_rules! binary_ops {
    ($($name:ident $scalar:ident => $op:ident),* $(,)?) => {
        impl Array {
            $(
                pub fn $name(&self, other: &Array) -> Result<Array> {
                    ret(stringify!($name), bridge::binary(self.inner(), other.inner(), Binary::$op as u8))
                }
                pub fn $scalar(&self, v: f64) -> Result<Array> {
                    self.$name(&self.weak_scalar(v)?)
                }
            )*
        }
    };
}

binary_ops! {
    add add_scalar => Add,
    subtract subtract_scalar => Subtract,
    multiply multiply_scalar => Multiply,
    divide divide_scalar => Divide,
    maximum maximum_scalar => Maximum,
    minimum minimum_scalar => Minimum,
    power power_scalar => Power,
    equal equal_scalar => Equal,
    not_equal not_equal_scalar => NotEqual,
    less less_scalar => Less,
    less_equal less_equal_scalar => LessEqual,
    greater greater_scalar => Greater,
    greater_equal greater_equal_scalar => GreaterEqual,
    logical_and logical_and_scalar => LogicalAnd,
    logical_or logical_or_scalar => LogicalOr,
    floor_divide floor_divide_scalar => FloorDivide,
    remainder remainder_scalar => Remainder,
    logaddexp logaddexp_scalar => LogAddExp,
}

macro_rules! unary_ops {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Array {
            $(
                pub fn $name(&self) -> Result<Array> {
                    ret(stringify!($name), bridge::unary(self.inner(), Unary::$op as u8))
                }
            )*
        }
    };
}

impl Array {
    /// The values in a row-contiguous buffer of their own, for a cache a kernel writes in place.
    /// MLX's `copy` is no copy: it shares its input's buffer and strides (arrays are immutable
    /// to MLX), so a sliced "copy" handed to such a kernel is read with the wrong layout and
    /// written under whoever else holds the buffer. A product by one makes a new buffer unless
    /// MLX may donate the input's, which it does only where nothing else holds that buffer.
    pub fn owned(&self) -> Result<Array> {
        self.multiply_scalar(1.0)
    }
}

unary_ops! {
    negative => Negative,
    exp => Exp,
    log => Log,
    rsqrt => Rsqrt,
    sqrt => Sqrt,
    sigmoid => Sigmoid,
    tanh => Tanh,
    erf => Erf,
    abs => Abs,
    square => Square,
    sin => Sin,
    cos => Cos,
    logical_not => LogicalNot,
    floor => Floor,
    ceil => Ceil,
    log1p => Log1p,
    stop_gradient => StopGradient,
    copy => Copy,
    isnan => IsNan,
    reciprocal => Reciprocal,
}

macro_rules! reductions {
    ($($name:ident $all:ident => $op:ident),* $(,)?) => {
        impl Array {
            $(
                /// Reduces over `axes` (empty: every axis).
                pub fn $name(&self, axes: &[i32], keepdims: bool) -> Result<Array> {
                    ret(stringify!($name), bridge::reduce(self.inner(), axes, keepdims, Reduce::$op as u8))
                }
                /// Reduces over every axis to a 0-d array.
                pub fn $all(&self) -> Result<Array> {
                    self.$name(&[], false)
                }
            )*
        }
    };
}

reductions! {
    sum sum_all => Sum,
    mean mean_all => Mean,
    max max_all => Max,
    min min_all => Min,
    logsumexp logsumexp_all => LogSumExp,
    prod prod_all => Prod,
    all all_all => All,
    any any_all => Any,
}

impl Array {
    /// A 0-d array of `v` typed like Python MLX would type a Python number next to `self`.
    pub fn weak_scalar(&self, v: f64) -> Result<Array> {
        let d = self.dtype();
        let dtype = if d.is_float() || (v.fract() == 0.0 && d != Dtype::Bool) {
            d
        } else {
            Dtype::F32
        };
        Array::scalar_as(v, dtype)
    }

    pub fn matmul(&self, other: &Array) -> Result<Array> {
        ret("matmul", bridge::matmul(self.inner(), other.inner()))
    }

    pub fn astype(&self, dtype: Dtype) -> Result<Array> {
        ret("astype", bridge::astype(self.inner(), dtype.code()))
    }

    pub fn argmax(&self, axis: i32, keepdims: bool) -> Result<Array> {
        ret(
            "argmax",
            bridge::arg_reduce(self.inner(), axis, keepdims, true),
        )
    }

    pub fn argmin(&self, axis: i32, keepdims: bool) -> Result<Array> {
        ret(
            "argmin",
            bridge::arg_reduce(self.inner(), axis, keepdims, false),
        )
    }

    pub fn softmax(&self, axes: &[i32], precise: bool) -> Result<Array> {
        ret("softmax", bridge::softmax(self.inner(), axes, precise))
    }

    pub fn cumsum(&self, axis: i32, reverse: bool, inclusive: bool) -> Result<Array> {
        ret(
            "cumsum",
            bridge::cumsum(self.inner(), axis, reverse, inclusive),
        )
    }

    pub fn sort(&self, axis: i32) -> Result<Array> {
        ret("sort", bridge::sort(self.inner(), axis))
    }

    pub fn argsort(&self, axis: i32) -> Result<Array> {
        ret("argsort", bridge::argsort(self.inner(), axis))
    }

    pub fn argpartition(&self, kth: i32, axis: i32) -> Result<Array> {
        ret(
            "argpartition",
            bridge::argpartition(self.inner(), kth, axis),
        )
    }

    /// The `k` largest values along `axis` (unordered, as MLX returns them).
    pub fn topk(&self, k: i32, axis: i32) -> Result<Array> {
        ret("topk", bridge::topk(self.inner(), k, axis))
    }

    pub fn reshape(&self, shape: &[i32]) -> Result<Array> {
        ret("reshape", bridge::reshape(self.inner(), shape))
    }

    /// Permutes axes (empty: reverses them).
    pub fn transpose(&self, axes: &[i32]) -> Result<Array> {
        ret("transpose", bridge::transpose(self.inner(), axes))
    }

    pub fn swapaxes(&self, a: i32, b: i32) -> Result<Array> {
        ret("swapaxes", bridge::swapaxes(self.inner(), a, b))
    }

    pub fn expand_dims(&self, axes: &[i32]) -> Result<Array> {
        ret("expand_dims", bridge::expand_dims(self.inner(), axes))
    }

    /// Removes size-1 `axes` (empty: all of them).
    pub fn squeeze(&self, axes: &[i32]) -> Result<Array> {
        ret("squeeze", bridge::squeeze(self.inner(), axes))
    }

    pub fn broadcast_to(&self, shape: &[i32]) -> Result<Array> {
        ret("broadcast_to", bridge::broadcast_to(self.inner(), shape))
    }

    pub fn flatten(&self) -> Result<Array> {
        self.reshape(&[-1])
    }

    /// Splits into `num` equal parts along `axis`.
    pub fn split(&self, num: i32, axis: i32) -> Result<Vec<Array>> {
        List(check(
            "split",
            bridge::split_sections(self.inner(), num, axis),
        )?)
        .into_vec("split")
    }

    /// Splits before each of `indices` along `axis`.
    pub fn split_at(&self, indices: &[i32], axis: i32) -> Result<Vec<Array>> {
        List(check(
            "split",
            bridge::split_indices(self.inner(), indices, axis),
        )?)
        .into_vec("split")
    }

    /// `a[start:stop:strides]` over all axes.
    pub fn slice(&self, start: &[i32], stop: &[i32], strides: &[i32]) -> Result<Array> {
        ret("slice", bridge::slice(self.inner(), start, stop, strides))
    }

    /// Slices `[start, stop)` of one axis, keeping the others whole.
    pub fn slice_axis(&self, axis: i32, start: i32, stop: i32) -> Result<Array> {
        let shape = self.shape();
        let ax = if axis < 0 {
            shape.len() as i32 + axis
        } else {
            axis
        } as usize;
        let mut lo = vec![0; shape.len()];
        let mut hi = shape.clone();
        lo[ax] = start;
        hi[ax] = stop;
        self.slice(&lo, &hi, &vec![1; shape.len()])
    }

    /// A slice whose start is an array (so it can move without rebuilding the graph).
    pub fn slice_dynamic(&self, start: &Array, axes: &[i32], sizes: &[i32]) -> Result<Array> {
        ret(
            "slice_dynamic",
            bridge::slice_dynamic(self.inner(), start.inner(), axes, sizes),
        )
    }

    /// Returns `self` with `update` written into `[start:stop:strides]`.
    pub fn slice_update(
        &self,
        update: &Array,
        start: &[i32],
        stop: &[i32],
        strides: &[i32],
    ) -> Result<Array> {
        ret(
            "slice_update",
            bridge::slice_update(self.inner(), update.inner(), start, stop, strides),
        )
    }

    pub fn slice_update_dynamic(
        &self,
        update: &Array,
        start: &Array,
        axes: &[i32],
    ) -> Result<Array> {
        ret(
            "slice_update_dynamic",
            bridge::slice_update_dynamic(self.inner(), update.inner(), start.inner(), axes),
        )
    }

    pub fn take(&self, indices: &Array, axis: i32) -> Result<Array> {
        ret("take", bridge::take(self.inner(), indices.inner(), axis))
    }

    /// Takes from the flattened array.
    pub fn take_flat(&self, indices: &Array) -> Result<Array> {
        ret("take", bridge::take_flat(self.inner(), indices.inner()))
    }

    pub fn take_along_axis(&self, indices: &Array, axis: i32) -> Result<Array> {
        ret(
            "take_along_axis",
            bridge::take_along_axis(self.inner(), indices.inner(), axis),
        )
    }

    /// Each element `repeats` times in a row along `axis` (`mx.repeat`).
    pub fn repeat(&self, repeats: i32, axis: i32) -> Result<Array> {
        ret("repeat", bridge::repeat_axis(self.inner(), repeats, axis))
    }

    /// 1-D convolution of `[N, L, C_in]` with `[C_out, K, C_in / groups]` (`mx.conv1d`).
    pub fn conv1d(
        &self,
        weight: &Array,
        stride: i32,
        padding: i32,
        dilation: i32,
        groups: i32,
    ) -> Result<Array> {
        ret(
            "conv1d",
            bridge::conv1d(
                self.inner(),
                weight.inner(),
                stride,
                padding,
                dilation,
                groups,
            ),
        )
    }

    /// 2-D convolution of `[N, H, W, C_in]` with `[C_out, KH, KW, C_in]`, the same stride and
    /// padding on both axes (`mx.conv2d`).
    pub fn conv2d(&self, weight: &Array, stride: i32, padding: i32) -> Result<Array> {
        ret(
            "conv2d",
            bridge::conv2d(self.inner(), weight.inner(), stride, padding),
        )
    }

    /// 3-D convolution of `[N, D, H, W, C_in]` with `[C_out, KD, KH, KW, C_in]`, no padding,
    /// the stride `(d, h, w)` (`mx.conv3d`; Qwen-VL's patch embedding, stride = kernel).
    pub fn conv3d(&self, weight: &Array, stride: (i32, i32, i32)) -> Result<Array> {
        ret(
            "conv3d",
            bridge::conv3d(self.inner(), weight.inner(), stride.0, stride.1, stride.2),
        )
    }

    pub fn put_along_axis(&self, indices: &Array, values: &Array, axis: i32) -> Result<Array> {
        ret(
            "put_along_axis",
            bridge::put_along_axis(self.inner(), indices.inner(), values.inner(), axis),
        )
    }

    pub fn contiguous(&self) -> Result<Array> {
        ret("contiguous", bridge::contiguous(self.inner()))
    }

    /// Pads `axes` with `low`/`high` elements of `value`.
    pub fn pad(&self, axes: &[i32], low: &[i32], high: &[i32], value: &Array) -> Result<Array> {
        ret(
            "pad",
            bridge::pad(self.inner(), axes, low, high, value.inner()),
        )
    }
}

/// Elementwise select: `cond ? x : y`.
pub fn r#where(cond: &Array, x: &Array, y: &Array) -> Result<Array> {
    ret("where", bridge::where_(cond.inner(), x.inner(), y.inner()))
}

pub fn concatenate(arrays: &[&Array], axis: i32) -> Result<Array> {
    ret(
        "concatenate",
        bridge::concatenate(List::of(arrays.iter().copied()).inner(), axis),
    )
}

pub fn stack(arrays: &[&Array], axis: i32) -> Result<Array> {
    ret(
        "stack",
        bridge::stack(List::of(arrays.iter().copied()).inner(), axis),
    )
}

/// `beta * c + alpha * (a @ b)`.
pub fn addmm(c: &Array, a: &Array, b: &Array, alpha: f32, beta: f32) -> Result<Array> {
    ret(
        "addmm",
        bridge::addmm(c.inner(), a.inner(), b.inner(), alpha, beta),
    )
}

/// Matrix products of gathered matrices (mixture-of-experts routing).
pub fn gather_mm(
    a: &Array,
    b: &Array,
    lhs: Option<&Array>,
    rhs: Option<&Array>,
    sorted: bool,
) -> Result<Array> {
    // SAFETY: the pointers come from live `&Array`s (or are null) and outlive the call.
    ret("gather_mm", unsafe {
        bridge::gather_mm(
            a.inner(),
            b.inner(),
            Array::ptr(lhs),
            Array::ptr(rhs),
            sorted,
        )
    })
}
