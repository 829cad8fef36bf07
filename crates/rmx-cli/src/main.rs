//! `rmx`: run large language models locally on MLX.

mod cli;
mod commands;
mod daemon;
mod output;
mod progress;

fn main() -> std::process::ExitCode {
    commands::dispatch(<cli::Cli as clap::Parser>::parse())
}
