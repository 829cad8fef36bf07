//! `rmx completions <shell>` prints completions; `--write` regenerates the checked-in
//! `completions/` and `man/` from the clap definitions (a test keeps them in sync).

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
            "wrote {} and {}",
            dir.join("completions").display(),
            dir.join("man").display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(shell) = args.shell {
        clap_complete::generate(shell, &mut Cli::command(), "rmx", &mut std::io::stdout());
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
    write_man(&man, "rmx", cmd.clone())?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names are &'static str without its `string` feature; this runs once per page.
        let name: &'static str = Box::leak(format!("rmx-{}", sub.get_name()).into_boxed_str());
        write_man(&man, name, sub.clone().name(name))?;
    }
    Ok(())
}

fn write_man(dir: &Path, name: &str, cmd: clap::Command) -> Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))
}
