//! `rmx pull <name>`: download a model (alias, `owner/name` repo id) into the Hugging Face
//! cache. The daemon does the download (`/api/pull`, started like for every other command) and
//! streams the store's progress events; this draws them. Ctrl-C hangs up, which stops the
//! download and keeps the `.incomplete` blobs; the next `rmx pull` resumes them.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_api::Client;
use rmx_store::{human_bytes, Families, PullEvent, Reporter, Store, StoreConfig};

use crate::cli::PullArgs;
use crate::daemon;
use crate::progress::PullProgress;

/// Pretend the cache's disk has this many bytes free: lets tests reach the "not enough disk
/// space" error without filling a disk. Not meant for users, so not a flag; the daemon reads
/// it too (from the environment of the command that started it).
pub const FREE_SPACE_OVERRIDE: &str = rmx_settings::EnvVars::RMX_DEBUG_FREE_SPACE;

/// Exit status after an interrupt, as shells report a SIGINT death.
const INTERRUPTED: u8 = 130;

pub fn run(args: PullArgs) -> Result<ExitCode> {
    let progress = PullProgress::new();
    let outcome = daemon::runtime()?.block_on(async {
        tokio::select! {
            pulled = pull(&args.model, &progress) => Some(pulled),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    match outcome {
        Some(Ok(total)) => {
            if crate::progress::interactive() {
                eprintln!("{} is ready ({})", args.model, human_bytes(total));
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Err(e)) => {
            progress.abandon();
            Err(e)
        }
        None => {
            // The connection is dropped by now: the daemon stops the download where it was
            // and leaves its `.incomplete` files in the cache.
            progress.abandon();
            let (done, total) = progress.done_total();
            if total > 0 {
                let cache = store()
                    .map(|s| s.cache().root().display().to_string())
                    .unwrap_or_else(|_| "the Hugging Face cache".into());
                eprintln!(
                    "{}interrupted: {} of {} is in {cache}; run `rmx pull {}` to resume",
                    // After the bars (and a `^C` the terminal echoed), start on a fresh line.
                    if crate::progress::interactive() {
                        "\n"
                    } else {
                        ""
                    },
                    human_bytes(done),
                    human_bytes(total),
                    args.model
                );
            } else {
                eprintln!("interrupted before anything was downloaded");
            }
            Ok(ExitCode::from(INTERRUPTED))
        }
    }
}

/// Pulls through the daemon, drawing each line's store event; returns the model's size.
async fn pull(model: &str, progress: &PullProgress) -> Result<u64> {
    let client: Client = daemon::connect().await?;
    // The daemon reads its environment once, when it starts: send this shell's token, which
    // may have been exported (or `hf auth login` run) since.
    let token = StoreConfig::from_env().ok().and_then(|c| c.token());
    let mut lines = client
        .pull_with_token(model, token)
        .await
        .map_err(daemon::broken_off)?;
    let mut total = 0;
    while let Some(line) = lines.next().await {
        let line = line.map_err(daemon::broken_off)?;
        if let Some(event) = &line.detail {
            if let PullEvent::Resolved { total: t, .. } = event {
                total = *t;
            }
            progress.report(event);
        }
        if line.status == "success" {
            return Ok(total);
        }
    }
    let log = daemon::paths()?.log;
    bail!(
        "the daemon ended the pull of `{model}` without finishing it; see its log {}",
        log.display()
    )
}

/// The store from the environment (`HF_HUB_CACHE`, `HF_ENDPOINT`, `RMX_HOME`, ...), told which
/// families this binary's engine loads (so `rmx info` and `rmx ls` mark the others).
pub fn store() -> Result<Store> {
    let mut config = StoreConfig::from_env().context("finding the model store")?;
    if let Some(bytes) = rmx_settings::number::<u64>(FREE_SPACE_OVERRIDE)
        .ok()
        .flatten()
    {
        config.free_space = std::sync::Arc::new(move |_| Ok(bytes));
    }
    Ok(Store::new(config).with_families(
        Families::new(rmx_engine::supported_model_types())
            .with_architectures(rmx_engine::supported_architectures()),
    ))
}
