//! `rmx doctor`: prints the checks' findings, one line each with its fix, or as JSON; exits
//! non-zero when any check FAILs. The checks live in `crate::doctor`.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::DoctorArgs;
use crate::doctor::{self, Level};

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let findings = doctor::run_all();
    let failed = findings.iter().any(|f| f.level == Level::Fail);
    if args.json {
        let json = serde_json::json!({ "ok": !failed, "checks": findings });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for f in &findings {
            println!("{} {:<7} {}", f.level.label(), f.check, f.message);
            if let Some(fix) = &f.fix {
                println!("     {:<7} fix: {fix}", "");
            }
        }
        let (warns, fails) = findings.iter().fold((0, 0), |(w, x), f| match f.level {
            Level::Warn => (w + 1, x),
            Level::Fail => (w, x + 1),
            Level::Pass => (w, x),
        });
        println!(
            "\n{fails} failed, {warns} warnings, {} passed",
            findings.len() - warns - fails
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
