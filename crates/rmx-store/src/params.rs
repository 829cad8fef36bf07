//! Parameter counts from safetensors headers alone (the first 8 bytes give the JSON header's
//! length; the header gives each tensor's dtype and shape), so `rmx info` never reads weights.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::error::{IoContext, StoreError};
use crate::model_config::ModelConfig;

/// Real headers are a few MB at most; anything bigger is not a safetensors file.
const MAX_HEADER: u64 = 100 * 1024 * 1024;

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TensorInfo {
    pub dtype: String,
    pub shape: Vec<u64>,
}

pub(crate) fn read_header(path: &Path) -> Result<BTreeMap<String, TensorInfo>, StoreError> {
    let bad = |reason: String| StoreError::Safetensors {
        path: path.to_path_buf(),
        reason,
    };
    let mut file = std::fs::File::open(path).at("open", path)?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).at("read", path)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_HEADER {
        return Err(bad(format!("header length {len} is implausible")));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).at("read", path)?;
    let mut raw: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(e.to_string()))?;
    raw.remove("__metadata__");
    raw.into_iter()
        .map(|(name, value)| {
            serde_json::from_value(value)
                .map(|info| (name.clone(), info))
                .map_err(|e| bad(format!("tensor `{name}`: {e}")))
        })
        .collect()
}

/// Parameters of the model the tensors describe. A quantized MLX layer is stored as
/// `<layer>.weight` (u32, `bits`-wide values packed into a u32 stream) with `<layer>.scales` and
/// (affine mode) `<layer>.biases`; those are quantization metadata, not parameters.
pub(crate) fn count_parameters(
    tensors: &BTreeMap<String, TensorInfo>,
    config: &ModelConfig,
) -> u64 {
    let mut total = 0u64;
    for (name, info) in tensors {
        let elements = info.shape.iter().product::<u64>();
        let layer = name
            .strip_suffix(".scales")
            .or_else(|| name.strip_suffix(".biases"));
        if let Some(layer) = layer {
            if is_quantized(tensors, layer) {
                continue;
            }
        }
        let layer = name.strip_suffix(".weight");
        match layer {
            Some(layer) if info.dtype == "U32" && is_quantized(tensors, layer) => {
                // 3-, 5- and 6-bit values straddle u32 boundaries; rows stay whole, so
                // packed * 32 / bits is exact.
                let bits = config
                    .bits_for(layer)
                    .filter(|b| (1..=32).contains(b))
                    .unwrap_or(4);
                total += elements * 32 / u64::from(bits);
            }
            _ => total += elements,
        }
    }
    total
}

fn is_quantized(tensors: &BTreeMap<String, TensorInfo>, layer: &str) -> bool {
    tensors.contains_key(&format!("{layer}.scales"))
        && tensors
            .get(&format!("{layer}.weight"))
            .is_some_and(|w| w.dtype == "U32")
}
