//! A local HTTP server laid out like the Hugging Face Hub, with the routes and headers that
//! rmx and huggingface_hub really use, plus knobs to misbehave (drop a connection after N
//! bytes, corrupt a body once) and counters of what it served and was asked for.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

pub struct FakeFile {
    pub name: String,
    pub bytes: Vec<u8>,
    /// Stored in LFS: the resolve URL redirects to the CDN route and announces the sha256.
    pub lfs: bool,
}

impl FakeFile {
    pub fn new(name: &str, bytes: Vec<u8>, lfs: bool) -> Self {
        FakeFile {
            name: name.to_string(),
            bytes,
            lfs,
        }
    }

    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }

    /// The blob name huggingface_hub uses: sha256 for LFS files, a git-sha1-shaped id (40 hex)
    /// for small ones. Nobody checks the latter against the content, so any stable id does.
    pub fn etag(&self) -> String {
        if self.lfs {
            self.sha256()
        } else {
            let mut h = Sha256::new();
            h.update(format!("blob {}\0", self.bytes.len()));
            h.update(&self.bytes);
            hex::encode(h.finalize())[..40].to_string()
        }
    }
}

pub struct FakeRepo {
    pub commit: String,
    pub files: Vec<FakeFile>,
    /// Listed in the repo but answering 404 on resolve (a broken or racing repo).
    pub missing: HashSet<String>,
}

#[derive(Default)]
pub struct HubState {
    base: Mutex<String>,
    repos: Mutex<HashMap<String, FakeRepo>>,
    /// Body bytes actually sent, per file name.
    served: Mutex<HashMap<String, u64>>,
    /// `Range` header of every body request, per file name.
    ranges: Mutex<Vec<(String, Option<String>)>>,
    /// `METHOD /path` of every request, in order (HEADs included).
    requests: Mutex<Vec<String>>,
    /// One-shot: file name -> bytes to send before dropping the connection.
    drop_after: Mutex<HashMap<String, u64>>,
    /// One-shot: file names whose next body is corrupted.
    corrupt_once: Mutex<HashSet<String>>,
    /// One-shot: file name -> bytes to send before the body stalls forever.
    stall_after: Mutex<HashMap<String, u64>>,
    /// Private (or gated) repos and the token that opens each.
    private: Mutex<HashMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct FakeHub {
    pub url: String,
    pub state: Arc<HubState>,
}

impl FakeHub {
    pub async fn start() -> FakeHub {
        let state = Arc::new(HubState::default());
        let app = Router::new()
            .route("/api/models/{owner}/{name}/revision/{rev}", get(repo_info))
            .route("/api/models/{owner}/{name}/tree/{rev}", get(repo_tree))
            .route(
                "/{owner}/{name}/resolve/{rev}/{*file}",
                get(resolve).head(resolve),
            )
            .route("/lfs-cdn/{sha}", get(cdn).head(cdn))
            .layer(axum::middleware::from_fn_with_state(state.clone(), record))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let url = format!("http://{addr}");
        *lock(&state.base) = url.clone();
        FakeHub { url, state }
    }

    pub fn add_repo(&self, id: &str, commit: &str, files: Vec<FakeFile>) {
        lock(&self.state.repos).insert(
            id.to_string(),
            FakeRepo {
                commit: commit.to_string(),
                files,
                missing: HashSet::new(),
            },
        );
    }

    /// The repo answers only requests that carry `Authorization: Bearer <token>`; to others it
    /// does not exist (401, as the Hub answers anonymous callers for private repos).
    pub fn make_private(&self, id: &str, token: &str) {
        lock(&self.state.private).insert(id.to_string(), token.to_string());
    }

    pub fn make_missing(&self, id: &str, file: &str) {
        if let Some(repo) = lock(&self.state.repos).get_mut(id) {
            repo.missing.insert(file.to_string());
        }
    }

    pub fn drop_after(&self, file: &str, bytes: u64) {
        lock(&self.state.drop_after).insert(file.to_string(), bytes);
    }

    pub fn stall_after(&self, file: &str, bytes: u64) {
        lock(&self.state.stall_after).insert(file.to_string(), bytes);
    }

    pub fn corrupt_once(&self, file: &str) {
        lock(&self.state.corrupt_once).insert(file.to_string());
    }

    pub fn served(&self, file: &str) -> u64 {
        lock(&self.state.served).get(file).copied().unwrap_or(0)
    }

    pub fn served_total(&self) -> u64 {
        lock(&self.state.served).values().sum()
    }

    pub fn ranges(&self, file: &str) -> Vec<Option<String>> {
        lock(&self.state.ranges)
            .iter()
            .filter(|(f, _)| f == file)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// `METHOD /path` of every request since the start (or the last reset), in order.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state.requests).clone()
    }

    pub fn reset_counters(&self) {
        lock(&self.state.served).clear();
        lock(&self.state.ranges).clear();
        lock(&self.state.requests).clear();
    }
}

async fn record(
    State(state): State<Arc<HubState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    lock(&state.requests).push(format!("{} {}", request.method(), request.uri().path()));
    next.run(request).await
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [("x-error-code", code.to_string())],
        axum::Json(serde_json::json!({ "error": message })),
    )
        .into_response()
}

/// Whether a private repo's token is missing from `headers`.
fn denied(state: &HubState, id: &str, headers: &HeaderMap) -> bool {
    let Some(token) = lock(&state.private).get(id).cloned() else {
        return false;
    };
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    sent != Some(format!("Bearer {token}").as_str())
}

fn repo_missing() -> Response {
    // The Hub answers 401, not 404, for a repo that does not exist (to anonymous callers).
    error(
        StatusCode::UNAUTHORIZED,
        "RepoNotFound",
        "Repository not found",
    )
}

async fn repo_info(
    State(state): State<Arc<HubState>>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let id = format!("{owner}/{name}");
    if denied(&state, &id, &headers) {
        return repo_missing();
    }
    let repos = lock(&state.repos);
    let Some(repo) = repos.get(&id) else {
        return repo_missing();
    };
    if rev != "main" && rev != repo.commit {
        return error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id");
    }
    let siblings: Vec<_> = repo
        .files
        .iter()
        .map(|f| serde_json::json!({ "rfilename": f.name }))
        .collect();
    axum::Json(serde_json::json!({
        "_id": "0123", "id": id, "modelId": id, "author": owner, "sha": repo.commit,
        "private": false, "disabled": false, "gated": false, "downloads": 0, "likes": 0,
        "tags": ["mlx"], "siblings": siblings,
        "lastModified": "2026-01-01T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z",
    }))
    .into_response()
}

async fn repo_tree(
    State(state): State<Arc<HubState>>,
    Path((owner, name, rev)): Path<(String, String, String)>,
    Query(_query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let id = format!("{owner}/{name}");
    if denied(&state, &id, &headers) {
        return repo_missing();
    }
    let repos = lock(&state.repos);
    let Some(repo) = repos.get(&id) else {
        return repo_missing();
    };
    if rev != "main" && rev != repo.commit {
        return error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id");
    }
    let entries: Vec<_> = repo
        .files
        .iter()
        .map(|f| {
            let mut entry = serde_json::json!({
                "type": "file", "oid": f.etag(), "size": f.bytes.len(), "path": f.name,
            });
            if f.lfs {
                entry["oid"] = serde_json::json!(&f.etag()[..40]);
                entry["lfs"] = serde_json::json!({
                    "oid": f.sha256(), "size": f.bytes.len(), "pointerSize": 134,
                });
            }
            entry
        })
        .collect();
    axum::Json(entries).into_response()
}

async fn resolve(
    State(state): State<Arc<HubState>>,
    Path((owner, name, rev, file)): Path<(String, String, String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let id = format!("{owner}/{name}");
    if denied(&state, &id, &headers) {
        return repo_missing();
    }
    let (commit, found) = {
        let repos = lock(&state.repos);
        let Some(repo) = repos.get(&id) else {
            return repo_missing();
        };
        if rev != "main" && rev != repo.commit {
            return error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id");
        }
        let found = repo
            .files
            .iter()
            .find(|f| f.name == file && !repo.missing.contains(&file))
            .map(|f| (f.lfs, f.etag(), f.bytes.len(), f.bytes.clone()));
        (repo.commit.clone(), found)
    };
    let Some((lfs, etag, size, bytes)) = found else {
        return error(StatusCode::NOT_FOUND, "EntryNotFound", "Entry not found");
    };
    if lfs {
        // The CDN is another host on the real Hub (huggingface_hub stops at such a redirect and
        // reads the metadata off it); `localhost` is another host name for this server.
        let base = lock(&state.base).replace("127.0.0.1", "localhost");
        return Response::builder()
            .status(StatusCode::FOUND)
            .header(header::LOCATION, format!("{base}/lfs-cdn/{etag}"))
            .header("x-repo-commit", commit)
            .header("x-linked-etag", format!("\"{etag}\""))
            .header("x-linked-size", size.to_string())
            .header(header::ETAG, "\"0000pointer0000\"")
            .body(Body::empty())
            .unwrap_or_default();
    }
    serve_bytes(
        &state,
        &file,
        bytes,
        &etag,
        Some(&commit),
        &method,
        &headers,
    )
}

async fn cdn(
    State(state): State<Arc<HubState>>,
    Path(sha): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let found = {
        let repos = lock(&state.repos);
        repos
            .values()
            .flat_map(|r| r.files.iter())
            .find(|f| f.lfs && f.sha256() == sha)
            .map(|f| (f.name.clone(), f.bytes.clone()))
    };
    match found {
        Some((name, bytes)) => serve_bytes(&state, &name, bytes, &sha, None, &method, &headers),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn serve_bytes(
    state: &Arc<HubState>,
    file: &str,
    mut bytes: Vec<u8>,
    etag: &str,
    commit: Option<&str>,
    method: &Method,
    headers: &HeaderMap,
) -> Response {
    let total = bytes.len() as u64;
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let start = match range.as_deref().map(parse_range_start) {
        None => 0,
        Some(Some(start)) if start < total => start,
        Some(_) => {
            return Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{total}"))
                .body(Body::empty())
                .unwrap_or_default()
        }
    };
    let mut builder = Response::builder()
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, format!("\"{etag}\""))
        .header(header::CONTENT_LENGTH, (total - start).to_string());
    if let Some(commit) = commit {
        builder = builder.header("x-repo-commit", commit);
    }
    builder = if range.is_some() {
        builder.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{total}", total - 1),
        )
    } else {
        builder.status(StatusCode::OK)
    };
    if method == Method::HEAD {
        return builder.body(Body::empty()).unwrap_or_default();
    }

    lock(&state.ranges).push((file.to_string(), range));
    if lock(&state.corrupt_once).remove(file) {
        if let Some(b) = bytes.get_mut(total as usize / 2) {
            *b ^= 0xff;
        }
    }
    let body = bytes.split_off(start as usize);
    let cut = lock(&state.drop_after).remove(file);
    let stall = lock(&state.stall_after).remove(file);
    let state = state.clone();
    let file = file.to_string();
    let chunks: Vec<Result<Bytes, std::io::Error>> = {
        let mut out = Vec::new();
        let limit = cut
            .or(stall)
            .map(|c| c.min(body.len() as u64) as usize)
            .unwrap_or(body.len());
        for chunk in body[..limit].chunks(16 * 1024) {
            out.push(Ok(Bytes::copy_from_slice(chunk)));
        }
        if cut.is_some() {
            out.push(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "fake hub drops the connection",
            )));
        }
        if stall.is_some() {
            out.push(Err(std::io::Error::other(STALL)));
        }
        out
    };
    let stream = futures_util::stream::iter(chunks).then(move |chunk| {
        let state = state.clone();
        let file = file.clone();
        async move {
            match &chunk {
                Ok(bytes) => {
                    *lock(&state.served).entry(file).or_insert(0) += bytes.len() as u64;
                }
                Err(e) if e.to_string() == STALL => std::future::pending::<()>().await,
                // Let the bytes already written reach the client before the connection goes:
                // hyper discards what it still buffers when a body fails.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
            chunk
        }
    });
    builder.body(Body::from_stream(stream)).unwrap_or_default()
}

const STALL: &str = "fake hub stalls";

fn parse_range_start(range: &str) -> Option<u64> {
    let spec = range.strip_prefix("bytes=")?;
    let (start, _end) = spec.split_once('-')?;
    start.parse().ok()
}

use futures_util::StreamExt as _;
