//! `rmx ps`: the models loaded in the daemon. No daemon, no models: it is not started for this.

use std::process::ExitCode;

use anyhow::Result;
use comfy_table::presets::NOTHING;
use comfy_table::Table;

use crate::cli::PsArgs;
use crate::daemon;

pub fn run(args: PsArgs) -> Result<ExitCode> {
    let ps = daemon::loaded()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&ps)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table.load_preset(NOTHING);
    table.set_header([
        "NAME",
        "SIZE",
        "PROCESSOR",
        "UNTIL",
        "CONTEXT",
        "RUNNING",
        "WAITING",
        "KV CACHE",
    ]);
    for m in &ps.models {
        table.add_row([
            m.name.clone(),
            rmx_store::human_bytes(m.size),
            match &m.split {
                Some(s) => format!(
                    "100% {}, {} ranks ({}, {})",
                    m.processor.to_uppercase(),
                    s.ranks,
                    s.mode,
                    s.backend
                ),
                None => format!("100% {}", m.processor.to_uppercase()),
            },
            m.until.clone(),
            m.context_length.map_or("-".to_string(), |c| c.to_string()),
            m.running.to_string(),
            m.waiting.to_string(),
            kv_cache(m),
        ]);
    }
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}

/// The running answers' KV caches: their size, and with `--kv-bits` what quantizing saved
/// ("12 MiB, 10 MiB saved").
fn kv_cache(m: &rmx_api::RunningModel) -> String {
    if m.kv_cache == 0 {
        return "-".into();
    }
    let size = rmx_store::human_bytes(m.kv_cache);
    match m.kv_cache_unquantized.checked_sub(m.kv_cache) {
        Some(saved) if saved > 0 => format!("{size}, {} saved", rmx_store::human_bytes(saved)),
        _ => size,
    }
}
