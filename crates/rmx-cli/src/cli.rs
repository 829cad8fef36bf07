//! The command line, declared once: help, man pages and completions are generated from it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "rmx",
    version,
    about = "Run large language models locally on MLX",
    long_about = "Run large language models locally on MLX.\n\n\
        Models are MLX-format folders (config.json, *.safetensors, tokenizer.json).",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate an answer to one prompt and exit.
    ///
    /// The prompt goes through the model's chat template unless --raw is given. Without a
    /// prompt argument, the prompt is read from standard input.
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The model: a folder holding an MLX-format model.
    pub model: PathBuf,
    /// The prompt (read from standard input when absent).
    pub prompt: Option<String>,
    #[command(flatten)]
    pub gen: GenArgs,
}

/// Options shared by everything that generates text.
#[derive(Debug, Args, Clone)]
pub struct GenArgs {
    /// Send the prompt as-is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Stop after this many generated tokens.
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub max_tokens: usize,
    /// Sampling temperature; 0 picks the most likely token every time.
    #[arg(long, default_value_t = 0.0, value_name = "T")]
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens that add up to P.
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub top_p: f32,
    /// Keep only the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub top_k: u32,
    /// Random seed: the same seed and prompt give the same answer.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// A system message placed before the prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Ask reasoning models to think first (sets the template's enable_thinking).
    #[arg(long, overrides_with = "no_think")]
    pub think: bool,
    /// Ask reasoning models not to think, and hide any reasoning they still print.
    #[arg(long)]
    pub no_think: bool,
    /// Print prompt and decode speed and peak memory after the answer.
    #[arg(long, short)]
    pub verbose: bool,
}
