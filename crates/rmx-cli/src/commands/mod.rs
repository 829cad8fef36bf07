//! One file per subcommand; this module only routes and turns errors into exit codes.

mod run;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub fn dispatch(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Run(args) => run::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rmx: {e:#}");
            ExitCode::FAILURE
        }
    }
}
