//! `rmx agents`: which coding agents are installed and pointed at rmx, and `--setup` to point
//! one at the local daemon (showing the diff, asking first, keeping a backup).

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::agents::{self, edit, Env, Integration, Target};
use crate::cli::AgentsArgs;

/// The model a setup names when `--model` is not given and `RMX_MODEL` is not set.
const DEFAULT_MODEL: &str = "qwen3-4b-4bit";

pub fn run(args: AgentsArgs) -> Result<ExitCode> {
    let env = Env::from_process();
    let target = target(args.model.clone());
    let Some(name) = args.name.as_deref() else {
        if args.setup || args.restore {
            bail!("name the tool: rmx agents <name> --setup (see `rmx agents` for the names)");
        }
        list(&env, &target);
        return Ok(ExitCode::SUCCESS);
    };
    let Some(integration) = agents::find(name) else {
        let names: Vec<_> = agents::all().iter().map(|i| i.name).collect();
        bail!("unknown tool {name:?}; rmx knows: {}", names.join(", "));
    };
    let file = (integration.config_path)(&env)
        .context("HOME is not set, so the tool's config file cannot be found")?;
    if args.restore {
        edit::restore(&file)?;
        println!("restored {} from its backup", file.display());
        return Ok(ExitCode::SUCCESS);
    }
    if !args.setup {
        show(integration, &env, &target);
        return Ok(ExitCode::SUCCESS);
    }
    let target = served_name(target, args.dry_run)?;
    setup(integration, &file, &target, &args)
}

/// A model named by its folder gets a name the daemon serves over HTTP: requests over TCP may
/// name only stored models, aliases and folders under RMX_MODEL_ROOTS (a page or another
/// user's client must not read arbitrary folders), so an agent configured with a bare folder
/// would get a 404 on its first request. An alias already naming the folder is used; else one
/// named after the folder is added (`-2`, `-3`, ... when that name is taken).
fn served_name(mut t: Target, dry_run: bool) -> Result<Target> {
    if !super::alias::looks_like_path(&t.model) {
        return Ok(t);
    }
    let path = std::fs::canonicalize(&t.model)
        .with_context(|| format!("`{}` is not a folder rmx can read", t.model))?;
    if !path.join("config.json").is_file() {
        bail!(
            "`{}` is not a model folder (it has no config.json)",
            path.display()
        );
    }
    let store = super::pull::store()?;
    let aliases = store.aliases()?;
    let folder = path.display().to_string();
    if let Some(a) = aliases.all().into_iter().find(|a| a.repo == folder) {
        println!("using the alias `{}` for {folder}", a.name);
        t.model = a.name.clone();
        return Ok(t);
    }
    let stem: String = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let stem = if stem.trim_matches('-').is_empty() {
        "local-model".to_string()
    } else {
        stem
    };
    let name = (1..)
        .map(|i| {
            if i == 1 {
                stem.clone()
            } else {
                format!("{stem}-{i}")
            }
        })
        .find(|n| aliases.get(n).is_none())
        .expect("some suffix is free");
    if dry_run {
        println!("(dry run: would add the alias `{name}` -> {folder}, which the daemon serves over HTTP)");
    } else {
        // Agents call tools: the family's formats, as the daemon guesses them for a folder
        // (an alias's own hints win over the guess, so none would mean no tool calls).
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.join("config.json"))?).unwrap_or_default();
        let hints = rmx_store::ModelHints::guess(config["model_type"].as_str());
        store.add_alias(&name, &folder, hints)?;
        println!("added the alias `{name}` -> {folder}: the daemon serves folders over HTTP only by a name");
    }
    t.model = name;
    Ok(t)
}

fn target(model: Option<String>) -> Target {
    use rmx_settings::{var, EnvVars};
    let addr = rmx_api::home::default_http_addr();
    // A daemon listening on every interface is still reached on loopback from here.
    let addr = addr
        .strip_prefix("0.0.0.0:")
        .map(|port| format!("127.0.0.1:{port}"))
        .unwrap_or(addr);
    Target {
        root: format!("http://{addr}"),
        model: model
            .or_else(|| var(EnvVars::RMX_MODEL))
            .unwrap_or_else(|| DEFAULT_MODEL.to_string()),
        api_key_env: var(EnvVars::RMX_API_KEY).is_some(),
    }
}

fn status(i: &Integration, env: &Env, t: &Target) -> (bool, bool, Option<std::path::PathBuf>) {
    let file = (i.config_path)(env);
    let configured = file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .is_some_and(|text| (i.configured)(&text, t));
    let installed = i.binaries.iter().any(|b| agents::on_path(b, env))
        || file
            .as_deref()
            .is_some_and(|f| left_by_the_tool(f, configured, env));
    (installed, configured, file)
}

/// Whether the tool's config shows it was there before rmx: `--setup` creates the folder and
/// the file when they are missing, so those alone prove nothing (issue #22: Codex showed as
/// installed after a setup). A backup (the file predates rmx), a file not pointing at rmx, or
/// anything else in the tool's own folder (not the home folder, Aider's) does.
fn left_by_the_tool(file: &std::path::Path, configured: bool, env: &Env) -> bool {
    let backup = edit::backup_path(file);
    if backup.exists() || (file.is_file() && !configured) {
        return true;
    }
    let Some(dir) = file.parent().filter(|d| Some(*d) != env.home.as_deref()) else {
        return false;
    };
    let ours = [file.file_name(), backup.file_name()];
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            let name = entry.file_name();
            !ours.contains(&Some(name.as_os_str())) && !name.to_string_lossy().contains(".rmx-tmp-")
        })
}

fn list(env: &Env, t: &Target) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(["NAME", "TOOL", "INSTALLED", "USES RMX", "CONFIG"]);
    for i in agents::all() {
        let (installed, configured, file) = status(i, env, t);
        table.add_row([
            i.name.to_string(),
            i.title.to_string(),
            yes_no(installed).to_string(),
            yes_no(configured).to_string(),
            file.map(|f| f.display().to_string()).unwrap_or_default(),
        ]);
    }
    println!("{table}");
    println!(
        "\nPoint one at rmx ({}): rmx agents <name> --setup",
        t.openai_base()
    );
}

fn show(i: &Integration, env: &Env, t: &Target) {
    let (installed, configured, file) = status(i, env, t);
    println!("{} ({})", i.title, i.name);
    println!("  installed: {}", yes_no(installed));
    println!("  uses rmx:  {}", yes_no(configured));
    if let Some(file) = file {
        println!("  config:    {}", file.display());
    }
    if !configured {
        println!("  set up:    rmx agents {} --setup", i.name);
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn setup(
    i: &Integration,
    file: &std::path::Path,
    t: &Target,
    args: &crate::cli::AgentsArgs,
) -> Result<ExitCode> {
    let old = edit::read_or_empty(file)?;
    let old_text = old.as_deref().unwrap_or("");
    let new = (i.render)(old_text, file, t)?;
    if new == old_text {
        println!(
            "{} already uses rmx ({}); nothing to change",
            i.title,
            file.display()
        );
    } else {
        print!("{}", edit::unified_diff(file, old_text, &new));
        if args.dry_run {
            println!("(dry run: {} not changed)", file.display());
            return Ok(ExitCode::SUCCESS);
        }
        if !args.yes && !confirm(&format!("Write {}?", file.display()))? {
            println!("not changed");
            return Ok(ExitCode::FAILURE);
        }
        if edit::backup(file)? {
            println!(
                "backed up the old file to {}",
                edit::backup_path(file).display()
            );
        }
        edit::write_atomic(file, &new)?;
        println!("wrote {}", file.display());
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    for note in (i.notes)(t) {
        println!("note: {note}");
    }
    match agents::daemon_version(&t.root) {
        Some(v) => println!("the rmx daemon answers at {} (version {v})", t.root),
        None => println!(
            "the rmx daemon does not answer at {}: start it with `rmx serve` (in another terminal)",
            t.root
        ),
    }
    println!("try it: {}", i.try_command);
    Ok(ExitCode::SUCCESS)
}

/// Asks on the terminal; without one, refuses (the caller says to pass -y).
fn confirm(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "not a terminal to ask on: pass -y to write the file, or --dry-run to see the change"
        );
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}
