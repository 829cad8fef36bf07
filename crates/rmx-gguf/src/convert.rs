//! GGUF file → MLX-format model directory (config.json, model.safetensors, tokenizer files)
//! that mlx-lm and rmx-models load.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::str::FromStr;

use serde_json::Value;

use crate::arch::Arch;
use crate::config::{build_config, QuantConfig};
use crate::error::{GgufError, Result};
use crate::names::{hf_name, is_norm};
use crate::quantize::{affine_quantize, GROUP_SIZE};
use crate::reader::{GgufFile, TensorInfo};
use crate::safetensors_writer::{Dtype, Planned, SafetensorsWriter};
use crate::tokenizer::build_tokenizer;

/// The weight format of the converted model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quant {
    /// Everything in bfloat16.
    #[default]
    Bf16,
    /// Everything in float32: the GGUF's values unrounded. On a Linux CPU, where rmx multiplies
    /// float32 with kernels of its own (bf16 and quantized weights take MLX's slower CPU
    /// kernels), the fastest form, at twice bf16's bytes.
    F32,
    /// MLX affine 4-bit, group size 64, for Linear and Embedding weights.
    Q4,
    /// MLX affine 8-bit, group size 64, for Linear and Embedding weights.
    Q8,
}

impl Quant {
    pub fn bits(self) -> Option<u32> {
        match self {
            Self::Bf16 | Self::F32 => None,
            Self::Q4 => Some(4),
            Self::Q8 => Some(8),
        }
    }

    /// How the weights kept as floats are stored (every tensor but quantized ones' packs).
    pub fn float_dtype(self) -> Dtype {
        match self {
            Self::F32 => Dtype::F32,
            _ => Dtype::Bf16,
        }
    }
}

impl FromStr for Quant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" => Ok(Self::Bf16),
            "f32" | "float32" => Ok(Self::F32),
            "4bit" | "q4" | "4" => Ok(Self::Q4),
            "8bit" | "q8" | "8" => Ok(Self::Q8),
            other => Err(format!(
                "unknown quantization `{other}` (want 4bit, 8bit, bf16 or f32)"
            )),
        }
    }
}

/// What a conversion is doing; the library reports, the CLI draws.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    Started {
        architecture: &'a str,
        tensors: usize,
        bytes: u64,
    },
    /// Tokenizer and config files written.
    WroteTokenizer,
    /// Tensor `index` (1-based) of `total` converted; `bytes` of GGUF data read so far.
    Tensor {
        index: usize,
        total: usize,
        name: &'a str,
        bytes: u64,
    },
    Finished {
        bytes_written: u64,
    },
}

/// Receives [`Progress`] events.
pub trait Reporter {
    fn report(&mut self, progress: Progress<'_>);
}

impl<F: FnMut(Progress<'_>)> Reporter for F {
    fn report(&mut self, progress: Progress<'_>) {
        self(progress)
    }
}

/// A reporter that ignores everything.
pub struct NoProgress;

impl Reporter for NoProgress {
    fn report(&mut self, _: Progress<'_>) {}
}

/// What [`convert`] produced.
#[derive(Debug, Clone)]
pub struct ConvertSummary {
    pub architecture: String,
    pub model_type: &'static str,
    pub tensors: usize,
    pub bytes_written: u64,
}

/// One GGUF tensor's destination: a bf16 tensor, or the three of an MLX quantized one.
struct Job<'a> {
    info: &'a TensorInfo,
    hf: String,
    rows: usize,
    cols: usize,
    quantized: bool,
}

/// The weights file's name while it is being written.
const PARTIAL_WEIGHTS: &str = "model.safetensors.partial";

/// Elements dequantized at once when converting a large tensor a slab of rows at a time.
const SLAB_ELEMENTS: usize = 1 << 24;

/// Converts `gguf_path` into an MLX-format model directory `out_dir` (created if needed).
pub fn convert(
    gguf_path: &Path,
    out_dir: &Path,
    quant: Quant,
    reporter: &mut dyn Reporter,
) -> Result<ConvertSummary> {
    let gguf = GgufFile::open(gguf_path)?;
    let arch_name = gguf.architecture()?.to_owned();
    let arch = Arch::from_gguf(&arch_name).ok_or_else(|| GgufError::UnsupportedArchitecture {
        path: gguf_path.to_path_buf(),
        arch: arch_name.clone(),
    })?;
    crate::plausible::check(&gguf, arch)?;
    let jobs = plan(&gguf, arch, quant)?;
    let total_bytes = jobs.iter().filter_map(|j| j.info.byte_size()).sum();
    reporter.report(Progress::Started {
        architecture: &arch_name,
        tensors: jobs.len(),
        bytes: total_bytes,
    });

    fs::create_dir_all(out_dir).map_err(|source| GgufError::Write {
        path: out_dir.to_path_buf(),
        source,
    })?;
    let quant_config = quant.bits().map(|bits| QuantConfig {
        group_size: GROUP_SIZE,
        bits,
    });
    write_json(
        &out_dir.join("config.json"),
        &build_config(&gguf, arch, quant_config, quant.float_dtype().torch_name())?,
    )?;
    let tok = build_tokenizer(&gguf, arch)?;
    write_json(&out_dir.join("tokenizer.json"), &tok.tokenizer_json)?;
    write_json(
        &out_dir.join("tokenizer_config.json"),
        &tok.tokenizer_config,
    )?;
    write_json(
        &out_dir.join("generation_config.json"),
        &tok.generation_config,
    )?;
    reporter.report(Progress::WroteTokenizer);

    let heads = head_counts(&gguf, arch);
    let mut planned = Vec::new();
    for job in &jobs {
        planned.extend(planned_tensors(job, quant));
    }
    let metadata = BTreeMap::from([("format".to_owned(), "mlx".to_owned())]);
    let mut writer = SafetensorsWriter::create(&out_dir.join(PARTIAL_WEIGHTS), planned, &metadata)?;
    let mut read = 0u64;
    for (i, job) in jobs.iter().enumerate() {
        convert_tensor(&gguf, arch, job, quant, heads, &mut writer)?;
        read += job.info.byte_size().unwrap_or(0);
        reporter.report(Progress::Tensor {
            index: i + 1,
            total: jobs.len(),
            name: &job.info.name,
            bytes: read,
        });
    }
    let bytes_written = writer.finish()?;
    // Only a finished conversion leaves a model.safetensors: an interrupted one cannot be
    // mistaken for a model.
    let (partial, weights) = (
        out_dir.join(PARTIAL_WEIGHTS),
        out_dir.join("model.safetensors"),
    );
    fs::rename(&partial, &weights).map_err(|source| GgufError::Write {
        path: weights,
        source,
    })?;
    reporter.report(Progress::Finished { bytes_written });
    Ok(ConvertSummary {
        architecture: arch_name,
        model_type: arch.model_type(),
        tensors: jobs.len(),
        bytes_written,
    })
}

/// Decides every tensor's name and format before any data is read, so unsupported files fail
/// at once instead of after minutes of work.
fn plan(gguf: &GgufFile, arch: Arch, quant: Quant) -> Result<Vec<Job<'_>>> {
    let mut jobs = Vec::new();
    for info in gguf.tensors() {
        let hf = match hf_name(arch, &info.name) {
            Ok(Some(hf)) => hf,
            Ok(None) => continue,
            Err(()) => {
                return Err(GgufError::BadTensor {
                    path: gguf.path().to_path_buf(),
                    tensor: info.name.clone(),
                    detail: format!(
                        "no Hugging Face name is known for it in a {} model",
                        arch.gguf_name()
                    ),
                })
            }
        };
        if crate::dequant::dequantize(info.ggml_type, &[]).is_none() {
            return Err(GgufError::UnsupportedTensorType {
                path: gguf.path().to_path_buf(),
                tensor: info.name.clone(),
                ggml_type: info.ggml_type.to_string(),
            });
        }
        let shape = info.shape();
        let (rows, cols) = match shape.as_slice() {
            [n] => (1, *n),
            [r, c] => (*r, *c),
            _ => {
                return Err(GgufError::BadTensor {
                    path: gguf.path().to_path_buf(),
                    tensor: info.name.clone(),
                    detail: format!("shape {shape:?} is neither a vector nor a matrix"),
                })
            }
        };
        // mlx-lm's convert quantizes Linear and Embedding weights whose rows split into whole
        // groups; norms and biases stay in bf16.
        let quantized = quant.bits().is_some()
            && shape.len() == 2
            && hf.ends_with(".weight")
            && !is_norm(&hf)
            && cols % GROUP_SIZE == 0;
        jobs.push(Job {
            info,
            hf,
            rows,
            cols,
            quantized,
        });
    }
    Ok(jobs)
}

fn planned_tensors(job: &Job<'_>, quant: Quant) -> Vec<Planned> {
    let shape = job.info.shape();
    match quant.bits() {
        Some(bits) if job.quantized => {
            let stem = job.hf.trim_end_matches(".weight");
            let groups = job.cols / GROUP_SIZE;
            vec![
                Planned {
                    name: job.hf.clone(),
                    dtype: Dtype::U32,
                    shape: vec![job.rows, job.cols * bits as usize / 32],
                },
                Planned {
                    name: format!("{stem}.scales"),
                    dtype: Dtype::Bf16,
                    shape: vec![job.rows, groups],
                },
                Planned {
                    name: format!("{stem}.biases"),
                    dtype: Dtype::Bf16,
                    shape: vec![job.rows, groups],
                },
            ]
        }
        _ => vec![Planned {
            name: job.hf.clone(),
            dtype: quant.float_dtype(),
            shape,
        }],
    }
}

#[derive(Clone, Copy)]
struct Heads {
    q: usize,
    kv: usize,
}

fn head_counts(gguf: &GgufFile, arch: Arch) -> Heads {
    let p = arch.gguf_name();
    let q = gguf
        .get_u64(&format!("{p}.attention.head_count"))
        .unwrap_or(1) as usize;
    let kv = gguf
        .get_u64(&format!("{p}.attention.head_count_kv"))
        .map_or(q, |v| v as usize);
    Heads { q, kv }
}

fn convert_tensor(
    gguf: &GgufFile,
    arch: Arch,
    job: &Job<'_>,
    quant: Quant,
    heads: Heads,
    writer: &mut SafetensorsWriter,
) -> Result<()> {
    // Llama's Q and K rows were permuted by llama.cpp's converter (for its interleaved rope);
    // undoing that needs all rows of a head at once, and these tensors are small, so they are
    // read whole. Everything else streams through in slabs of rows.
    let permute_heads = match (arch, job.info.name.rsplit('.').nth(1)) {
        (Arch::Llama, Some("attn_q")) => Some(heads.q),
        (Arch::Llama, Some("attn_k")) => Some(heads.kv),
        _ => None,
    };
    // llama.cpp stores Gemma's RMSNorm weights as 1 + w; mlx-lm's Gemma adds the 1 itself.
    let shift = if arch == Arch::Gemma3 && is_norm(&job.hf) {
        -1.0
    } else {
        0.0
    };
    let slab_rows = if permute_heads.is_some() {
        job.rows
    } else {
        (SLAB_ELEMENTS / job.cols.max(1)).max(1)
    };

    let bits = quant.bits().filter(|_| job.quantized);
    let mut scales = Vec::new();
    let mut biases = Vec::new();
    let mut row = 0;
    while row < job.rows {
        let n = slab_rows.min(job.rows - row);
        let start = (row * job.cols) as u64;
        let mut values = gguf.read_tensor_range_f32(job.info, start, (n * job.cols) as u64)?;
        if let Some(h) = permute_heads {
            values = unpermute_rows(&values, job.rows, job.cols, h).ok_or_else(|| {
                GgufError::BadTensor {
                    path: gguf.path().to_path_buf(),
                    tensor: job.info.name.clone(),
                    detail: format!("{} rows do not split into {h} heads of even size", job.rows),
                }
            })?;
        }
        if shift != 0.0 {
            values.iter_mut().for_each(|v| *v += shift);
        }
        match bits {
            Some(bits) => {
                // Quantize what a bf16 checkpoint holds, so the result is exactly what
                // mlx-lm's convert makes of our own bf16 output (a checkable reference).
                values
                    .iter_mut()
                    .for_each(|v| *v = half::bf16::from_f32(*v).to_f32());
                let q = affine_quantize(&values, GROUP_SIZE, bits);
                let packed: Vec<u8> = q.packed.iter().flat_map(|w| w.to_le_bytes()).collect();
                writer.write_part(&job.hf, &packed)?;
                scales.extend(q.scales);
                biases.extend(q.biases);
            }
            None => writer.write_part(&job.hf, &quant.float_dtype().float_bytes(&values))?,
        }
        row += n;
    }
    writer.end_tensor(&job.hf)?;
    if bits.is_some() {
        let stem = job.hf.trim_end_matches(".weight");
        let to_bytes =
            |v: &[half::bf16]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        writer.write_next(&format!("{stem}.scales"), &to_bytes(&scales))?;
        writer.write_next(&format!("{stem}.biases"), &to_bytes(&biases))?;
    }
    Ok(())
}

/// Inverts llama.cpp's `permute(w, n_head)`: GGUF row `h*d + 2i + j` is HF row `h*d + j*d/2 + i`.
fn unpermute_rows(values: &[f32], rows: usize, cols: usize, heads: usize) -> Option<Vec<f32>> {
    if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
        return None;
    }
    let d = rows / heads;
    let half = d / 2;
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = (h * d + 2 * i + j) * cols;
                let dst = (h * d + j * half + i) * cols;
                out[dst..dst + cols].copy_from_slice(&values[src..src + cols]);
            }
        }
    }
    Some(out)
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|source| GgufError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    fs::write(path, text).map_err(|source| GgufError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's forward permutation, written from its definition (reshape to
    /// (heads, 2, d/2, cols), swap axes 1 and 2).
    fn permute(values: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
        let d = rows / heads;
        let half = d / 2;
        let mut out = vec![0.0; values.len()];
        for h in 0..heads {
            for i in 0..half {
                for j in 0..2 {
                    let new_row = h * d + i * 2 + j;
                    let old_row = h * d + j * half + i;
                    out[new_row * cols..][..cols]
                        .copy_from_slice(&values[old_row * cols..][..cols]);
                }
            }
        }
        out
    }

    #[test]
    fn unpermute_inverts_permute() {
        let (rows, cols, heads) = (24, 3, 3);
        let w: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let p = permute(&w, rows, cols, heads);
        assert_ne!(p, w);
        assert_eq!(unpermute_rows(&p, rows, cols, heads), Some(w));
    }

    #[test]
    fn quant_names_parse() {
        assert_eq!("4bit".parse(), Ok(Quant::Q4));
        assert_eq!("8bit".parse(), Ok(Quant::Q8));
        assert_eq!("bf16".parse(), Ok(Quant::Bf16));
        assert_eq!("f32".parse(), Ok(Quant::F32));
        assert!("3bit".parse::<Quant>().is_err());
    }
}
