//! `rmx pull <name>`: download a model (alias, `owner/name` repo id) into the Hugging Face
//! cache, drawing the store's progress events. Ctrl-C drops the download future, which keeps
//! the `.incomplete` blobs; the next `rmx pull` resumes them.

use std::process::ExitCode;

use anyhow::{Context, Result};
use rmx_store::{human_bytes, Store, StoreConfig};

use crate::cli::PullArgs;
use crate::progress::PullProgress;

/// Pretend the cache's disk has this many bytes free: lets tests reach the "not enough disk
/// space" error without filling a disk. Not meant for users, so not a flag.
pub const FREE_SPACE_OVERRIDE: &str = "RMX_DEBUG_FREE_SPACE";

/// Exit status after an interrupt, as shells report a SIGINT death.
const INTERRUPTED: u8 = 130;

pub fn run(args: PullArgs) -> Result<ExitCode> {
    let store = store()?;
    let progress = PullProgress::new();
    let outcome = runtime()?.block_on(async {
        tokio::select! {
            pulled = store.pull(&args.model, &progress) => Some(pulled),
            _ = tokio::signal::ctrl_c() => None,
        }
    });
    match outcome {
        Some(Ok(pulled)) => {
            if crate::progress::interactive() {
                eprintln!("{} is ready ({})", args.model, human_bytes(pulled.total));
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Err(e)) => {
            progress.abandon();
            Err(e.into())
        }
        None => {
            // The pull future is dropped by now: every transfer stopped where it was and its
            // `.incomplete` file stays in the cache.
            progress.abandon();
            let (done, total) = progress.done_total();
            if total > 0 {
                eprintln!(
                    "{}interrupted: {} of {} is in {}; run `rmx pull {}` to resume",
                    // After the bars (and a `^C` the terminal echoed), start on a fresh line.
                    if crate::progress::interactive() {
                        "\n"
                    } else {
                        ""
                    },
                    human_bytes(done),
                    human_bytes(total),
                    store.cache().root().display(),
                    args.model
                );
            } else {
                eprintln!("interrupted before anything was downloaded");
            }
            Ok(ExitCode::from(INTERRUPTED))
        }
    }
}

/// The store from the environment (`HF_HUB_CACHE`, `HF_ENDPOINT`, `RMX_HOME`, ...).
pub fn store() -> Result<Store> {
    let mut config = StoreConfig::from_env().context("finding the model store")?;
    if let Some(bytes) = std::env::var(FREE_SPACE_OVERRIDE)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        config.free_space = std::sync::Arc::new(move |_| Ok(bytes));
    }
    Ok(Store::new(config))
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}
