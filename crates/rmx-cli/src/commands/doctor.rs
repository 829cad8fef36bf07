//! `rmx doctor`: prints the checks' findings, one line each with its fix, or as JSON; exits
//! non-zero when any check FAILs. The checks live in `crate::doctor`. Under `rmx launch` (rank
//! 0; the other ranks answer from `rmx worker`), it also gathers every rank's versions,
//! backends and model fingerprint and prints them side by side.

use std::process::ExitCode;

use anyhow::{Context, Result};
use rmx_engine::checkup::RankReport;

use crate::cli::DoctorArgs;
use crate::doctor::{self, distributed, Level};

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    // First, while the other ranks wait for rank 0's word: the group's answers.
    let ranks: Option<Vec<RankReport>> = match crate::commands::launch::lead()? {
        Some((lead, _mode)) => {
            let reports = lead
                .checkup(args.model.as_deref())
                .context("gathering the ranks' reports")?;
            lead.exit()?;
            Some(reports)
        }
        None => None,
    };
    let mut findings = doctor::run_all();
    if let Some(file) = &args.hostfile {
        findings.extend(distributed::hosts(file));
    }
    match (&ranks, &args.model) {
        (Some(reports), _) => findings.extend(distributed::compare(reports)),
        (None, Some(dir)) => findings.push(distributed::model(dir)),
        (None, None) => {}
    }
    let failed = findings.iter().any(|f| f.level == Level::Fail);
    if args.json {
        let mut json = serde_json::json!({ "ok": !failed, "checks": findings });
        if let Some(reports) = &ranks {
            json["ranks"] = serde_json::to_value(reports)?;
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for f in &findings {
            println!("{} {:<7} {}", f.level.label(), f.check, f.message);
            if let Some(fix) = &f.fix {
                println!("     {:<7} fix: {fix}", "");
            }
        }
        if let Some(reports) = &ranks {
            println!("\n{}", distributed::table(reports).trim_end());
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
