//! One file per subcommand; this module only routes and turns errors into exit codes.

mod chat;
mod completions;
mod embed;
mod ps;
mod run;
mod serve;
mod stop;

mod agents;
mod alias;
mod bench;
mod bench_image;
mod bench_verify;
mod doctor;
mod import;
mod info;
pub mod launch;
mod ls;
mod models;
mod pull;
mod rm;
mod share;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn dispatch(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Embed(args) => embed::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Ps(args) => ps::run(args),
        Command::Stop(args) => stop::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Pull(args) => pull::run(args),
        Command::Ls(args) => ls::run(args),
        Command::Rm(args) => rm::run(args),
        Command::Info(args) => info::run(args),
        Command::Models(args) => models::run(args),
        Command::Alias(cmd) => alias::run(cmd),
        Command::Import(args) => import::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Agents(args) => agents::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Share(args) => share::run(args),
        Command::Launch(args) => launch::run(args),
        Command::Worker => launch::worker(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rmx: {e:#}");
            ExitCode::FAILURE
        }
    }
}
