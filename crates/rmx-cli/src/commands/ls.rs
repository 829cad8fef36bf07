//! `rmx ls`: the models on this machine: everything in the Hugging Face cache (whoever
//! downloaded it) plus the local folders user aliases name (imported GGUF models among them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use comfy_table::{presets, ContentArrangement, Table};
use rmx_store::{human_bytes, ModelStatus, Quantization, Store, Unsupported};
use serde::Serialize;

use crate::cli::LsArgs;
use crate::commands::pull::store;

/// One row of `rmx ls` (and one object of `rmx ls --json`).
#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    /// The repo id, or `None` for a local folder.
    pub repo: Option<String>,
    /// Set for local folders.
    pub path: Option<PathBuf>,
    pub size: u64,
    pub quantization: Option<Quantization>,
    /// `bf16`, `float16`, ... when the weights are not quantized.
    pub dtype: Option<String>,
    /// Seconds since the Unix epoch.
    pub modified: u64,
    pub status: ModelStatus,
    /// Set when this rmx cannot load the model's family, with the reason.
    pub cannot_load: Option<Unsupported>,
    /// What the model does: "chat", "embedding" or "rerank" (`None` when its files cannot
    /// tell: a partial download).
    pub kind: Option<String>,
}

/// The kind of the model in `dir`, as the engine would judge it on load.
fn kind(dir: Option<&Path>) -> Option<String> {
    dir.and_then(rmx_engine::model_kind)
        .map(|k| k.name().to_string())
}

pub fn run(args: LsArgs) -> Result<ExitCode> {
    let rows = rows(&store()?)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no models yet: `rmx pull <name>` downloads one, `rmx models` lists the names");
        return Ok(ExitCode::SUCCESS);
    }
    let now = now();
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(["NAME", "REPO", "SIZE", "QUANT", "MODIFIED"]);
    for row in &rows {
        let mut size = human_bytes(row.size);
        if row.status == ModelStatus::Partial {
            size.push_str(" (partial)");
        }
        // The name stays the first word, for `awk '{print $1}'`.
        let mut name = row.name.clone();
        if row.cannot_load.is_some() {
            name.push_str(" (cannot load)");
        } else if let Some(k) = row.kind.as_deref().filter(|k| *k != "chat") {
            name.push_str(&format!(" ({k})"));
        }
        table.add_row([
            name,
            row.repo.clone().unwrap_or_else(|| "(local)".to_string()),
            size,
            quant_label(row.quantization.as_ref(), row.dtype.as_deref()),
            ago(now.saturating_sub(row.modified)),
        ]);
    }
    print_table(table);
    // Why, on stderr: the table on stdout stays one line per model for scripts.
    for row in &rows {
        if let Some(unsupported) = &row.cannot_load {
            eprintln!("{} cannot load: {unsupported}", row.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn rows(store: &Store) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for entry in store.list()? {
        // Only an unquantized model needs its dtype, read from config.json through `info`.
        let dtype = match (&entry.quantization, entry.status) {
            (None, ModelStatus::Complete) => {
                store.info(entry.repo.as_str()).ok().and_then(|i| i.dtype)
            }
            _ => None,
        };
        let dir = store
            .cache()
            .current_snapshot(&entry.repo)
            .ok()
            .flatten()
            .map(|(_, dir)| dir);
        rows.push(Row {
            kind: kind(dir.as_deref()),
            name: entry.name,
            repo: Some(entry.repo.to_string()),
            path: None,
            size: entry.size,
            quantization: entry.quantization,
            dtype,
            modified: entry.modified,
            status: entry.status,
            cannot_load: entry.cannot_load,
        });
    }
    for info in store.local_models()? {
        rows.push(Row {
            kind: kind(Some(&info.path)),
            name: info.name,
            repo: None,
            modified: modified(&info.path),
            size: info.size,
            quantization: info.quantization,
            dtype: info.dtype,
            path: Some(info.path),
            status: info.status,
            cannot_load: info.cannot_load,
        });
    }
    Ok(rows)
}

/// `4bit`, `mxfp4`, `bf16`, or `-` when the config does not say.
pub fn quant_label(q: Option<&Quantization>, dtype: Option<&str>) -> String {
    match (q, dtype) {
        (Some(q), _) => match q.mode.as_deref() {
            Some(mode) if mode != "affine" => mode.to_string(),
            _ => format!("{}bit", q.bits),
        },
        (None, Some("bfloat16")) => "bf16".to_string(),
        (None, Some("float16")) => "f16".to_string(),
        (None, Some("float32")) => "f32".to_string(),
        (None, Some(other)) => other.to_string(),
        (None, None) => "-".to_string(),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn modified(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `3 minutes ago`, as `ollama ls` says it.
pub fn ago(secs: u64) -> String {
    let (n, unit) = match secs {
        0..=59 => return "just now".to_string(),
        60..=3599 => (secs / 60, "minute"),
        3600..=86_399 => (secs / 3600, "hour"),
        86_400..=2_591_999 => (secs / 86_400, "day"),
        2_592_000..=31_535_999 => (secs / 2_592_000, "month"),
        _ => (secs / 31_536_000, "year"),
    };
    let s = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{s} ago")
}

/// Columns two spaces apart, flush left, no trailing blanks: what `ollama ls` looks like and
/// what `awk '{print $1}'` expects.
pub fn print_table(mut table: Table) {
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    for line in table.to_string().lines() {
        println!("{}", line.trim_end());
    }
}
