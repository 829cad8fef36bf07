//! `rmx`: run large language models locally on MLX.

mod agents;
mod answer;
mod bench_submit;
mod cli;
mod commands;
mod daemon;
mod doctor;
mod output;
mod progress;
mod tunnel;

fn main() -> std::process::ExitCode {
    rmx_mlx::runtime_defaults();
    commands::dispatch(<cli::Cli as clap::Parser>::parse())
}
