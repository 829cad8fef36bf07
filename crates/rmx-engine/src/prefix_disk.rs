//! Hot prompt prefixes kept on disk, so a restarted daemon answers a known system prompt (an
//! agent's instructions and tool schemas) without reading it again.
//!
//! A prefix is hot once the prefix cache has served it: then its entry is written under
//! `<rmx home>/prefixes/<model key>/` as a safetensors file (each layer's keys and values, or
//! its recurrent state) whose metadata holds the format, the model key and the tokens. The model
//! key hashes config.json and each weight file's name, size and modification time, so files of
//! another model, or of the same folder after its weights changed, are never offered. The folder
//! is kept under its byte budget (`RMX_PREFIX_DISK_MB`, default 4096; 0 turns it off), oldest
//! files out first. A file that cannot be read or does not fit the model (truncated, corrupt,
//! foreign) is skipped with a line on stderr; nothing in it is used.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rmx_models::{CausalLm, LayerCache};
use sha2::{Digest, Sha256};

use crate::prefix_cache::{best_match, Candidate};

const FORMAT: &str = "rmx-prefix-1";
/// The budget when `RMX_PREFIX_DISK_MB` is not set.
pub(crate) const DEFAULT_BUDGET_MB: u64 = 4096;
/// Prefixes shorter than this are cheaper to read again than to load.
pub const MIN_TOKENS: usize = 64;

struct DiskEntry {
    tokens: Vec<u32>,
    path: PathBuf,
    bytes: u64,
    trimmable: bool,
}

pub struct PrefixDisk {
    dir: PathBuf,
    key: String,
    budget: u64,
    entries: Vec<DiskEntry>,
}

/// The model key: config.json's bytes and each weight file's name, size and modification time.
pub fn model_key(model_dir: &Path) -> Option<String> {
    let mut h = Sha256::new();
    h.update(std::fs::read(model_dir.join("config.json")).ok()?);
    let mut files: Vec<_> = std::fs::read_dir(model_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
        .collect();
    files.sort_by_key(|e| e.file_name());
    for f in files {
        let meta = f.metadata().ok()?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        h.update(f.file_name().to_string_lossy().as_bytes());
        h.update(meta.len().to_le_bytes());
        h.update(mtime.to_le_bytes());
    }
    Some(
        h.finalize()
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// A safetensors file's metadata, read from its header alone; `None` when the header is not
/// whole or the file is shorter than its tensors say.
fn read_metadata(path: &Path) -> Option<serde_json::Map<String, serde_json::Value>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let total = f.metadata().ok()?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len).ok()?;
    let n = u64::from_le_bytes(len);
    if n > 100 << 20 || 8 + n > total {
        return None;
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).ok()?;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).ok()?;
    let data_end = header
        .values()
        .filter_map(|t| t.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    if 8 + n + data_end > total {
        return None;
    }
    header.get("__metadata__")?.as_object().cloned()
}

fn parse_tokens(s: &str) -> Option<Vec<u32>> {
    s.split(',').map(|t| t.parse().ok()).collect()
}

impl PrefixDisk {
    /// The store of `model_dir`'s prefixes under `root`, with the files already there indexed.
    /// `None` when the budget is 0 or the folder cannot be made.
    pub fn open(root: &Path, model_dir: &Path, budget: u64) -> Option<PrefixDisk> {
        if budget == 0 {
            return None;
        }
        let key = model_key(model_dir)?;
        let dir = root.join(&key);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("rmx: prefixes are not kept on disk: {}: {e}", dir.display());
            return None;
        }
        let mut entries = Vec::new();
        for e in std::fs::read_dir(&dir).ok()?.filter_map(|e| e.ok()) {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "safetensors") {
                continue;
            }
            let entry = read_metadata(&path).and_then(|m| {
                let field = |k: &str| m.get(k).and_then(|v| v.as_str());
                if field("format")? != FORMAT || field("model")? != key {
                    return None;
                }
                Some(DiskEntry {
                    tokens: parse_tokens(field("tokens")?)?,
                    bytes: e.metadata().ok()?.len(),
                    trimmable: field("trimmable")? == "true",
                    path: path.clone(),
                })
            });
            match entry {
                Some(d) if !d.tokens.is_empty() => entries.push(d),
                _ => eprintln!(
                    "rmx: ignoring {}: not a prefix file of this model, or cut short",
                    path.display()
                ),
            }
        }
        Some(PrefixDisk {
            dir,
            key,
            budget,
            entries,
        })
    }

    /// Whether a file already holds exactly these tokens.
    pub fn has(&self, tokens: &[u32]) -> bool {
        self.entries.iter().any(|e| e.tokens == tokens)
    }

    fn best(&self, prompt: &[u32]) -> Option<(usize, usize)> {
        let candidates: Vec<Candidate> = self
            .entries
            .iter()
            .map(|e| Candidate {
                tokens: &e.tokens,
                trimmable: e.trimmable,
                last_used: 0,
            })
            .collect();
        best_match(&candidates, prompt)
    }

    /// How many of `prompt`'s tokens a stored prefix would serve, without loading it.
    pub fn usable(&self, prompt: &[u32]) -> usize {
        self.best(prompt).map_or(0, |(_, n)| n)
    }

    /// The stored prefix that serves the most of `prompt`, loaded: its tokens and cache (of all
    /// its tokens, for the prefix cache to cut).
    pub fn lookup(
        &mut self,
        model: &dyn CausalLm,
        prompt: &[u32],
    ) -> Option<(Vec<u32>, Vec<LayerCache>)> {
        let (i, _) = self.best(prompt)?;
        match self.load(model, i) {
            Some(cache) => Some((self.entries[i].tokens.clone(), cache)),
            None => {
                let e = self.entries.swap_remove(i);
                eprintln!(
                    "rmx: ignoring {}: its tensors do not fit this model",
                    e.path.display()
                );
                let _ = std::fs::remove_file(&e.path);
                None
            }
        }
    }

    fn load(&self, model: &dyn CausalLm, i: usize) -> Option<Vec<LayerCache>> {
        let e = &self.entries[i];
        let mut t = rmx_mlx::io::load_safetensors(&e.path).ok()?;
        let offset = e.tokens.len() as i32;
        let fresh = model.make_cache();
        let mut out = Vec::with_capacity(fresh.len());
        for (l, like) in fresh.iter().enumerate() {
            let mut part = |name: &str| {
                let key = format!("l{l}.{name}");
                let at = t.tensors.iter().position(|(n, _)| *n == key)?;
                Some(t.tensors.swap_remove(at).1)
            };
            out.push(LayerCache::from_saved(like, &mut part, offset).ok()??);
        }
        let state: Vec<&rmx_mlx::Array> = out.iter().flat_map(|c| c.state()).collect();
        rmx_mlx::eval(&state).ok()?;
        // Touch it: the budget drops the least recently used files first.
        let _ = std::fs::File::options()
            .append(true)
            .open(&e.path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        Some(out)
    }

    /// Writes an entry (a cache that has read exactly `tokens`), replacing files it makes
    /// redundant, then keeps the folder under its budget.
    pub fn save(&mut self, tokens: &[u32], cache: &[LayerCache]) {
        if tokens.len() < MIN_TOKENS || self.has(tokens) {
            return;
        }
        let mut named = Vec::new();
        for (l, c) in cache.iter().enumerate() {
            match c.saved_parts() {
                Ok(Some(parts)) => {
                    named.extend(parts.into_iter().map(|(n, a)| (format!("l{l}.{n}"), a)))
                }
                _ => return,
            }
        }
        let trimmable = cache.iter().all(LayerCache::is_trimmable);
        let text: Vec<String> = tokens.iter().map(u32::to_string).collect();
        let text = text.join(",");
        let name = {
            let mut h = Sha256::new();
            h.update(text.as_bytes());
            let d = h.finalize();
            d.iter()
                .take(12)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let path = self.dir.join(format!("{name}.safetensors"));
        // Written under its final name in a side folder, which the index never reads: MLX's
        // writer adds ".safetensors" to a name without it, so a "{name}.tmp" became
        // "{name}.tmp.safetensors" and its rename failed ("could not keep a prefix on disk").
        let side = self.dir.join("writing");
        let tmp = side.join(format!("{name}.safetensors"));
        let refs: Vec<(&str, &rmx_mlx::Array)> =
            named.iter().map(|(n, a)| (n.as_str(), a)).collect();
        let trim = if trimmable { "true" } else { "false" };
        let meta = [
            ("format", FORMAT),
            ("model", self.key.as_str()),
            ("tokens", text.as_str()),
            ("trimmable", trim),
        ];
        // Written aside and renamed, so a crash or a full disk never leaves half a file under
        // the real name.
        if let Err(e) = std::fs::create_dir_all(&side)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                rmx_mlx::io::save_safetensors(&tmp, &refs, &meta).map_err(|e| e.to_string())
            })
            .and_then(|()| std::fs::rename(&tmp, &path).map_err(|e| e.to_string()))
        {
            let _ = std::fs::remove_file(&tmp);
            eprintln!("rmx: could not keep a prefix on disk: {e}");
            return;
        }
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        self.entries.retain(|e| {
            let redundant = trimmable && e.trimmable && tokens.starts_with(&e.tokens);
            if redundant {
                let _ = std::fs::remove_file(&e.path);
            }
            !redundant
        });
        self.entries.push(DiskEntry {
            tokens: tokens.to_vec(),
            path,
            bytes,
            trimmable,
        });
        self.shrink();
    }

    /// Drops the least recently used files while over the budget.
    fn shrink(&mut self) {
        let used = |es: &[DiskEntry]| es.iter().map(|e| e.bytes).sum::<u64>();
        while used(&self.entries) > self.budget && !self.entries.is_empty() {
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| {
                    std::fs::metadata(&e.path)
                        .and_then(|m| m.modified())
                        .unwrap_or(SystemTime::UNIX_EPOCH)
                })
                .map(|(i, _)| i);
            if let Some(i) = oldest {
                let e = self.entries.swap_remove(i);
                let _ = std::fs::remove_file(&e.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_short_or_foreign_file_has_no_metadata_to_trust() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("a.safetensors");
        let k = rmx_mlx::Array::from_slice(&[1.0f32; 8], &[1, 1, 2, 4]).unwrap();
        rmx_mlx::io::save_safetensors(&good, &[("l0.k", &k)], &[("format", FORMAT)]).unwrap();
        let meta = read_metadata(&good).expect("a whole file");
        assert_eq!(meta["format"], FORMAT);
        let bytes = std::fs::read(&good).unwrap();
        let cut = dir.path().join("b.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 4]).unwrap();
        assert!(read_metadata(&cut).is_none());
        let junk = dir.path().join("c.safetensors");
        std::fs::write(&junk, b"not a safetensors file at all").unwrap();
        assert!(read_metadata(&junk).is_none());
        assert_eq!(parse_tokens("1,2,30"), Some(vec![1, 2, 30]));
        assert_eq!(parse_tokens("1,x"), None);
    }
}
