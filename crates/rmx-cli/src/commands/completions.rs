//! `rmx completions <shell>` prints completions; `--write` regenerates the checked-in
//! `completions/` and `man/` from the clap definitions, and `docs/settings.md` from
//! rmx-settings' table (tests keep them in sync).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionsArgs};

pub fn run(args: CompletionsArgs) -> Result<ExitCode> {
    if args.write {
        let dir = args.dir.unwrap_or_else(|| ".".into());
        write_all(&dir)?;
        eprintln!(
            "wrote {}, {} and {}",
            dir.join("completions").display(),
            dir.join("man").display(),
            dir.join(SETTINGS_DOC).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(shell) = args.shell {
        // Rendered first, then written: clap_complete panics on a failed write, and a reader
        // that stops early (`rmx completions bash | head`) closes the pipe. That is no error.
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "rmx", &mut script);
        match std::io::stdout().lock().write_all(&script) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(e).context("writing the completions to standard output")
            }
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_all(dir: &Path) -> Result<()> {
    let completions = dir.join("completions");
    std::fs::create_dir_all(&completions)
        .with_context(|| format!("creating {}", completions.display()))?;
    for shell in [
        Shell::Bash,
        Shell::Zsh,
        Shell::Fish,
        Shell::Elvish,
        Shell::PowerShell,
    ] {
        clap_complete::generate_to(shell, &mut Cli::command(), "rmx", &completions)
            .with_context(|| format!("writing {shell} completions"))?;
    }
    let man = dir.join("man");
    std::fs::create_dir_all(&man).with_context(|| format!("creating {}", man.display()))?;
    let cmd = Cli::command();
    write_top_man(&man, cmd.clone())?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names are &'static str without its `string` feature; this runs once per page.
        let name: &'static str = Box::leak(format!("rmx-{}", sub.get_name()).into_boxed_str());
        write_man(&man, name, sub.clone().name(name))?;
    }
    write_settings_doc(dir)
}

/// rmx(1): clap_mangen's sections with ENVIRONMENT, from rmx-settings' table, in place of the
/// EXTRA section it would make of `--help`'s long epilogue (the same table as plain text).
fn write_top_man(dir: &Path, cmd: clap::Command) -> Result<()> {
    let cmd = cmd.after_long_help(None::<&str>);
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    man.render_subcommands_section(&mut out)?;
    out.extend_from_slice(rmx_settings::man_section().as_bytes());
    man.render_version_section(&mut out)?;
    // Each section rendered alone starts with roff's preamble; the page needs it once.
    let text = String::from_utf8(out)?;
    let preamble = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";
    let text = preamble.to_string() + &text.replace(preamble, "");
    let path = dir.join("rmx.1");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Where `--write` puts the settings table as Markdown (rmx-settings tests it is current).
const SETTINGS_DOC: &str = "docs/settings.md";

fn write_settings_doc(dir: &Path) -> Result<()> {
    let path = dir.join(SETTINGS_DOC);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&path, rmx_settings::markdown())
        .with_context(|| format!("writing {}", path.display()))
}

fn write_man(dir: &Path, name: &str, cmd: clap::Command) -> Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))
}
