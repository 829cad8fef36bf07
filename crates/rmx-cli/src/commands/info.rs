//! `rmx info <name>`: what a model is (from its files) and whether it fits this machine; and,
//! when a running daemon has it loaded, its kinds of layer and how a decode step runs each.

use std::process::ExitCode;

use anyhow::Result;
use rmx_store::{human_bytes, ModelInfo, ModelStatus, ReasoningParser, ToolParser};
use serde::Serialize;

use crate::cli::InfoArgs;
use crate::commands::ls::quant_label;
use crate::commands::pull::store;
use crate::daemon;

/// Memory beyond the weights a model needs to run a short conversation (activations, a KV
/// cache of a few thousand tokens, MLX's buffers): a rule of thumb, not a measurement.
const OVERHEAD: f64 = 1.2;

#[derive(Debug, Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    model: &'a ModelInfo,
    memory: Option<Fit>,
    /// While a daemon has it loaded: its layer kinds and how each runs (as `rmx ps --json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    layers: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Fit {
    /// Bytes the model needs, by the rule of thumb above.
    pub needed: u64,
    /// Bytes this machine can give it: MemAvailable on Linux, physical memory on macOS
    /// (unified memory, which the GPU shares).
    pub available: u64,
    pub total: u64,
    pub fits: bool,
}

pub fn run(args: InfoArgs) -> Result<ExitCode> {
    let info = store()?.info(&args.model)?;
    let fit = memory().map(|(total, available)| {
        let needed = (weights_size(&info) as f64 * OVERHEAD) as u64;
        Fit {
            needed,
            available,
            total,
            fits: needed <= available,
        }
    });
    let layers = loaded_layers(&info);
    if args.json {
        let out = Output {
            model: &info,
            memory: fit,
            layers,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render(&info, fit, layers.as_deref()));
    Ok(ExitCode::SUCCESS)
}

/// The layer kinds a running daemon reports for this model while it is loaded; `None` without
/// a daemon (it is not started for this), or when the model is not loaded or does not answer.
fn loaded_layers(info: &ModelInfo) -> Option<Vec<String>> {
    let ps = daemon::loaded().ok()?;
    let path = info
        .path
        .canonicalize()
        .unwrap_or_else(|_| info.path.clone());
    ps.models
        .into_iter()
        .find(|m| {
            m.name == info.name
                || std::path::Path::new(&m.path)
                    .canonicalize()
                    .is_ok_and(|p| p == path)
        })
        .map(|m| m.layers)
        .filter(|l| !l.is_empty())
}

fn weights_size(info: &ModelInfo) -> u64 {
    info.files
        .iter()
        .filter(|f| f.name.ends_with(".safetensors"))
        .map(|f| f.size)
        .sum()
}

pub fn render(info: &ModelInfo, fit: Option<Fit>, layers: Option<&[String]>) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: String| out.push_str(&format!("  {key:<18}{value}\n"));
    line("name", info.name.clone());
    match &info.repo {
        Some(repo) => line("repo", repo.to_string()),
        None => line("repo", "(local folder)".to_string()),
    }
    if let Some(commit) = &info.commit {
        line("commit", commit.clone());
    }
    line("path", info.path.display().to_string());
    line("architecture", or_dash(info.architecture.clone()));
    line("family", or_dash(info.model_type.clone()));
    if let Some(unsupported) = &info.cannot_load {
        line("cannot load", unsupported.to_string());
    }
    line("parameters", or_dash(info.parameters.map(human_count)));
    let quant = match &info.quantization {
        Some(q) => {
            let mut s = quant_label(Some(q), None);
            if let Some(g) = q.group_size {
                s.push_str(&format!(" (group size {g})"));
            }
            s
        }
        None => format!("none ({})", quant_label(None, info.dtype.as_deref())),
    };
    line("quantization", quant);
    if info.mtp_head {
        line("speculation", "its own MTP head (--speculative mtp)".into());
    }
    line(
        "context length",
        or_dash(info.context_length.map(|c| c.to_string())),
    );
    line(
        "tool calls",
        tool_parser(info.hints.tool_parser).to_string(),
    );
    line(
        "reasoning",
        reasoning_parser(info.hints.reasoning_parser).to_string(),
    );
    line(
        "chat template",
        if info.chat_template {
            "yes"
        } else {
            "no (raw completion only)"
        }
        .to_string(),
    );
    if info.takes_images {
        line(
            "vision",
            "takes images (chat image parts, Anthropic image blocks, Ollama images, `rmx run \
             --image`)"
                .to_string(),
        );
    } else if info.vision_tower {
        line(
            "vision",
            "not loaded: image input is not supported for these files (the text model runs)"
                .to_string(),
        );
    }
    if let Some(kinds) = layers {
        // One kind a line: "24× linear attention (...) + dense (one CUDA launch)" is long.
        for (i, kind) in kinds.iter().enumerate() {
            line(if i == 0 { "layers (loaded)" } else { "" }, kind.clone());
        }
    }
    let mut status = human_bytes(info.size);
    if info.status == ModelStatus::Partial {
        status.push_str(" (partial: `rmx pull` finishes it)");
    }
    line("disk size", status);
    if let Some(fit) = fit {
        let verdict = if fit.fits { "yes" } else { "no" };
        line(
            "fits in memory",
            format!(
                "{verdict}: needs about {}, {} of {} available",
                human_bytes(fit.needed),
                human_bytes(fit.available),
                human_bytes(fit.total)
            ),
        );
    }
    out.push_str("  files\n");
    for f in &info.files {
        out.push_str(&format!("    {:<36}{:>10}\n", f.name, human_bytes(f.size)));
    }
    out
}

fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".to_string())
}

/// `135M`, `1.2B`, as model cards say it.
pub fn human_count(n: u64) -> String {
    match n {
        0..=999_999 => format!("{:.1}K", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.0}M", n as f64 / 1e6),
        _ => format!("{:.1}B", n as f64 / 1e9),
    }
}

fn tool_parser(p: ToolParser) -> &'static str {
    match p {
        ToolParser::Hermes => "hermes (<tool_call> JSON)",
        ToolParser::Qwen3Coder => "qwen3-coder (XML)",
        ToolParser::Llama3Json => "llama3 (bare JSON)",
        ToolParser::Mistral => "mistral ([TOOL_CALLS])",
        ToolParser::Gemma => "gemma",
        ToolParser::Gemma4 => "gemma4",
        ToolParser::Harmony => "harmony",
        ToolParser::None => "none",
    }
}

fn reasoning_parser(p: ReasoningParser) -> &'static str {
    match p {
        ReasoningParser::Think => "think (<think> tags)",
        ReasoningParser::Harmony => "harmony (analysis channel)",
        ReasoningParser::None => "none",
    }
}

/// (total, available) bytes of memory, or `None` where rmx cannot tell.
pub fn memory() -> Option<(u64, u64)> {
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        return parse_meminfo(&text);
    }
    // macOS: unified memory; the GPU may use most of it.
    let out = std::process::Command::new("sysctl")
        .args(["-n", "hw.memsize"])
        .output()
        .ok()?;
    let total = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some((total, total))
}

fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kb| kb * 1024)
    };
    let total = field("MemTotal:")?;
    Some((total, field("MemAvailable:").unwrap_or(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo() {
        let text = "MemTotal:       16384000 kB\nMemFree:  1 kB\nMemAvailable:    8192000 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some((16_384_000 * 1024, 8_192_000 * 1024))
        );
    }

    #[test]
    fn counts_read_like_model_cards() {
        assert_eq!(human_count(134_515_008), "135M");
        assert_eq!(human_count(1_235_814_400), "1.2B");
    }
}
