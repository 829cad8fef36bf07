//! `rmx alias add|rm|ls`: the user's own short names, kept in `$RMX_HOME/aliases.toml` (a
//! user alias overrides a built-in one of the same name).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use comfy_table::{presets, ContentArrangement, Table};
use rmx_store::{AliasSource, ModelHints};

use crate::cli::{AliasAddArgs, AliasCommand};
use crate::commands::ls::print_table;
use crate::commands::models::plain;
use crate::commands::pull::store;

pub fn run(cmd: AliasCommand) -> Result<ExitCode> {
    match cmd {
        AliasCommand::Add(args) => add(args),
        AliasCommand::Rm { name } => {
            let store = store()?;
            store.remove_alias(&name)?;
            println!("removed alias {name}");
            Ok(ExitCode::SUCCESS)
        }
        AliasCommand::Ls { json } => ls(json),
    }
}

fn add(args: AliasAddArgs) -> Result<ExitCode> {
    let store = store()?;
    // A folder is stored absolute, so the alias works from any working directory.
    let target = if looks_like_path(&args.target) {
        let path = std::fs::canonicalize(&args.target)
            .with_context(|| format!("`{}` is not a folder rmx can read", args.target))?;
        if !path.join("config.json").is_file() {
            bail!(
                "`{}` is not a model folder (it has no config.json)",
                path.display()
            );
        }
        path.display().to_string()
    } else {
        args.target.clone()
    };
    let alias = store.add_alias(
        &args.name,
        &target,
        ModelHints {
            tool_parser: args.tool_parser.unwrap_or_default(),
            reasoning_parser: args.reasoning_parser.unwrap_or_default(),
            context_length: args.context_length,
            kv_bits: args.kv.settings().map(|s| s.0),
            kv_group_size: args.kv.settings().map(|s| s.1),
            kv_quant_start: args.kv.settings().map(|s| s.2),
            speculative: args.spec.speculative.clone(),
            draft_tokens: args.spec.draft_tokens,
        },
    )?;
    println!("{} -> {}", alias.name, alias.repo);
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn looks_like_path(target: &str) -> bool {
    target.starts_with(['/', '.', '~']) || Path::new(target).is_dir()
}

fn ls(json: bool) -> Result<ExitCode> {
    let aliases = store()?.list_aliases()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&aliases)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(["NAME", "TARGET", "SOURCE", "TOOLS", "REASONING", "CONTEXT"]);
    for a in &aliases {
        table.add_row([
            a.name.clone(),
            a.repo.clone(),
            match a.source {
                AliasSource::Builtin => "built-in",
                AliasSource::User => "user",
            }
            .to_string(),
            plain(&a.hints.tool_parser),
            plain(&a.hints.reasoning_parser),
            a.hints
                .context_length
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    print_table(table);
    Ok(ExitCode::SUCCESS)
}
