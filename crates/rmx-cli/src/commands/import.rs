//! `rmx import <file.gguf>`: convert a GGUF model (llama.cpp's format) into an MLX-format
//! folder under `$RMX_HOME/models/<name>` and register `<name>` as a user alias, so every
//! command that takes a model name finds it. `rmx import <folder>` does the same for a
//! Qwen3.5/3.6 or Qwen3-Next checkpoint as the Hub ships it (rmx-models' checkpoint.rs), keeping the
//! multi-token-prediction head that `--speculative mtp` guesses with.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_store::{aliases::validate_alias_name, human_bytes, ModelHints};

use crate::cli::ImportArgs;
use crate::commands::pull::store;
use crate::progress::ImportProgress;

pub fn run(mut args: ImportArgs) -> Result<ExitCode> {
    let store = store()?;
    // A model pulled into the store (`rmx pull Qwen/Qwen3.5-9B`) is imported by its name: its
    // folder is the snapshot, named after the repo.
    let given = args.file.clone();
    if !args.file.exists() {
        if let Ok(info) = store.info(&args.file.to_string_lossy()) {
            if info.path.is_dir() {
                args.file = info.path;
            }
        }
    }
    let name = match &args.name {
        Some(n) => n.clone(),
        None if args.file != given => default_name_of(&given.to_string_lossy(), true)?,
        None => default_name(&args.file)?,
    };
    validate_alias_name(&name).context("choose another name with --name")?;
    if let Some(existing) = store.aliases()?.get(&name) {
        if !args.force {
            bail!(
                "`{name}` already names {} ({:?} alias); pass --force to replace it or --name to pick another",
                existing.repo,
                existing.source
            );
        }
    }
    let dir = store.imports_dir().join(&name);
    // Convert beside the final folder and rename at the end: an interrupted or failed import
    // never leaves a half-written model under a real name.
    let partial = store.imports_dir().join(format!(".{name}.partial"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("removing the leftover {}", partial.display()))?;
    }
    println!(
        "importing {} as {name} ({})",
        args.file.display(),
        args.quant
    );
    let mut progress = ImportProgress::new();
    let converted = if args.file.is_dir() {
        import_folder(&args, &partial, &mut progress)
    } else {
        args.quant
            .parse::<rmx_gguf::Quant>()
            .map_err(anyhow::Error::msg)
            .and_then(|quant| {
                rmx_gguf::convert(&args.file, &partial, quant, &mut progress)
                    .map_err(anyhow::Error::new)
            })
            .map(|s| Converted {
                what: format!("{} ({})", s.architecture, s.model_type),
                model_type: s.model_type.to_string(),
                bytes_written: s.bytes_written,
            })
    };
    let summary = match converted {
        Ok(s) => s,
        Err(e) => {
            progress.abandon();
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e.context(format!("converting {}", args.file.display())));
        }
    };
    // In place, then named. A folder without its alias is a model nobody can name or remove
    // (`rmx rm` goes by name): when the alias cannot be written, the import is undone, and a
    // model it replaces (--force) waits aside until then and comes back.
    let context_length = context_length(&partial);
    let aside = store.imports_dir().join(format!(".{name}.replaced"));
    let replaces = dir.exists();
    if replaces {
        if aside.exists() {
            std::fs::remove_dir_all(&aside)
                .with_context(|| format!("removing the leftover {}", aside.display()))?;
        }
        std::fs::rename(&dir, &aside)
            .with_context(|| format!("moving {} aside to replace it", dir.display()))?;
    }
    let registered = std::fs::rename(&partial, &dir)
        .with_context(|| format!("moving the converted model to {}", dir.display()))
        .and_then(|()| {
            let hints = ModelHints {
                context_length,
                ..ModelHints::guess(Some(&summary.model_type))
            };
            store
                .add_alias(&name, &dir.display().to_string(), hints)
                .with_context(|| format!("registering the name `{name}`"))
        });
    if let Err(e) = registered {
        let _ = std::fs::remove_dir_all(&partial);
        let _ = std::fs::remove_dir_all(&dir);
        if replaces {
            let _ = std::fs::rename(&aside, &dir);
        }
        return Err(e.context(format!(
            "importing {} failed; the converted model was removed",
            args.file.display()
        )));
    }
    if replaces {
        if let Err(e) = std::fs::remove_dir_all(&aside) {
            eprintln!(
                "rmx: warning: could not remove the replaced model at {}: {e}",
                aside.display()
            );
        }
    }
    println!(
        "imported {name}: {}, {} in {}",
        summary.what,
        human_bytes(summary.bytes_written),
        dir.display()
    );
    println!("try it: rmx run {name} \"Hello\"");
    Ok(ExitCode::SUCCESS)
}

/// What a conversion made, for the closing line and the alias's hints.
struct Converted {
    what: String,
    model_type: String,
    bytes_written: u64,
}

/// A checkpoint folder into `partial`: 4bit and 8bit quantize, bf16 keeps the stored floats
/// (the Hub's Qwen3.5 and Qwen3-Next checkpoints are bfloat16).
fn import_folder(
    args: &ImportArgs,
    partial: &Path,
    progress: &mut ImportProgress,
) -> Result<Converted> {
    let bits = match args.quant.as_str() {
        "4bit" => Some(4),
        "8bit" => Some(8),
        "bf16" => None,
        other => bail!("--quant {other} is for GGUF files; a checkpoint folder takes 4bit, 8bit or bf16 (its own floats)"),
    };
    let bytes = folder_bytes(&args.file);
    progress.start("checkpoint", bytes);
    let s =
        rmx_models::checkpoint::import_checkpoint(&args.file, partial, bits, |i, total, name| {
            progress.tensor(i, total, name, bytes * i as u64 / total.max(1) as u64)
        })?;
    let head = if s.mtp {
        ", with its MTP head"
    } else {
        ", no MTP head in it"
    };
    Ok(Converted {
        what: format!("{} checkpoint, {} tensors{head}", s.model_type, s.tensors),
        model_type: s.model_type,
        bytes_written: s.bytes_written,
    })
}

/// The bytes of a folder's weight files.
fn folder_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// `SmolLM2-135M-Instruct.Q4_1.gguf` -> `smollm2-135m-instruct-q4_1`: the file's stem (a
/// folder's whole name) in the characters alias names allow.
pub fn default_name(file: &Path) -> Result<String> {
    let stem = match file.is_dir() {
        true => file.file_name(),
        false => file.file_stem(),
    }
    .map(|s| s.to_string_lossy().to_lowercase())
    .unwrap_or_default();
    default_name_of(&stem, false).with_context(|| format!("`{}`", file.display()))
}

/// `stem` (a repo id's last part when `repo`) in the characters alias names allow.
fn default_name_of(stem: &str, repo: bool) -> Result<String> {
    let stem = match repo {
        true => stem.rsplit('/').next().unwrap_or(stem).to_lowercase(),
        false => stem.to_string(),
    };
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name = name
        .trim_matches(['-', '_'])
        .chars()
        .take(64)
        .collect::<String>();
    if name.is_empty() {
        bail!("cannot make a model name out of `{stem}`; pass --name");
    }
    Ok(name)
}

fn context_length(dir: &Path) -> Option<u64> {
    let text = std::fs::read(dir.join("config.json")).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let text_config = json.get("text_config").unwrap_or(&json);
    json.get("max_position_embeddings")
        .or_else(|| text_config.get("max_position_embeddings"))?
        .as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_are_valid_aliases() -> Result<()> {
        for (file, want) in [
            (
                "/x/SmolLM2-135M-Instruct.Q4_1.gguf",
                "smollm2-135m-instruct-q4_1",
            ),
            ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m-q4_k_m"),
            ("My Model (v2).gguf", "my-model-v2"),
        ] {
            let name = default_name(Path::new(file))?;
            assert_eq!(name, want);
            validate_alias_name(&name)?;
        }
        assert!(default_name(Path::new("---.gguf")).is_err());
        Ok(())
    }
}
