//! What `rmx launch -- rmx doctor` compares between the ranks of a group: each rank's rmx and
//! MLX versions, its backends, and (asked for a model folder) that folder's fingerprint. Rank 0
//! asks with a control word ([`crate::group::GroupLead::checkup`]); every rank answers with one
//! `all_gather` of a fixed-size record (JSON, zero-padded), so ranks whose rmx versions differ
//! still meet in the same collective and are told apart by their records, as long as each rmx
//! knows this word (an rmx from before it ends its rank on a word it cannot read).

use std::path::Path;

use rmx_mlx::distributed::Group;
use rmx_mlx::Array;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

/// The bytes each rank's record takes in the gather: its JSON, padded with zeros. Fixed (and a
/// multiple of 4), so that the gather needs no agreement on sizes first.
const RECORD_BYTES: usize = 1024;

/// One rank's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RankReport {
    pub rank: i32,
    pub host: String,
    pub rmx_version: String,
    pub mlx_version: String,
    /// The device backend the rank computes on (cpu, cuda, metal).
    pub device: String,
    /// The communication backend of the group (ring, nccl, ...).
    pub comm: String,
    /// The model folder's fingerprint ([`model_fingerprint`]), when a model was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the model folder could not be fingerprinted on this rank (missing, unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_error: Option<String>,
}

impl RankReport {
    /// This process's record, as rank `group.rank()` of `group`.
    pub fn here(group: &Group, model: Option<&Path>) -> RankReport {
        let (model, model_error) = match model.map(model_fingerprint) {
            None => (None, None),
            Some(Ok(f)) => (Some(f), None),
            Some(Err(e)) => (None, Some(e)),
        };
        RankReport {
            rank: group.rank(),
            host: hostname(),
            rmx_version: env!("CARGO_PKG_VERSION").to_string(),
            mlx_version: rmx_mlx::mlx_version(),
            device: rmx_mlx::backend().name().to_string(),
            comm: group.backend().name().to_string(),
            model,
            model_error,
        }
    }
}

/// Every rank's record, in rank order (every rank of the group calls it).
pub fn gather(group: &Group, mine: &RankReport) -> Result<Vec<RankReport>> {
    let mut bytes = serde_json::to_vec(mine)
        .map_err(|e| EngineError::Invalid(format!("a rank's record: {e}")))?;
    if bytes.len() > RECORD_BYTES {
        // Only a very long host name or error gets here: keep the record, lose the error text.
        let short = RankReport {
            model_error: mine
                .model_error
                .as_ref()
                .map(|_| "(too long to send)".into()),
            host: mine.host.chars().take(64).collect(),
            ..mine.clone()
        };
        bytes = serde_json::to_vec(&short)
            .map_err(|e| EngineError::Invalid(format!("a rank's record: {e}")))?;
    }
    bytes.resize(RECORD_BYTES, 0);
    // Gathered as int32, the type the load's agreement gathers (group.rs), which every backend
    // (nccl included, as run on GPUs) moves.
    let words: Vec<i32> = bytes
        .chunks(4)
        .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let all: Vec<u8> = group
        .all_gather(&Array::from_slice(&words, &[1, words.len() as i32])?)?
        .to_vec::<i32>()?
        .into_iter()
        .flat_map(i32::to_le_bytes)
        .collect();
    all.chunks(RECORD_BYTES)
        .enumerate()
        .map(|(rank, record)| {
            let end = record.iter().position(|&b| b == 0).unwrap_or(record.len());
            serde_json::from_slice(&record[..end]).map_err(|e| {
                EngineError::Invalid(format!(
                    "rank {rank} sent a record this rmx cannot read ({e}): it runs another rmx \
                     version; install the same rmx on every machine"
                ))
            })
        })
        .collect()
}

/// SHA-256 (first 16 hex digits) over a model folder's files, by name: the `.safetensors`
/// weights by their sizes (reading them whole would take as long as loading the model), every
/// other file (config.json, the tokenizer's files, the chat template) by its content. The load's
/// own agreement (group.rs) looks at less: config.json and the weights' names and sizes.
pub fn model_fingerprint(dir: &Path) -> std::result::Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<(String, std::path::PathBuf)> = entries
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.file_name().to_string_lossy().to_string(), e.path()))
        .collect();
    if files.is_empty() {
        return Err(format!("{} holds no files", dir.display()));
    }
    files.sort();
    let mut h = Sha256::new();
    for (name, path) in files {
        h.update(name.as_bytes());
        h.update([0]);
        if name.ends_with(".safetensors") {
            let size = std::fs::metadata(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .len();
            h.update(size.to_le_bytes());
        } else {
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
    }
    Ok(h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// This machine's name, for the table's rows (ranks on several machines).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_sees_weight_sizes_and_other_files_contents() {
        let dir = tempfile::tempdir().expect("temp dir");
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at("config.json"), "{}").expect("write");
        std::fs::write(at("tokenizer.json"), "{\"a\": 1}").expect("write");
        std::fs::write(at("model.safetensors"), [0u8; 16]).expect("write");
        let a = model_fingerprint(dir.path()).expect("fingerprint");
        assert_eq!(a.len(), 16);
        assert_eq!(Ok(a.clone()), model_fingerprint(dir.path()));
        // Same size, other bytes: the weights are not read.
        std::fs::write(at("model.safetensors"), [1u8; 16]).expect("write");
        assert_eq!(Ok(a.clone()), model_fingerprint(dir.path()));
        std::fs::write(at("model.safetensors"), [0u8; 17]).expect("write");
        let b = model_fingerprint(dir.path()).expect("fingerprint");
        assert_ne!(a, b);
        std::fs::write(at("tokenizer.json"), "{\"a\": 2}").expect("write");
        assert_ne!(b, model_fingerprint(dir.path()).expect("fingerprint"));
        let missing = model_fingerprint(&at("nope")).expect_err("no folder");
        assert!(missing.contains("nope"), "{missing}");
    }
}
