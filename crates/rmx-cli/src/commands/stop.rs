//! `rmx stop <model>`: unload a model now (or right after the answers running on it). Says
//! which happened: stopped, or not loaded (no daemon, or the daemon did not hold it); both
//! leave the model unloaded, so both succeed. A name the daemon does not know is an error.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use crate::cli::StopArgs;
use crate::daemon;

pub fn run(args: StopArgs) -> Result<ExitCode> {
    let was_loaded = daemon::runtime()?.block_on(async {
        let Some(client) = daemon::running().await? else {
            return Ok::<_, anyhow::Error>(false);
        };
        let answer = client.stop(&args.model).await.map_err(daemon::broken_off)?;
        Ok(answer.stats.is_none_or(|s| s.done_reason != "not_loaded"))
    })?;
    if args.json {
        println!("{}", json!({"model": args.model, "stopped": was_loaded}));
    } else if was_loaded {
        eprintln!("rmx: stopped `{}`", args.model);
    } else {
        eprintln!("rmx: `{}` is not loaded; nothing to stop", args.model);
    }
    Ok(ExitCode::SUCCESS)
}
