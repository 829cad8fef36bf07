//! The GGUF container: header, metadata, tensor directory, and reading one tensor's bytes.
//!
//! Only the header is parsed at open; tensor data is read on demand with seek + read_exact so a
//! multi-gigabyte file never sits in memory whole (and without mmap, which would need `unsafe`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::dequant::dequantize;
use crate::error::{GgufError, Result};
use crate::ggml_type::GgmlType;
use crate::metadata::MetaValue;

const MAGIC: [u8; 4] = *b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Nesting bound for arrays of arrays, so a malicious file cannot recurse without end.
const MAX_ARRAY_DEPTH: u32 = 8;

/// One entry of the tensor directory.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the innermost (contiguous) one.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Absolute position of the data in the file.
    pub offset: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Row-major shape as numpy / MLX / safetensors write it (ggml's dims reversed).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Size of the stored data, if the type's layout is known.
    pub fn byte_size(&self) -> Option<u64> {
        self.ggml_type.byte_size(self.n_elements())
    }
}

/// An open GGUF file: its header parsed, its tensor data still on disk.
#[derive(Debug, Clone)]
pub struct GgufFile {
    path: PathBuf,
    version: u32,
    metadata: BTreeMap<String, MetaValue>,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
}

impl GgufFile {
    /// Parses the header of `path` (GGUF v2 or v3, little-endian).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io = |source| GgufError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut r = HeaderReader {
            inner: BufReader::new(file),
            pos: 0,
            path: &path,
            file_len,
        };

        let mut magic = [0u8; 4];
        r.read_exact(&mut magic)?;
        if magic != MAGIC {
            return Err(GgufError::BadMagic { path, magic });
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { path, version });
        }
        let tensor_count = r.u64()?;
        let kv_count = r.u64()?;

        let mut metadata = BTreeMap::new();
        for _ in 0..kv_count {
            let key = r.string()?;
            let ty = r.u32()?;
            let value = r.value(ty, 0)?;
            metadata.insert(key, value);
        }

        let mut infos = Vec::new();
        for _ in 0..tensor_count {
            let name = r.string()?;
            let n_dims = r.u32()?;
            if n_dims > 8 {
                return Err(r.malformed(format!("tensor `{name}` has {n_dims} dimensions")));
            }
            let dims = (0..n_dims).map(|_| r.u64()).collect::<Result<Vec<_>>>()?;
            let ggml_type = GgmlType::from_id(r.u32()?);
            let offset = r.u64()?;
            infos.push(TensorInfo {
                name,
                dims,
                ggml_type,
                offset,
            });
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => return Err(r.malformed(format!("general.alignment is {v:?}"))),
            },
        };
        let data_offset = r.pos.div_ceil(alignment) * alignment;

        for info in &mut infos {
            let end = info
                .byte_size()
                .and_then(|size| data_offset.checked_add(info.offset)?.checked_add(size));
            match end {
                Some(end) if end <= file_len => {}
                // Unknown types cannot be checked here; reading them fails later, by name.
                None if info.block_layout_unknown() => {}
                _ => {
                    return Err(r.malformed(format!(
                        "tensor `{}` ({} {:?}) runs past the end of the file",
                        info.name, info.ggml_type, info.dims
                    )))
                }
            }
            info.offset += data_offset;
        }

        Ok(Self {
            version,
            metadata,
            tensors: infos,
            alignment,
            data_offset,
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Where the tensor data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    pub fn metadata(&self) -> &BTreeMap<String, MetaValue> {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    /// `general.architecture`, e.g. "llama" or "gemma3".
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
            .ok_or_else(|| self.metadata_error("general.architecture", "string"))
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The stored bytes of one tensor, as they are on disk.
    pub fn tensor_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let info = self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            path: self.path.clone(),
            tensor: name.to_owned(),
        })?;
        self.read_tensor_bytes(info)
    }

    /// One tensor dequantized to f32, in row-major order of [`TensorInfo::shape`].
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.tensor(name).ok_or_else(|| GgufError::MissingTensor {
            path: self.path.clone(),
            tensor: name.to_owned(),
        })?;
        self.read_tensor_f32(info)
    }

    pub fn read_tensor_f32(&self, info: &TensorInfo) -> Result<Vec<f32>> {
        let bytes = self.read_tensor_bytes(info)?;
        dequantize(info.ggml_type, &bytes).ok_or_else(|| self.unsupported(info))
    }

    /// Elements `start..start + len` of a tensor (flat, row-major), dequantized. Both ends must
    /// fall on block boundaries, which whole rows always do; this lets big tensors be
    /// converted a slab of rows at a time.
    pub fn read_tensor_range_f32(
        &self,
        info: &TensorInfo,
        start: u64,
        len: u64,
    ) -> Result<Vec<f32>> {
        let bad = |detail: String| GgufError::BadTensor {
            path: self.path.clone(),
            tensor: info.name.clone(),
            detail,
        };
        let (block, _) = info
            .ggml_type
            .block_layout()
            .ok_or_else(|| self.unsupported(info))?;
        let block = block as u64;
        if !start.is_multiple_of(block)
            || !len.is_multiple_of(block)
            || start + len > info.n_elements()
        {
            return Err(bad(format!(
                "range {start}+{len} is not whole blocks of the tensor"
            )));
        }
        let skip = info
            .ggml_type
            .byte_size(start)
            .ok_or_else(|| self.unsupported(info))?;
        let size = info
            .ggml_type
            .byte_size(len)
            .ok_or_else(|| self.unsupported(info))?;
        let bytes = self.read_at(info, info.offset + skip, size)?;
        dequantize(info.ggml_type, &bytes).ok_or_else(|| self.unsupported(info))
    }

    pub fn read_tensor_bytes(&self, info: &TensorInfo) -> Result<Vec<u8>> {
        let size = info.byte_size().ok_or_else(|| self.unsupported(info))?;
        self.read_at(info, info.offset, size)
    }

    fn read_at(&self, info: &TensorInfo, offset: u64, size: u64) -> Result<Vec<u8>> {
        let size = usize::try_from(size).map_err(|_| GgufError::BadTensor {
            path: self.path.clone(),
            tensor: info.name.clone(),
            detail: format!("{size} bytes do not fit in memory"),
        })?;
        let io = |source| GgufError::Io {
            path: self.path.clone(),
            source,
        };
        let mut file = File::open(&self.path).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut bytes = vec![0u8; size];
        file.read_exact(&mut bytes).map_err(io)?;
        Ok(bytes)
    }

    pub(crate) fn metadata_error(&self, key: &str, want: &'static str) -> GgufError {
        GgufError::Metadata {
            path: self.path.clone(),
            key: key.to_owned(),
            want,
        }
    }

    fn unsupported(&self, info: &TensorInfo) -> GgufError {
        GgufError::UnsupportedTensorType {
            path: self.path.clone(),
            tensor: info.name.clone(),
            ggml_type: info.ggml_type.to_string(),
        }
    }
}

impl TensorInfo {
    fn block_layout_unknown(&self) -> bool {
        self.ggml_type.block_layout().is_none()
    }
}

/// Little-endian primitive reads over the header, counting the position for the data offset.
struct HeaderReader<'a> {
    inner: BufReader<File>,
    pos: u64,
    path: &'a Path,
    file_len: u64,
}

impl HeaderReader<'_> {
    fn malformed(&self, detail: String) -> GgufError {
        GgufError::Malformed {
            path: self.path.to_path_buf(),
            detail: format!("{detail} (at byte {})", self.pos),
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|source| {
            if source.kind() == std::io::ErrorKind::UnexpectedEof {
                self.malformed("header ends early".into())
            } else {
                GgufError::Io {
                    path: self.path.to_path_buf(),
                    source,
                }
            }
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.read_exact(&mut b)?;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    /// A count that claims more than the file could hold is corruption, not a reason to allocate.
    fn count(&mut self, what: &str) -> Result<usize> {
        let n = self.u64()?;
        if n > self.file_len {
            return Err(self.malformed(format!("{what} length {n} exceeds the file size")));
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Result<String> {
        let len = self.count("string")?;
        let mut buf = vec![0u8; len];
        self.read_exact(&mut buf)?;
        // Some converters wrote vocabularies with invalid UTF-8; keep them readable.
        Ok(String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    fn value(&mut self, ty: u32, depth: u32) -> Result<MetaValue> {
        Ok(match ty {
            0 => MetaValue::U8(u8::from_le_bytes(self.bytes()?)),
            1 => MetaValue::I8(i8::from_le_bytes(self.bytes()?)),
            2 => MetaValue::U16(u16::from_le_bytes(self.bytes()?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.bytes()?)),
            4 => MetaValue::U32(u32::from_le_bytes(self.bytes()?)),
            5 => MetaValue::I32(i32::from_le_bytes(self.bytes()?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.bytes()?)),
            7 => MetaValue::Bool(self.bytes::<1>()?[0] != 0),
            8 => MetaValue::String(self.string()?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.malformed("arrays nested too deeply".into()));
                }
                let elem_ty = self.u32()?;
                let n = self.count("array")?;
                let mut items = Vec::with_capacity(n.min(1 << 20));
                for _ in 0..n {
                    items.push(self.value(elem_ty, depth + 1)?);
                }
                MetaValue::Array(items)
            }
            10 => MetaValue::U64(u64::from_le_bytes(self.bytes()?)),
            11 => MetaValue::I64(i64::from_le_bytes(self.bytes()?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.bytes()?)),
            other => return Err(self.malformed(format!("unknown metadata value type {other}"))),
        })
    }
}
