//! One file of a pull: resume from `blobs/<etag>.incomplete`, verify, then rename into
//! `blobs/<etag>`. A blob only ever gets its final name once its size (and, for LFS files, its
//! sha256) is right, so a crash or a cancelled pull leaves at worst an `.incomplete` file that
//! the next pull continues from.
//!
//! Ours rather than hf-hub's downloader: hf-hub 0.4 keeps a partial file as `<etag>.sync.part`
//! with its own trailing progress marker (not huggingface_hub's `.incomplete`, so neither side
//! resumes the other's), never checks the sha256, and locks next to the blob instead of in
//! `.locks/`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{StatusCode, Url};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::cache::HubCache;
use crate::error::{IoContext, StoreError};
use crate::hub_api::{http, FileMeta, HubClient};
use crate::progress::{PullEvent, Reporter};
use crate::repo_id::RepoId;

/// Report progress at most this often (in bytes) per file; the last chunk is always reported.
const REPORT_EVERY: u64 = 64 * 1024;

pub(crate) struct TransferCtx<'a> {
    pub client: &'a HubClient,
    pub cache: &'a HubCache,
    pub repo: &'a RepoId,
    pub commit: &'a str,
    pub reporter: &'a dyn Reporter,
    /// Bytes of the whole pull on disk so far (shared by the parallel transfers).
    pub done: &'a AtomicU64,
    pub total: u64,
    pub retries: u32,
}

/// Make `blobs/<etag>` hold the verified file. Returns the bytes that came over the network.
pub(crate) async fn fetch_file(ctx: &TransferCtx<'_>, meta: &FileMeta) -> Result<u64, StoreError> {
    let blob = ctx.cache.blob_path(ctx.repo, &meta.etag);
    let part = ctx.cache.incomplete_path(ctx.repo, &meta.etag);
    if let Some(dir) = blob.parent() {
        tokio::fs::create_dir_all(dir).await.at("create", dir)?;
    }
    let _lock = lock_blob(ctx.cache.lock_path(ctx.repo, &meta.etag), &meta.file)?;

    if blob.is_file() {
        if meta.lfs {
            ctx.reporter.report(&PullEvent::Verifying {
                file: meta.file.clone(),
                digest: meta.digest(),
                size: meta.size,
            });
        }
        match verify(meta, &blob).await {
            Ok(()) => {
                ctx.reporter.report(&PullEvent::FileDone {
                    file: meta.file.clone(),
                    digest: meta.digest(),
                    size: meta.size,
                    cached: true,
                });
                return Ok(0);
            }
            Err(error) => {
                // A damaged blob (disk error, someone editing the cache) is fetched again.
                ctx.reporter.report(&PullEvent::Retrying {
                    file: meta.file.clone(),
                    digest: meta.digest(),
                    attempt: 0,
                    error: error.to_string(),
                });
                let on_disk = file_len(&blob).await?.min(meta.size);
                tokio::fs::remove_file(&blob).await.at("remove", &blob)?;
                ctx.done.fetch_sub(on_disk, Ordering::Relaxed);
            }
        }
    }

    let url = ctx.client.resolve_url(ctx.repo, ctx.commit, &meta.file)?;
    let mut downloaded = 0u64;
    let mut attempt = 0u32;
    loop {
        let result = match download_once(ctx, meta, &url, &part, &mut downloaded).await {
            Ok(()) => verify(meta, &part).await,
            Err(error) => Err(error),
        };
        let error = match result {
            Ok(()) => break,
            Err(error) => error,
        };
        let corrupt = matches!(
            error,
            StoreError::ChecksumMismatch { .. } | StoreError::SizeMismatch { .. }
        );
        if corrupt {
            // Resuming a corrupt file cannot fix it: start over.
            let on_disk = file_len(&part).await?.min(meta.size);
            remove_if_exists(&part).await?;
            ctx.done.fetch_sub(on_disk, Ordering::Relaxed);
        }
        if attempt >= ctx.retries || !(corrupt || is_transient(&error)) {
            return Err(error);
        }
        attempt += 1;
        ctx.reporter.report(&PullEvent::Retrying {
            file: meta.file.clone(),
            digest: meta.digest(),
            attempt,
            error: error.with_causes(),
        });
        tokio::time::sleep(backoff(attempt)).await;
    }
    tokio::fs::rename(&part, &blob).await.at("rename", &blob)?;
    ctx.reporter.report(&PullEvent::FileDone {
        file: meta.file.clone(),
        digest: meta.digest(),
        size: meta.size,
        cached: false,
    });
    Ok(downloaded)
}

/// One HTTP request, appending to the `.incomplete` file from its current length.
async fn download_once(
    ctx: &TransferCtx<'_>,
    meta: &FileMeta,
    url: &Url,
    part: &Path,
    downloaded: &mut u64,
) -> Result<(), StoreError> {
    let mut offset = match tokio::fs::metadata(part).await {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e).at("read", part),
    };
    if offset > meta.size {
        // Longer than the file can be: not a prefix of it.
        remove_if_exists(part).await?;
        ctx.done.fetch_sub(meta.size, Ordering::Relaxed);
        offset = 0;
    }
    if offset == meta.size {
        return Ok(());
    }
    ctx.reporter.report(&PullEvent::FileStarted {
        file: meta.file.clone(),
        digest: meta.digest(),
        size: meta.size,
        offset,
    });
    let response = ctx.client.get_from(url, offset).await?;
    let append = match response.status() {
        StatusCode::PARTIAL_CONTENT => true,
        StatusCode::OK => {
            // The server ignored the Range header: the body starts at byte 0.
            ctx.done.fetch_sub(offset, Ordering::Relaxed);
            offset = 0;
            false
        }
        StatusCode::RANGE_NOT_SATISFIABLE => {
            remove_if_exists(part).await?;
            ctx.done.fetch_sub(offset, Ordering::Relaxed);
            return Err(StoreError::HttpStatus {
                url: url.to_string(),
                status: 416,
            });
        }
        StatusCode::NOT_FOUND => {
            return Err(StoreError::FileNotFound {
                repo: ctx.repo.to_string(),
                file: meta.file.clone(),
                endpoint: ctx.client.endpoint().to_string(),
            })
        }
        status => {
            return Err(StoreError::HttpStatus {
                url: url.to_string(),
                status: status.as_u16(),
            })
        }
    };
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(part)
        .await
        .at("open", part)?;
    let mut stream = response.bytes_stream();
    let mut unreported = 0u64;
    let mut failure = None;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(source) => {
                failure = Some(http(url, source));
                break;
            }
        };
        file.write_all(&chunk).await.at("write", part)?;
        let n = chunk.len() as u64;
        offset += n;
        *downloaded += n;
        unreported += n;
        let done = ctx.done.fetch_add(n, Ordering::Relaxed) + n;
        if unreported >= REPORT_EVERY || offset >= meta.size {
            unreported = 0;
            ctx.reporter.report(&PullEvent::Progress {
                file: meta.file.clone(),
                digest: meta.digest(),
                file_done: offset,
                file_size: meta.size,
                done,
                total: ctx.total,
            });
        }
    }
    // Whatever arrived is kept (flushed, so its length is the resume offset) even on failure.
    file.flush().await.at("write", part)?;
    file.sync_all().await.at("sync", part)?;
    if let Some(error) = failure {
        return Err(error);
    }
    if offset < meta.size {
        return Err(StoreError::Truncated {
            file: meta.file.clone(),
            got: offset,
            expected: meta.size,
        });
    }
    Ok(())
}

/// Size always; sha256 too when the etag is one (LFS files). Small files are named by their
/// git sha1, which huggingface_hub does not check either.
async fn verify(meta: &FileMeta, path: &Path) -> Result<(), StoreError> {
    let actual = file_len(path).await?;
    if actual != meta.size {
        return Err(StoreError::SizeMismatch {
            file: meta.file.clone(),
            expected: meta.size,
            actual,
        });
    }
    if !meta.lfs {
        return Ok(());
    }
    let owned = path.to_path_buf();
    let digest = tokio::task::spawn_blocking(move || sha256_file(&owned))
        .await
        .map_err(StoreError::Task)??;
    if !digest.eq_ignore_ascii_case(&meta.etag) {
        return Err(StoreError::ChecksumMismatch {
            file: meta.file.clone(),
            expected: meta.etag.clone(),
            actual: digest,
        });
    }
    Ok(())
}

pub(crate) fn sha256_file(path: &Path) -> Result<String, StoreError> {
    let mut file = std::fs::File::open(path).at("open", path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).at("read", path)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// huggingface_hub takes the same `flock` on the same path, so rmx and Python never write
/// one blob at once.
fn lock_blob(path: PathBuf, file: &str) -> Result<std::fs::File, StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).at("create", dir)?;
    }
    let handle = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .at("open", &path)?;
    match fs4::FileExt::try_lock(&handle) {
        Ok(()) => Ok(handle),
        Err(fs4::TryLockError::WouldBlock) => Err(StoreError::Locked {
            file: file.to_string(),
            path,
        }),
        Err(fs4::TryLockError::Error(e)) => Err(e).at("lock", path),
    }
}

fn is_transient(error: &StoreError) -> bool {
    match error {
        StoreError::Http { .. } | StoreError::Truncated { .. } => true,
        StoreError::HttpStatus { status, .. } => *status == 416 || *status == 429 || *status >= 500,
        _ => false,
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((200u64 << attempt.min(5)).min(5_000))
}

async fn file_len(path: &Path) -> Result<u64, StoreError> {
    match tokio::fs::metadata(path).await {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).at("read", path),
    }
}

async fn remove_if_exists(path: &Path) -> Result<(), StoreError> {
    match tokio::fs::remove_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).at("remove", path),
    }
}
