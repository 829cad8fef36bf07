//! What every family's config shares: its type names and mlx-lm's `quantization` section.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rmx_mlx::quant::{QuantMode, QuantSpec};
use serde::Deserialize;

use crate::error::{io_at, ModelError, Result};

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
        let text = std::fs::read_to_string(&path).map_err(io_at(&path))?;
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

    /// Refuses sizes no model has, before any family builds on them: zero heads, layers or
    /// width (divisions by zero and empty layer lists deep in a family's code, which panic the
    /// engine thread), heads that do not divide among the key/value heads or the width, and
    /// sizes past any real checkpoint. Checks the top level and a nested `text_config`, where
    /// vision-language checkpoints keep their text model; a field a config lacks is the
    /// family's default, judged by the family.
    pub fn check_sizes(&self) -> Result<()> {
        check_sizes(&self.path, "", &self.raw)?;
        match self.raw.get("text_config") {
            Some(text @ serde_json::Value::Object(_)) => {
                check_sizes(&self.path, "text_config.", text)
            }
            _ => Ok(()),
        }
    }

    /// Parses the family's own config type, naming the file and field on failure.
    pub fn parse<T: for<'de> Deserialize<'de>>(&self) -> Result<T> {
        serde_json::from_value(self.raw.clone()).map_err(|e| ModelError::Config {
            path: self.path.clone(),
            message: format!("invalid config: {e}"),
        })
    }

    /// The text model's config of a Gemma vision-language checkpoint, as mlx-lm's wrappers
    /// build it: `text_config` with the top-level `vocab_size` (`vocab` when absent) and
    /// `defaults` for the fields it lacks.
    pub fn parse_wrapped_text<T: for<'de> Deserialize<'de>>(
        &self,
        vocab: i64,
        defaults: &[(&str, i64)],
    ) -> Result<T> {
        let mut text = self
            .raw
            .get("text_config")
            .and_then(|t| t.as_object())
            .cloned()
            .unwrap_or_default();
        let vocab = self.raw.get("vocab_size").cloned().unwrap_or(vocab.into());
        text.insert("vocab_size".into(), vocab);
        for (k, v) in defaults {
            text.entry(*k).or_insert((*v).into());
        }
        serde_json::from_value(text.into()).map_err(|e| ModelError::Config {
            path: self.path.clone(),
            message: format!("invalid text_config: {e}"),
        })
    }

    /// The text model's config of a vision-language checkpoint: `text_config` when the config
    /// nests one (`Qwen3_5ForConditionalGeneration`), else the whole config.
    pub fn parse_text<T: for<'de> Deserialize<'de>>(&self) -> Result<T> {
        let text = self.raw.get("text_config").unwrap_or(&self.raw);
        serde_json::from_value(text.clone()).map_err(|e| ModelError::Config {
            path: self.path.clone(),
            message: format!("invalid text_config: {e}"),
        })
    }
}

/// Size fields and the largest value any real checkpoint comes near (with room to spare).
const SIZES: &[(&str, i64)] = &[
    ("hidden_size", 1 << 18),
    ("num_hidden_layers", 1 << 12),
    ("num_attention_heads", 1 << 12),
    ("num_key_value_heads", 1 << 12),
    ("head_dim", 1 << 14),
    ("vocab_size", 1 << 24),
    ("linear_num_key_heads", 1 << 12),
    ("linear_num_value_heads", 1 << 12),
    ("linear_key_head_dim", 1 << 14),
    ("linear_value_head_dim", 1 << 14),
];

/// [`RawConfig::check_sizes`] on one object; `prefix` names where it sits (`text_config.`).
fn check_sizes(path: &Path, prefix: &str, v: &serde_json::Value) -> Result<()> {
    let err = |message: String| ModelError::Config {
        path: path.to_path_buf(),
        message,
    };
    // Present and not null; a value of the wrong type is left to the family's parser.
    let field = |k: &str| v.get(k).filter(|x| !x.is_null());
    for &(name, max) in SIZES {
        let Some(x) = field(name) else { continue };
        if !(x.is_i64() || x.is_u64()) {
            continue;
        }
        if !x.as_i64().is_some_and(|n| (1..=max).contains(&n)) {
            return Err(err(format!(
                "{prefix}{name} is {x}: it must be a positive integer no larger than {max}"
            )));
        }
    }
    let int = |k: &str| field(k).and_then(serde_json::Value::as_i64);
    if let (Some(heads), Some(kv)) = (int("num_attention_heads"), int("num_key_value_heads")) {
        if heads % kv != 0 {
            return Err(err(format!(
                "{prefix}num_attention_heads ({heads}) is not a multiple of \
                 {prefix}num_key_value_heads ({kv}): query heads share key/value heads evenly"
            )));
        }
    }
    if let (Some(hidden), Some(heads), None) = (
        int("hidden_size"),
        int("num_attention_heads"),
        field("head_dim"),
    ) {
        if hidden % heads != 0 {
            return Err(err(format!(
                "{prefix}hidden_size ({hidden}) is not a multiple of \
                 {prefix}num_attention_heads ({heads}), and there is no head_dim to say how \
                 wide a head is"
            )));
        }
    }
    Ok(())
}

/// mlx-lm's `quantization` section: defaults plus per-module overrides keyed by module path
/// (`{"group_size":64,"bits":4,"model.layers.0.mlp.down_proj":{"group_size":64,"bits":8}}`;
/// `false` leaves a module unquantized). `mode` is MLX's quantization mode (`affine` when absent);
/// as in `mlx.nn.quantize`, an override's mode does not inherit the default's, and a missing
/// group size or bit width takes the mode's own default.
#[derive(Debug, Clone, Default)]
pub struct QuantConfig {
    pub default: Option<QuantSpec>,
    overrides: HashMap<String, Option<QuantSpec>>,
}

/// `mlx.nn`'s `_defaults_for_mode`: (group size, bits).
fn mode_defaults(mode: QuantMode) -> (i32, i32) {
    match mode {
        QuantMode::Affine => (64, 4),
        QuantMode::Mxfp4 => (32, 4),
        QuantMode::Nvfp4 => (16, 4),
        QuantMode::Mxfp8 => (32, 8),
    }
}

/// One spec object; `field` names it in errors (`quantization` or `quantization.<module>`).
fn spec_of(path: &Path, field: &str, v: &serde_json::Value) -> Result<QuantSpec> {
    let err = |message: String| ModelError::Config {
        path: path.to_path_buf(),
        message,
    };
    let mode = match v.get("mode") {
        None | Some(serde_json::Value::Null) => QuantMode::Affine,
        Some(m) => {
            let name = m.as_str().unwrap_or_default();
            QuantMode::parse(name).ok_or_else(|| {
                let known: Vec<_> = QuantMode::ALL.iter().map(|m| m.name()).collect();
                err(format!(
                    "{field}.mode {m} is not a quantization mode MLX has (known: {})",
                    known.join(", ")
                ))
            })?
        }
    };
    let (group, bits) = mode_defaults(mode);
    let int = |k: &str, d: i32| -> Result<i32> {
        match v.get(k) {
            None | Some(serde_json::Value::Null) => Ok(d),
            Some(n) => n
                .as_i64()
                .filter(|n| (1..=1024).contains(n))
                .map(|n| n as i32)
                .ok_or_else(|| err(format!("{field}.{k} must be a positive integer, not {n}"))),
        }
    };
    let spec = QuantSpec {
        group_size: int("group_size", group)?,
        bits: int("bits", bits)?,
        mode,
    };
    let fits = match mode {
        QuantMode::Affine => (2..=8).contains(&spec.bits),
        QuantMode::Mxfp4 | QuantMode::Nvfp4 => spec.bits == 4,
        QuantMode::Mxfp8 => spec.bits == 8,
    };
    if !fits {
        return Err(err(format!(
            "{field}: {} bits is not a width of {} quantization",
            spec.bits,
            mode.name()
        )));
    }
    Ok(spec)
}

impl QuantConfig {
    fn parse(path: &Path, v: Option<&serde_json::Value>) -> Result<QuantConfig> {
        let Some(obj) = v.and_then(|v| v.as_object()) else {
            return Ok(QuantConfig::default());
        };
        let mut overrides = HashMap::new();
        for (k, v) in obj {
            if v.is_object() {
                overrides.insert(
                    k.clone(),
                    Some(spec_of(path, &format!("quantization.{k}"), v)?),
                );
            } else if v == &serde_json::Value::Bool(false) {
                overrides.insert(k.clone(), None);
            }
        }
        // Only per-module entries (a "quantization" of overrides alone) have no default.
        let whole = serde_json::Value::Object(obj.clone());
        let default = if obj.contains_key("bits") || obj.contains_key("group_size") {
            Some(spec_of(path, "quantization", &whole)?)
        } else {
            None
        };
        Ok(QuantConfig { default, overrides })
    }

    /// The spec for the module at `path`, if it is quantized.
    pub fn for_module(&self, path: &str) -> Option<QuantSpec> {
        match self.overrides.get(path) {
            Some(s) => *s,
            None => self.default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(raw: serde_json::Value) -> std::result::Result<(), String> {
        let cfg = RawConfig {
            path: PathBuf::from("m/config.json"),
            raw,
            model_type: "llama".into(),
            architectures: Vec::new(),
            quant: QuantConfig::default(),
        };
        cfg.check_sizes().map_err(|e| e.to_string())
    }

    fn base() -> serde_json::Value {
        serde_json::json!({"hidden_size": 128, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "num_hidden_layers": 3, "vocab_size": 1000})
    }

    /// Issue #20: these panicked the engine thread (divisions by zero, empty layer lists).
    #[test]
    fn issue_20_zero_and_absurd_sizes_name_the_field_and_file() {
        for (field, value) in [
            ("num_attention_heads", serde_json::json!(0)),
            ("hidden_size", serde_json::json!(0)),
            ("num_hidden_layers", serde_json::json!(0)),
            ("num_key_value_heads", serde_json::json!(-2)),
            ("vocab_size", serde_json::json!(1u64 << 40)),
        ] {
            let mut raw = base();
            raw[field] = value.clone();
            let e = sizes(raw).unwrap_err();
            assert!(e.contains(&format!("{field} is {value}")), "{e}");
            assert!(e.contains("m/config.json"), "{e}");
        }
        let mut nested = base();
        nested["text_config"] = serde_json::json!({"num_attention_heads": 0});
        let e = sizes(nested).unwrap_err();
        assert!(e.contains("text_config.num_attention_heads is 0"), "{e}");
    }

    #[test]
    fn issue_20_heads_that_do_not_divide_are_refused() {
        let mut raw = base();
        raw["num_attention_heads"] = 3.into();
        raw["num_key_value_heads"] = 3.into();
        let e = sizes(raw.clone()).unwrap_err();
        assert!(
            e.contains("hidden_size (128)") && e.contains("head_dim"),
            "{e}"
        );
        // An explicit head_dim need not divide the width (Qwen3, Gemma).
        raw["head_dim"] = 48.into();
        assert_eq!(sizes(raw.clone()), Ok(()));
        raw["num_key_value_heads"] = 2.into();
        let e = sizes(raw).unwrap_err();
        assert!(e.contains("num_key_value_heads (2)"), "{e}");
    }

    #[test]
    fn real_shapes_pass() {
        assert_eq!(sizes(base()), Ok(()));
        // Fields of other types are the family's to judge.
        let mut raw = base();
        raw["num_key_value_heads"] = serde_json::Value::Null;
        raw["head_dim"] = "wide".into();
        assert_eq!(sizes(raw), Ok(()));
    }
}
