//! `rmx models`: the names rmx knows (built-in and user aliases), and which are on this
//! machine already.

use std::collections::HashSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use comfy_table::{presets, ContentArrangement, Table};
use rmx_store::{Alias, AliasSource, ModelStatus};
use serde::Serialize;

use crate::cli::ModelsArgs;
use crate::commands::ls::print_table;
use crate::commands::pull::store;

#[derive(Debug, Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    alias: &'a Alias,
    /// In the cache (complete) or, for a local folder, present.
    cached: bool,
}

pub fn run(args: ModelsArgs) -> Result<ExitCode> {
    let store = store()?;
    let complete: HashSet<String> = store
        .list()?
        .into_iter()
        .filter(|e| e.status == ModelStatus::Complete)
        .map(|e| e.repo.as_str().to_ascii_lowercase())
        .collect();
    let aliases = store.list_aliases()?;
    let rows: Vec<Row> = aliases
        .iter()
        .map(|alias| Row {
            cached: if Path::new(&alias.repo).is_absolute() {
                Path::new(&alias.repo).join("config.json").is_file()
            } else {
                complete.contains(&alias.repo.to_ascii_lowercase())
            },
            alias,
        })
        .filter(|r| !args.cached || r.cached)
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no aliases of models on this machine: `rmx pull <name>` downloads one");
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(["NAME", "REPO", "CONTEXT", "TOOLS", "REASONING", "LOCAL"]);
    for row in &rows {
        let a = row.alias;
        let mut name = a.name.clone();
        if a.source == AliasSource::User {
            name.push_str(" (user)");
        }
        table.add_row([
            name,
            a.repo.clone(),
            a.hints
                .context_length
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            plain(&a.hints.tool_parser),
            plain(&a.hints.reasoning_parser),
            if row.cached { "yes" } else { "" }.to_string(),
        ]);
    }
    print_table(table);
    Ok(ExitCode::SUCCESS)
}

/// The name serde gives a unit variant (`hermes`, `llama3_json`, ...), as the alias files
/// spell it.
pub fn plain<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) if s != "none" => s,
        _ => "-".to_string(),
    }
}
