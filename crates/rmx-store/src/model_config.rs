//! The few facts of a model's config.json the store reports. Read loosely (as JSON values):
//! every family spells its config differently, and multimodal ones nest the language model
//! under `text_config`.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::error::{IoContext, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quantization {
    pub bits: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
    /// `affine` (MLX's default) or a float format such as `mxfp4`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ModelConfig {
    json: Value,
}

impl ModelConfig {
    pub fn read(path: &Path) -> Result<Self, StoreError> {
        let text = std::fs::read(path).at("read", path)?;
        let json = serde_json::from_slice(&text).map_err(|source| StoreError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(ModelConfig { json })
    }

    /// A config.json's content that is not in a file (yet): what a pull fetched to judge the
    /// model's family.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        Ok(ModelConfig {
            json: serde_json::from_slice(bytes)?,
        })
    }

    /// Look a key up at the top level, then in `text_config`.
    fn get(&self, key: &str) -> Option<&Value> {
        self.json
            .get(key)
            .or_else(|| self.json.get("text_config").and_then(|t| t.get(key)))
    }

    pub fn architecture(&self) -> Option<String> {
        self.json
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// Every name in `architectures`.
    pub fn architectures(&self) -> Vec<String> {
        self.json
            .get("architectures")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn model_type(&self) -> Option<String> {
        self.json
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// A vision-language checkpoint: its config describes a vision tower.
    pub fn has_vision(&self) -> bool {
        self.json.get("vision_config").is_some_and(|v| !v.is_null())
    }

    pub fn context_length(&self) -> Option<u64> {
        self.get("max_position_embeddings").and_then(Value::as_u64)
    }

    pub fn dtype(&self) -> Option<String> {
        self.get("torch_dtype")
            .or_else(|| self.get("dtype"))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// mlx-lm writes `quantization` (and, for transformers, the same as `quantization_config`).
    fn quant_table(&self) -> Option<&Value> {
        self.json
            .get("quantization")
            .or_else(|| self.json.get("quantization_config"))
            .filter(|q| q.get("bits").is_some())
    }

    pub fn quantization(&self) -> Option<Quantization> {
        let q = self.quant_table()?;
        Some(Quantization {
            bits: u32::try_from(q.get("bits")?.as_u64()?).ok()?,
            group_size: q
                .get("group_size")
                .and_then(Value::as_u64)
                .and_then(|g| u32::try_from(g).ok()),
            mode: q.get("mode").and_then(Value::as_str).map(str::to_string),
        })
    }

    /// Bits of one quantized layer: mlx-lm's mixed quantization stores per-layer overrides
    /// (`"model.layers.0.mlp.down_proj": {"bits": 6, ...}`) beside the defaults.
    pub fn bits_for(&self, layer: &str) -> Option<u32> {
        let q = self.quant_table()?;
        let bits = q
            .get(layer)
            .and_then(|l| l.get("bits"))
            .or_else(|| q.get("bits"))?;
        u32::try_from(bits.as_u64()?).ok()
    }
}
