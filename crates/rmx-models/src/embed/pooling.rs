//! How a sentence-transformers model turns token states into one vector: the `Pooling` module's
//! `config.json` (mean, CLS or last token) and whether a `Normalize` module follows, as
//! `modules.json` lists them. Conversions that dropped these files get the family's default.

use std::path::Path;

use rmx_mlx::{Array, Dtype};
use serde::Deserialize;

use crate::error::{ModelError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// The average of the input's token states (its padding left out).
    Mean,
    /// The first token's state (`[CLS]`, `<s>`).
    Cls,
    /// The last token's state: decoder models, whose last token has seen the whole input.
    LastToken,
}

impl PoolMode {
    pub fn name(self) -> &'static str {
        match self {
            PoolMode::Mean => "mean",
            PoolMode::Cls => "cls",
            PoolMode::LastToken => "last token",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pooling {
    pub mode: PoolMode,
    /// L2-normalize the pooled vector (a `Normalize` module).
    pub normalize: bool,
}

#[derive(Deserialize)]
struct Module {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize, Default)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ModelError::Io {
                path: path.into(),
                source,
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::Config {
            path: path.into(),
            message: format!("not a sentence-transformers file rmx can read: {e}"),
        })
}

/// Whether `dir` is a sentence-transformers model: its `modules.json` lists a Pooling module.
pub fn is_sentence_transformer(dir: &Path) -> bool {
    read_json::<Vec<Module>>(&dir.join("modules.json"))
        .ok()
        .flatten()
        .is_some_and(|m| m.iter().any(|m| m.kind.ends_with(".Pooling")))
}

impl Pooling {
    /// The pooling `dir`'s sentence-transformers files declare, else `default`. A pooling mode
    /// rmx does not compute (max, mean-sqrt-len, weighted mean, or several at once) is an error
    /// rather than a quietly different vector.
    pub fn read(dir: &Path, default: Pooling) -> Result<Pooling> {
        let Some(modules) = read_json::<Vec<Module>>(&dir.join("modules.json"))? else {
            return Ok(default);
        };
        let normalize = modules.iter().any(|m| m.kind.ends_with(".Normalize"));
        let Some(pool) = modules.iter().find(|m| m.kind.ends_with(".Pooling")) else {
            return Ok(Pooling {
                normalize,
                ..default
            });
        };
        let path = dir.join(&pool.path).join("config.json");
        let Some(c) = read_json::<PoolingConfig>(&path)? else {
            return Ok(Pooling {
                normalize,
                ..default
            });
        };
        let unsupported = c.pooling_mode_max_tokens
            || c.pooling_mode_mean_sqrt_len_tokens
            || c.pooling_mode_weightedmean_tokens;
        let modes: Vec<PoolMode> = [
            (c.pooling_mode_mean_tokens, PoolMode::Mean),
            (c.pooling_mode_cls_token, PoolMode::Cls),
            (c.pooling_mode_lasttoken, PoolMode::LastToken),
        ]
        .into_iter()
        .filter_map(|(on, m)| on.then_some(m))
        .collect();
        match (unsupported, modes.as_slice()) {
            (false, [mode]) => Ok(Pooling {
                mode: *mode,
                normalize,
            }),
            (false, []) => Ok(Pooling {
                normalize,
                ..default
            }),
            _ => Err(ModelError::Config {
                path,
                message: "rmx pools by exactly one of mean, CLS or last token; this model asks \
                          for another pooling (max, mean-sqrt-len, weighted mean) or several"
                    .into(),
            }),
        }
    }

    /// One vector per row of `hidden` (`[B, L, D]`), in float32: `lens[b]` tokens of row `b`
    /// are real, the rest padding, on the right (`left_padded` false) or on the left.
    pub fn apply(&self, hidden: &Array, lens: &[usize], left_padded: bool) -> Result<Array> {
        let (b, l) = (hidden.dim(0), hidden.dim(1));
        let h = hidden.astype(Dtype::F32)?;
        let pooled = match self.mode {
            PoolMode::Mean => {
                let mut mask = vec![0f32; (b * l) as usize];
                for (row, &n) in lens.iter().enumerate() {
                    let start = if left_padded { l as usize - n } else { 0 };
                    let base = row * l as usize;
                    mask[base + start..base + start + n].fill(1.0);
                }
                let mask = Array::from_slice(&mask, &[b, l, 1])?;
                let sums = h.multiply(&mask)?.sum(&[1], false)?;
                let counts: Vec<f32> = lens.iter().map(|&n| (n as f32).max(1e-9)).collect();
                sums.divide(&Array::from_slice(&counts, &[b, 1])?)?
            }
            PoolMode::Cls | PoolMode::LastToken => {
                let idx: Vec<i32> = lens
                    .iter()
                    .map(|&n| match (self.mode, left_padded) {
                        (PoolMode::Cls, false) => 0,
                        (PoolMode::Cls, true) => l - n as i32,
                        (_, false) => n as i32 - 1,
                        (_, true) => l - 1,
                    })
                    .collect();
                let idx = Array::from_slice(&idx, &[b, 1, 1])?;
                h.take_along_axis(&idx, 1)?.reshape(&[b, hidden.dim(2)])?
            }
        };
        if !self.normalize {
            return Ok(pooled);
        }
        // sentence-transformers' Normalize: x / max(||x||, 1e-12)
        let norm = pooled
            .square()?
            .sum(&[-1], true)?
            .sqrt()?
            .maximum_scalar(1e-12)?;
        Ok(pooled.divide(&norm)?)
    }
}
