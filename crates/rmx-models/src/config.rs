//! What every family's config shares: its type names and mlx-lm's `quantization` section.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rmx_mlx::quant::QuantSpec;
use serde::Deserialize;

use crate::error::{ModelError, Result};

/// `config.json` as read once; each family parses its own `Config` from `raw`.
pub struct RawConfig {
    pub path: PathBuf,
    pub raw: serde_json::Value,
    pub model_type: String,
    pub architectures: Vec<String>,
    pub quant: QuantConfig,
}

impl RawConfig {
    pub fn read(dir: &Path) -> Result<RawConfig> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ModelError::Io {
            path: path.clone(),
            source,
        })?;
        let raw: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ModelError::Config {
                path: path.clone(),
                message: format!("not valid JSON: {e}"),
            })?;
        let model_type = raw
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let architectures = raw
            .get("architectures")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let quant = QuantConfig::parse(&path, raw.get("quantization"))?;
        Ok(RawConfig {
            path,
            raw,
            model_type,
            architectures,
            quant,
        })
    }

    /// Parses the family's own config type, naming the file and field on failure.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T> {
        serde_json::from_value(self.raw.clone()).map_err(|e| ModelError::Config {
            path: self.path.clone(),
            message: format!("invalid config: {e}"),
        })
    }
}

/// mlx-lm's `quantization` section: defaults plus per-module overrides keyed by module path
/// (`{"group_size":64,"bits":4,"model.layers.0.mlp.down_proj":{"group_size":64,"bits":8}}`;
/// `false` leaves a module unquantized).
#[derive(Debug, Clone, Default)]
pub struct QuantConfig {
    pub default: Option<QuantSpec>,
    overrides: HashMap<String, Option<QuantSpec>>,
}

fn spec_of(v: &serde_json::Value) -> Option<QuantSpec> {
    let mode = v.get("mode").and_then(|m| m.as_str()).unwrap_or("affine");
    if mode != "affine" {
        return None;
    }
    Some(QuantSpec {
        group_size: v.get("group_size")?.as_i64()? as i32,
        bits: v.get("bits")?.as_i64()? as i32,
    })
}

impl QuantConfig {
    fn parse(path: &Path, v: Option<&serde_json::Value>) -> Result<QuantConfig> {
        let Some(obj) = v.and_then(|v| v.as_object()) else {
            return Ok(QuantConfig::default());
        };
        if let Some(mode) = obj.get("mode").and_then(|m| m.as_str()) {
            if mode != "affine" {
                return Err(ModelError::Config {
                    path: path.to_path_buf(),
                    message: format!(
                        "quantization mode {mode:?} is not supported yet (only affine)"
                    ),
                });
            }
        }
        let mut overrides = HashMap::new();
        for (k, v) in obj {
            if v.is_object() {
                overrides.insert(k.clone(), spec_of(v));
            } else if v == &serde_json::Value::Bool(false) {
                overrides.insert(k.clone(), None);
            }
        }
        Ok(QuantConfig {
            default: spec_of(&serde_json::Value::Object(obj.clone())),
            overrides,
        })
    }

    /// The spec for the module at `path`, if it is quantized.
    pub fn for_module(&self, path: &str) -> Option<QuantSpec> {
        match self.overrides.get(path) {
            Some(s) => *s,
            None => self.default,
        }
    }
}
