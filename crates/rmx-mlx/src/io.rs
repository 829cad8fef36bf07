//! Reading and writing weight files. MLX maps safetensors lazily: tensors are read from the
//! file when first evaluated, so loading a model never copies it through Rust memory.

use std::path::Path;

use crate::array::Array;
use crate::error::{check, invalid, Result};
use crate::ffi::bridge;

/// Named tensors plus string metadata, in file order.
#[derive(Debug)]
pub struct Tensors {
    pub tensors: Vec<(String, Array)>,
    pub metadata: Vec<(String, String)>,
}

fn path_str(op: &'static str, path: &Path) -> Result<String> {
    match path.to_str() {
        Some(s) => Ok(s.to_string()),
        None => invalid(op, format!("path is not UTF-8: {}", path.display())),
    }
}

fn read_named(op: &'static str, n: &bridge::NamedArrays) -> Result<Tensors> {
    let tensors = (0..bridge::named_len(n))
        .map(|i| {
            Ok((
                check(op, bridge::named_name(n, i))?,
                check(op, bridge::named_array(n, i)).map(Array::from_raw)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = (0..bridge::named_meta_len(n))
        .map(|i| {
            Ok((
                check(op, bridge::named_meta_key(n, i))?,
                check(op, bridge::named_meta_value(n, i))?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensors { tensors, metadata })
}

/// MLX opens the file itself, and an `open` of a FIFO waits for a writer for ever: the load
/// would hang, and the daemon's shutdown with it. Only a regular file (or a link to one, as the
/// Hugging Face cache's snapshots are) is handed to MLX; what cannot be read is left to MLX to
/// report.
fn regular_file(op: &'static str, path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => invalid(
            op,
            format!(
                "{} is not a regular file (a FIFO, socket, device or folder); weights must be files",
                path.display()
            ),
        ),
        _ => Ok(()),
    }
}

pub fn load_safetensors(path: &Path) -> Result<Tensors> {
    regular_file("load_safetensors", path)?;
    let p = path_str("load_safetensors", path)?;
    let n = check("load_safetensors", bridge::load_safetensors(&p))?;
    read_named("load_safetensors", n.as_ref().expect("non-null"))
}

/// Loads a GGUF file with MLX's reader (Q4_0/Q4_1/Q8_0 and float types; K-quants are rejected
/// by MLX and handled by rmx-gguf). Only string metadata is returned.
pub fn load_gguf(path: &Path) -> Result<Tensors> {
    regular_file("load_gguf", path)?;
    let p = path_str("load_gguf", path)?;
    let n = check("load_gguf", bridge::load_gguf(&p))?;
    read_named("load_gguf", n.as_ref().expect("non-null"))
}

pub fn save_safetensors(
    path: &Path,
    tensors: &[(&str, &Array)],
    metadata: &[(&str, &str)],
) -> Result<()> {
    let p = path_str("save_safetensors", path)?;
    let mut n = bridge::named_new();
    for (name, a) in tensors {
        bridge::named_push(n.pin_mut(), name, a.inner());
    }
    for (k, v) in metadata {
        bridge::named_push_meta(n.pin_mut(), k, v);
    }
    let _guard = crate::eval_lock::lock();
    check(
        "save_safetensors",
        bridge::save_safetensors(&p, n.as_ref().expect("non-null")),
    )
}
