//! A streaming safetensors writer: the header (names, dtypes, shapes, offsets) is known before
//! any tensor is computed, so it is written first and each tensor goes to disk as soon as it is
//! converted; only one tensor is ever held in memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::error::{GgufError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Bf16,
    F32,
    U32,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Self::Bf16 => "BF16",
            Self::F32 => "F32",
            Self::U32 => "U32",
        }
    }

    pub fn size(self) -> usize {
        match self {
            Self::Bf16 => 2,
            Self::F32 | Self::U32 => 4,
        }
    }

    /// The float dtype's name in config.json (`torch_dtype`).
    pub fn torch_name(self) -> &'static str {
        match self {
            Self::F32 => "float32",
            Self::Bf16 => "bfloat16",
            Self::U32 => unreachable!("u32 tensors are quantized packs, not a model's dtype"),
        }
    }

    /// `values` stored in this float dtype, little-endian.
    pub fn float_bytes(self, values: &[f32]) -> Vec<u8> {
        match self {
            Self::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Self::Bf16 => bf16_bytes(values),
            Self::U32 => unreachable!("u32 tensors are quantized packs, not floats"),
        }
    }
}

/// One tensor of the file, declared up front.
#[derive(Debug, Clone)]
pub struct Planned {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
}

impl Planned {
    pub fn byte_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

pub struct SafetensorsWriter {
    out: BufWriter<File>,
    path: PathBuf,
    plan: Vec<Planned>,
    next: usize,
    /// Bytes written so far of tensor `next`.
    current: usize,
    written: u64,
}

impl SafetensorsWriter {
    /// Creates `path` and writes the header for `plan`, whose tensors must then be written in
    /// the same order.
    pub fn create(
        path: &Path,
        plan: Vec<Planned>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<Self> {
        let write_err = |source| GgufError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut header = Map::new();
        header.insert("__metadata__".into(), json!(metadata));
        let mut offset = 0usize;
        for t in &plan {
            let end = offset + t.byte_len();
            header.insert(
                t.name.clone(),
                json!({"dtype": t.dtype.name(), "shape": t.shape, "data_offsets": [offset, end]}),
            );
            offset = end;
        }
        let mut bytes =
            serde_json::to_vec(&Value::Object(header)).map_err(|source| GgufError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        // The data section must start 8-byte aligned; the format pads the header with spaces.
        while bytes.len() % 8 != 0 {
            bytes.push(b' ');
        }
        let file = File::create(path).map_err(write_err)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&(bytes.len() as u64).to_le_bytes())
            .map_err(write_err)?;
        out.write_all(&bytes).map_err(write_err)?;
        Ok(Self {
            out,
            path: path.to_path_buf(),
            plan,
            next: 0,
            current: 0,
            written: 0,
        })
    }

    /// Writes the whole of the next planned tensor (little-endian data).
    pub fn write_next(&mut self, name: &str, data: &[u8]) -> Result<()> {
        self.write_part(name, data)?;
        self.end_tensor(name)
    }

    /// Appends a piece of the next planned tensor; [`Self::end_tensor`] closes it.
    pub fn write_part(&mut self, name: &str, data: &[u8]) -> Result<()> {
        let planned = self.expect(name)?;
        if self.current + data.len() > planned.byte_len() {
            let detail = format!("more than the planned {} bytes", planned.byte_len());
            return Err(self.bad(name, detail));
        }
        self.out
            .write_all(data)
            .map_err(|source| GgufError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.current += data.len();
        self.written += data.len() as u64;
        Ok(())
    }

    pub fn end_tensor(&mut self, name: &str) -> Result<()> {
        let planned = self.expect(name)?;
        if self.current != planned.byte_len() {
            let detail = format!(
                "{} of the planned {} bytes written",
                self.current,
                planned.byte_len()
            );
            return Err(self.bad(name, detail));
        }
        self.next += 1;
        self.current = 0;
        Ok(())
    }

    fn expect(&self, name: &str) -> Result<&Planned> {
        match self.plan.get(self.next) {
            Some(p) if p.name == name => Ok(p),
            Some(p) => Err(self.bad(name, format!("written out of order; `{}` was due", p.name))),
            None => Err(self.bad(name, "more tensors written than planned".into())),
        }
    }

    /// Flushes the file; fails if a planned tensor was never written.
    pub fn finish(mut self) -> Result<u64> {
        if let Some(missing) = self.plan.get(self.next) {
            let name = missing.name.clone();
            return Err(self.bad(&name, "planned but never written".into()));
        }
        self.out.flush().map_err(|source| GgufError::Write {
            path: self.path.clone(),
            source,
        })?;
        Ok(self.written)
    }

    fn bad(&self, tensor: &str, detail: String) -> GgufError {
        GgufError::BadTensor {
            path: self.path.clone(),
            tensor: tensor.to_owned(),
            detail,
        }
    }
}

pub fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
        .collect()
}
