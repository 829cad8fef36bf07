//! Reading one slice of a tensor straight from its safetensors file: a rank of a tensor-parallel
//! group reads only its own rows or columns. MLX's loader reads a tensor whole when it is first
//! evaluated (slicing it afterwards keeps or copies the whole), so a shard read through it
//! would pass the full model through every rank's memory.
//!
//! The format: an 8-byte little-endian header length, a JSON header mapping each tensor name to
//! `{dtype, shape, data_offsets: [begin, end]}` (offsets into the data that follows the header),
//! then the data, row-major, little-endian.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::error::{io_at, ModelError, Result};

/// Pieces smaller than this are read in blocks of whole rows ([`Header::read_slice`]).
const SMALL_PIECE: usize = 64 << 10;
/// The rows read at once for small pieces: about this many bytes (in unit tests a few rows, so
/// their small tensors span several blocks).
#[cfg(not(test))]
const BLOCK: usize = 8 << 20;
#[cfg(test)]
const BLOCK: usize = 64;

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<i64>,
    data_offsets: [u64; 2],
}

/// A file's header: where each tensor's bytes are.
pub(crate) struct Header {
    path: PathBuf,
    /// Where the data starts: 8 + the header's length.
    data_start: u64,
    entries: HashMap<String, Entry>,
}

fn bad(path: &Path, message: impl Into<String>) -> ModelError {
    ModelError::Config {
        path: path.to_path_buf(),
        message: format!("not a readable safetensors file: {}", message.into()),
    }
}

impl Header {
    pub(crate) fn read(path: &Path) -> Result<Header> {
        let mut f = File::open(path).map_err(io_at(path))?;
        let mut len = [0u8; 8];
        f.read_exact(&mut len).map_err(io_at(path))?;
        let len = u64::from_le_bytes(len);
        // The format caps the header at 100 MB; a larger length is a corrupt file.
        if len > 100_000_000 {
            return Err(bad(path, format!("header of {len} bytes")));
        }
        let mut text = vec![0u8; len as usize];
        f.read_exact(&mut text).map_err(io_at(path))?;
        let mut raw: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&text).map_err(|e| bad(path, e.to_string()))?;
        raw.remove("__metadata__");
        let entries = raw
            .into_iter()
            .map(|(k, v)| {
                let e: Entry =
                    serde_json::from_value(v).map_err(|e| bad(path, format!("{k}: {e}")))?;
                Ok((k, e))
            })
            .collect::<Result<HashMap<_, _>>>()?;
        Ok(Header {
            path: path.to_path_buf(),
            data_start: 8 + len,
            entries,
        })
    }

    /// Elements `start..start + len` along `axis` of tensor `name`, every other axis whole.
    pub(crate) fn read_slice(
        &self,
        name: &str,
        axis: usize,
        start: i64,
        len: i64,
    ) -> Result<Array> {
        let path = &self.path;
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| bad(path, format!("no tensor {name} in its header")))?;
        let dtype = dtype(&e.dtype).ok_or_else(|| {
            bad(
                path,
                format!(
                    "{name} has dtype {}, which rmx cannot read in part",
                    e.dtype
                ),
            )
        })?;
        let shape = &e.shape;
        if axis >= shape.len() || start < 0 || len < 0 || start + len > shape[axis] {
            return Err(bad(
                path,
                format!(
                    "{name} of shape {shape:?} has no [{start}, {}) on axis {axis}",
                    start + len
                ),
            ));
        }
        let elem = dtype.size() as u64;
        let outer: i64 = shape[..axis].iter().product();
        let inner: i64 = shape[axis + 1..].iter().product();
        let (row, chunk) = (shape[axis] * inner, len * inner);
        let want = (shape.iter().product::<i64>() as u64) * elem;
        if e.data_offsets[1] - e.data_offsets[0] != want {
            return Err(bad(
                path,
                format!("{name}'s offsets do not match its shape and dtype"),
            ));
        }
        let base = self.data_start + e.data_offsets[0];
        let mut out = vec![0u8; (outer * chunk) as usize * elem as usize];
        let f = File::open(path).map_err(io_at(path))?;
        let step = chunk as usize * elem as usize;
        let row_bytes = row as usize * elem as usize;
        if step >= SMALL_PIECE || row_bytes >= SMALL_PIECE || outer == 1 {
            // One read per outer index: a row split (axis 0) is one read.
            for (o, dst) in out.chunks_mut(step.max(1)).enumerate().take(outer as usize) {
                let at = base + ((o as i64 * row + start * inner) as u64) * elem;
                f.read_exact_at(dst, at).map_err(io_at(path))?;
            }
        } else {
            // Small pieces of small rows (a column split of stacked experts: one per expert
            // and row, a few hundred bytes each, millions per model): read whole rows a block
            // at a time and copy the pieces out, since a system call per piece costs more than
            // its bytes. Such rows share their pages, which are read either way; the block
            // bounds the transient memory.
            let rows_per_block = (BLOCK / row_bytes.max(1)).max(1);
            let at_piece = (start * inner) as usize * elem as usize;
            let mut buf = vec![0u8; rows_per_block * row_bytes];
            for (b, dst) in out.chunks_mut(rows_per_block * step).enumerate() {
                let n = dst.len() / step.max(1);
                let at = base + (b * rows_per_block * row_bytes) as u64;
                f.read_exact_at(&mut buf[..n * row_bytes], at)
                    .map_err(io_at(path))?;
                for (i, piece) in dst.chunks_mut(step.max(1)).enumerate() {
                    let from = i * row_bytes + at_piece;
                    piece.copy_from_slice(&buf[from..from + step]);
                }
            }
        }
        let mut part: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        part[axis] = len as i32;
        Ok(Array::from_bytes(&out, &part, dtype)?)
    }
}

fn dtype(s: &str) -> Option<Dtype> {
    Some(match s {
        "BOOL" => Dtype::Bool,
        "U8" => Dtype::U8,
        "I8" => Dtype::I8,
        "U16" => Dtype::U16,
        "I16" => Dtype::I16,
        "F16" => Dtype::F16,
        "BF16" => Dtype::Bf16,
        "U32" => Dtype::U32,
        "I32" => Dtype::I32,
        "F32" => Dtype::F32,
        "U64" => Dtype::U64,
        "I64" => Dtype::I64,
        "F64" => Dtype::F64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_on_each_axis_equal_mlx_slicing() {
        let dir = std::env::temp_dir().join(format!("rmx-st-part-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("t.safetensors");
        let data: Vec<f32> = (0..4 * 6 * 2).map(|i| i as f32).collect();
        let a = Array::from_slice(&data, &[4, 6, 2]).expect("array");
        let b = Array::from_slice(&[1u32, 2, 3, 4, 5, 6], &[2, 3]).expect("array");
        rmx_mlx::io::save_safetensors(&file, &[("a", &a), ("b", &b)], &[]).expect("save");
        let h = Header::read(&file).expect("header");
        for (axis, start, len) in [(0usize, 1i64, 2i64), (1, 2, 3), (2, 1, 1), (0, 0, 4)] {
            let got = h.read_slice("a", axis, start, len).expect("slice");
            let (mut lo, mut hi) = (vec![0, 0, 0], vec![4, 6, 2]);
            lo[axis] = start as i32;
            hi[axis] = (start + len) as i32;
            let want = a.slice(&lo, &hi, &[1, 1, 1]).expect("slice");
            assert_eq!(got.shape(), want.shape());
            assert_eq!(
                got.to_vec::<f32>().expect("read"),
                want.to_vec::<f32>().expect("read")
            );
        }
        let got = h.read_slice("b", 1, 1, 2).expect("slice");
        assert_eq!(got.to_vec::<u32>().expect("read"), vec![2, 3, 5, 6]);
        assert!(h.read_slice("a", 1, 5, 2).is_err());
        assert!(h.read_slice("nope", 0, 0, 1).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
