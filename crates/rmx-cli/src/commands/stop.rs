//! `rmx stop <model>`: unload a model now (or right after the answers running on it).

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::StopArgs;
use crate::daemon;

pub fn run(args: StopArgs) -> Result<ExitCode> {
    daemon::runtime()?.block_on(async {
        let Some(client) = daemon::running().await? else {
            eprintln!(
                "rmx: no daemon is running, so `{}` is not loaded",
                args.model
            );
            return Ok(ExitCode::SUCCESS);
        };
        client.stop(&args.model).await.map_err(daemon::broken_off)?;
        Ok(ExitCode::SUCCESS)
    })
}
