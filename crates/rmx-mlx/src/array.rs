//! The safe `Array`: an MLX array owned by the thread that made it.
//!
//! `Array` is neither `Send` nor `Sync` (it holds a `PhantomData<*const ()>` on top of cxx's
//! opaque type, which is already neither): MLX arrays carry lazy graphs that must be built and
//! evaluated by one thread. rmx runs one engine thread per loaded model; other threads talk to it
//! through channels with plain Rust data.

use std::fmt;
use std::marker::PhantomData;

use cxx::UniquePtr;

use crate::dtype::{Dtype, Element};
use crate::error::{check, invalid, Result};
use crate::ffi::bridge;

pub struct Array {
    pub(crate) raw: UniquePtr<bridge::Array>,
    _not_send: PhantomData<*const ()>,
}

impl Array {
    pub(crate) fn from_raw(raw: UniquePtr<bridge::Array>) -> Array {
        Array {
            raw,
            _not_send: PhantomData,
        }
    }

    pub(crate) fn inner(&self) -> &bridge::Array {
        // Invariant: bridge functions return a non-null pointer or throw.
        self.raw
            .as_ref()
            .expect("rmx-mlx invariant: Array holds a non-null pointer")
    }

    pub(crate) fn ptr(a: Option<&Array>) -> *const bridge::Array {
        a.map_or(std::ptr::null(), |a| a.inner() as *const bridge::Array)
    }

    /// Copies host data into a new array of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i32]) -> Result<Array> {
        let n: i64 = shape.iter().map(|&d| d as i64).product();
        if n != data.len() as i64 {
            return invalid(
                "from_slice",
                format!("{} elements do not fill shape {shape:?}", data.len()),
            );
        }
        // SAFETY: `T: Element` are plain-old-data numeric types; viewing them as bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        check(
            "from_slice",
            bridge::from_bytes(bytes, shape, T::DTYPE.code()),
        )
        .map(Array::from_raw)
    }

    /// Copies raw little-endian element bytes (as a safetensors file stores them) into a new
    /// array of `shape` and `dtype`: for a weight read from a file in part, a rank's shard.
    pub fn from_bytes(data: &[u8], shape: &[i32], dtype: Dtype) -> Result<Array> {
        let n: i64 = shape.iter().map(|&d| d as i64).product();
        if n * dtype.size() as i64 != data.len() as i64 {
            return invalid(
                "from_bytes",
                format!(
                    "{} bytes do not fill shape {shape:?} of {dtype:?}",
                    data.len()
                ),
            );
        }
        check("from_bytes", bridge::from_bytes(data, shape, dtype.code())).map(Array::from_raw)
    }

    /// A 0-d array.
    pub fn scalar<T: Element>(v: T) -> Result<Array> {
        Array::from_slice(&[v], &[])
    }

    /// A 0-d array holding `v` converted to `dtype`.
    pub fn scalar_as(v: f64, dtype: Dtype) -> Result<Array> {
        Array::full(&[], v, dtype)
    }

    pub fn full(shape: &[i32], value: f64, dtype: Dtype) -> Result<Array> {
        check("full", bridge::full(shape, value, dtype.code())).map(Array::from_raw)
    }

    pub fn zeros(shape: &[i32], dtype: Dtype) -> Result<Array> {
        Array::full(shape, 0.0, dtype)
    }

    pub fn ones(shape: &[i32], dtype: Dtype) -> Result<Array> {
        Array::full(shape, 1.0, dtype)
    }

    pub fn arange(start: f64, stop: f64, step: f64, dtype: Dtype) -> Result<Array> {
        check("arange", bridge::arange(start, stop, step, dtype.code())).map(Array::from_raw)
    }

    /// `num` evenly spaced values from `start` to `stop`, both included (`mx.linspace`).
    pub fn linspace(start: f64, stop: f64, num: i32, dtype: Dtype) -> Result<Array> {
        check("linspace", bridge::linspace(start, stop, num, dtype.code())).map(Array::from_raw)
    }

    /// Evaluates the array and copies it out as `T` (converting the element type if needed).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let _guard = crate::eval_lock::lock();
        let mut out = vec![T::default(); self.size()];
        // SAFETY: as in `from_slice`; every byte pattern written by MLX for dtype T is a valid T
        // (bool is written by MLX as 0/1 bytes).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(out.as_slice()),
            )
        };
        check(
            "to_vec",
            bridge::to_bytes(self.inner(), T::DTYPE.code(), bytes),
        )?;
        Ok(out)
    }

    /// The single element of a one-element array.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.size() != 1 {
            return invalid(
                "item",
                format!("array of shape {:?} is not a scalar", self.shape()),
            );
        }
        Ok(self.to_vec::<T>()?[0])
    }

    pub fn shape(&self) -> Vec<i32> {
        bridge::shape(self.inner())
    }

    pub fn ndim(&self) -> usize {
        self.shape().len()
    }

    /// Size of axis `axis` (negative counts from the end).
    pub fn dim(&self, axis: i32) -> i32 {
        let s = self.shape();
        let i = if axis < 0 {
            s.len() as i32 + axis
        } else {
            axis
        };
        s.get(i as usize).copied().unwrap_or(0)
    }

    pub fn dtype(&self) -> Dtype {
        bridge::dtype(self.inner())
            .ok()
            .and_then(Dtype::from_code)
            .unwrap_or(Dtype::F32)
    }

    pub fn size(&self) -> usize {
        bridge::size(self.inner())
    }

    pub fn nbytes(&self) -> usize {
        bridge::nbytes(self.inner())
    }
}

impl Clone for Array {
    /// Cheap: both handles share the same MLX buffer and graph node.
    fn clone(&self) -> Array {
        Array::from_raw(bridge::clone_array(self.inner()))
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Array(shape={:?}, dtype={:?})",
            self.shape(),
            self.dtype()
        )
    }
}

impl fmt::Display for Array {
    /// Evaluates and prints the values the way MLX does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _guard = crate::eval_lock::lock();
        match bridge::describe(self.inner()) {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "<array: {}>", e.what()),
        }
    }
}

/// A list of arrays as the bridge passes them.
pub(crate) struct List(pub(crate) UniquePtr<bridge::ArrayList>);

impl List {
    pub(crate) fn of<'a>(arrays: impl IntoIterator<Item = &'a Array>) -> List {
        let mut l = bridge::list_new();
        for a in arrays {
            bridge::list_push(l.pin_mut(), a.inner());
        }
        List(l)
    }

    pub(crate) fn inner(&self) -> &bridge::ArrayList {
        self.0
            .as_ref()
            .expect("rmx-mlx invariant: ArrayList is non-null")
    }

    pub(crate) fn into_vec(self, op: &'static str) -> Result<Vec<Array>> {
        let l = self.inner();
        (0..bridge::list_len(l))
            .map(|i| check(op, bridge::list_get(l, i)).map(Array::from_raw))
            .collect()
    }
}
