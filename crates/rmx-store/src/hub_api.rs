//! The few Hub endpoints a pull needs, called the way huggingface_hub calls them:
//!
//! - `GET  {endpoint}/api/models/{repo}/revision/{rev}` → commit `sha` and `siblings`;
//! - `HEAD {endpoint}/{repo}/resolve/{rev}/{file}` → `X-Repo-Commit`, `ETag` (git sha1 of a
//!   small file) or `X-Linked-Etag` + `X-Linked-Size` (sha256 and size of an LFS file, on a
//!   redirect to the CDN that must not be followed, or the headers are lost);
//! - `GET` of the same URL, redirects followed, `Range: bytes=N-` to resume.

use std::time::Duration;

use reqwest::header::{HeaderMap, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_LENGTH, ETAG, LOCATION};
use reqwest::{Response, StatusCode, Url};
use serde::Deserialize;

use crate::cache::{is_safe_name, is_safe_repo_path};
use crate::error::StoreError;
use crate::repo_id::RepoId;

const USER_AGENT: &str = concat!("rmx/", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Clone)]
pub(crate) struct HubClient {
    endpoint: String,
    token: Option<String>,
    /// HEAD must see the Hub's own redirect response (its headers carry the LFS metadata).
    no_redirect: reqwest::Client,
    download: reqwest::Client,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RepoInfo {
    pub sha: String,
    #[serde(default)]
    pub siblings: Vec<Sibling>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Sibling {
    pub rfilename: String,
}

/// What a HEAD on a file says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileMeta {
    pub file: String,
    pub commit: Option<String>,
    /// The blob name: sha256 for LFS files, git sha1 otherwise.
    pub etag: String,
    pub size: u64,
    /// True when the etag is the content's sha256 (an LFS file), so it can be checked.
    pub lfs: bool,
}

impl FileMeta {
    /// The digest progress reports carry: `sha256:<hex>` when the pull checks it,
    /// `git-sha1:<hex>` (the git blob id the Hub gives small files) otherwise.
    pub fn digest(&self) -> String {
        let kind = if self.lfs { "sha256" } else { "git-sha1" };
        format!("{kind}:{}", self.etag)
    }
}

impl HubClient {
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Self, StoreError> {
        let build = |policy| {
            reqwest::Client::builder()
                .user_agent(USER_AGENT)
                .connect_timeout(Duration::from_secs(15))
                // A stalled connection fails (and is resumed) instead of hanging forever.
                .read_timeout(Duration::from_secs(60))
                .redirect(policy)
                .build()
                .map_err(|source| StoreError::Http {
                    url: endpoint.to_string(),
                    source,
                })
        };
        Ok(HubClient {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token,
            no_redirect: build(reqwest::redirect::Policy::none())?,
            download: build(reqwest::redirect::Policy::limited(10))?,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn url(&self, segments: &[&str]) -> Result<Url, StoreError> {
        let mut url = Url::parse(&self.endpoint).map_err(|_| StoreError::BadHeader {
            url: self.endpoint.clone(),
            header: "HF_ENDPOINT (not a URL)",
        })?;
        {
            let mut path = url.path_segments_mut().map_err(|_| StoreError::BadHeader {
                url: self.endpoint.clone(),
                header: "HF_ENDPOINT (not a base URL)",
            })?;
            path.pop_if_empty();
            for segment in segments {
                for part in segment.split('/') {
                    path.push(part);
                }
            }
        }
        Ok(url)
    }

    pub fn resolve_url(&self, repo: &RepoId, rev: &str, file: &str) -> Result<Url, StoreError> {
        self.url(&[repo.as_str(), "resolve", rev, file])
    }

    fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.header(AUTHORIZATION, format!("Bearer {token}")),
            None => request,
        }
    }

    pub async fn repo_info(&self, repo: &RepoId, rev: &str) -> Result<RepoInfo, StoreError> {
        let url = self.url(&["api", "models", repo.as_str(), "revision", rev])?;
        let response = self
            .authorize(self.download.get(url.clone()))
            .send()
            .await
            .map_err(|source| http(&url, source))?;
        let status = response.status();
        if is_not_found(status) {
            return Err(StoreError::RepoNotFound {
                repo: repo.to_string(),
                endpoint: self.endpoint.clone(),
            });
        }
        if !status.is_success() {
            return Err(StoreError::HttpStatus {
                url: url.to_string(),
                status: status.as_u16(),
            });
        }
        let body = response
            .bytes()
            .await
            .map_err(|source| http(&url, source))?;
        let info: RepoInfo =
            serde_json::from_slice(&body).map_err(|source| StoreError::BadResponse {
                url: url.to_string(),
                source,
            })?;
        if !is_safe_name(&info.sha) {
            return Err(StoreError::UnsafeName {
                url: url.to_string(),
                name: info.sha,
            });
        }
        Ok(info)
    }

    pub async fn file_meta(
        &self,
        repo: &RepoId,
        rev: &str,
        file: &str,
    ) -> Result<FileMeta, StoreError> {
        let mut url = self.resolve_url(repo, rev, file)?;
        // Follow only same-host redirects (a renamed repo), as huggingface_hub does; a redirect
        // to another host is the CDN, and the headers we want are on this response.
        for _ in 0..5 {
            let response = self
                .authorize(self.no_redirect.head(url.clone()))
                .header(ACCEPT_ENCODING, "identity")
                .send()
                .await
                .map_err(|source| http(&url, source))?;
            let status = response.status();
            if status.is_redirection() && !response.headers().contains_key("x-linked-etag") {
                if let Some(next) = same_host_redirect(&url, response.headers()) {
                    url = next;
                    continue;
                }
            }
            if is_not_found(status) {
                return Err(self.not_found(repo, file, &response));
            }
            if !status.is_success() && !status.is_redirection() {
                return Err(StoreError::HttpStatus {
                    url: url.to_string(),
                    status: status.as_u16(),
                });
            }
            return meta_from_headers(file, &url, response.headers());
        }
        Err(StoreError::HttpStatus {
            url: url.to_string(),
            status: StatusCode::TOO_MANY_REQUESTS.as_u16(),
        })
    }

    fn not_found(&self, repo: &RepoId, file: &str, response: &Response) -> StoreError {
        let code = response
            .headers()
            .get("x-error-code")
            .and_then(|v| v.to_str().ok());
        match code {
            Some("EntryNotFound") | Some("RevisionNotFound") => StoreError::FileNotFound {
                repo: repo.to_string(),
                file: file.to_string(),
                endpoint: self.endpoint.clone(),
            },
            _ if response.status() == StatusCode::NOT_FOUND && code.is_none() => {
                StoreError::FileNotFound {
                    repo: repo.to_string(),
                    file: file.to_string(),
                    endpoint: self.endpoint.clone(),
                }
            }
            _ => StoreError::RepoNotFound {
                repo: repo.to_string(),
                endpoint: self.endpoint.clone(),
            },
        }
    }

    /// A config.json's whole content, in memory (nothing is written to the cache); more than
    /// `limit` bytes is an error.
    pub async fn fetch_config(
        &self,
        repo: &RepoId,
        rev: &str,
        limit: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let file = "config.json";
        let url = self.resolve_url(repo, rev, file)?;
        let mut response = self.get_from(&url, 0).await?;
        let status = response.status();
        if is_not_found(status) {
            return Err(self.not_found(repo, file, &response));
        }
        if !status.is_success() {
            return Err(StoreError::HttpStatus {
                url: url.to_string(),
                status: status.as_u16(),
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| http(&url, e))? {
            body.extend_from_slice(&chunk);
            if body.len() as u64 > limit {
                return Err(StoreError::ConfigTooLarge {
                    url: url.to_string(),
                    limit,
                });
            }
        }
        Ok(body)
    }

    /// `GET` a file from `offset` on (redirects followed; reqwest drops the token when a
    /// redirect leaves the Hub's host).
    pub async fn get_from(&self, url: &Url, offset: u64) -> Result<Response, StoreError> {
        let mut request = self.authorize(self.download.get(url.clone()));
        if offset > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={offset}-"));
        }
        request.send().await.map_err(|source| http(url, source))
    }
}

pub(crate) fn http(url: &Url, source: reqwest::Error) -> StoreError {
    StoreError::Http {
        url: url.to_string(),
        source,
    }
}

/// The Hub answers 401 (not 404) for a repo that does not exist when no token is sent.
fn is_not_found(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::NOT_FOUND | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
    )
}

fn same_host_redirect(from: &Url, headers: &HeaderMap) -> Option<Url> {
    let location = headers.get(LOCATION)?.to_str().ok()?;
    let next = from.join(location).ok()?;
    (next.host_str() == from.host_str()
        && next.port_or_known_default() == from.port_or_known_default())
    .then_some(next)
}

/// `W/"abc"` and `"abc"` are both legal ETag spellings; the blob is named `abc`.
fn normalize_etag(raw: &str) -> &str {
    raw.trim().trim_start_matches("W/").trim_matches('"')
}

fn meta_from_headers(file: &str, url: &Url, headers: &HeaderMap) -> Result<FileMeta, StoreError> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bad = |header| StoreError::BadHeader {
        url: url.to_string(),
        header,
    };
    let linked = text("x-linked-etag");
    let etag = normalize_etag(linked.or(text(ETAG.as_str())).ok_or_else(|| bad("ETag"))?);
    if !is_safe_name(etag) {
        return Err(bad("ETag"));
    }
    let size_header = if linked.is_some() {
        text("x-linked-size")
    } else {
        text(CONTENT_LENGTH.as_str())
    };
    let size = size_header
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| bad("X-Linked-Size / Content-Length"))?;
    let commit = text("x-repo-commit")
        .map(str::to_string)
        .filter(|c| is_safe_name(c));
    Ok(FileMeta {
        file: file.to_string(),
        commit,
        etag: etag.to_string(),
        size,
        // An LFS etag is the sha256 of the content; check the shape too, so a server that sends
        // X-Linked-Etag with something else does not make every download "corrupt".
        lfs: linked.is_some() && etag.len() == 64 && etag.chars().all(|c| c.is_ascii_hexdigit()),
    })
}

/// Sibling names become paths under `snapshots/`; refuse any that could climb out.
pub(crate) fn check_sibling(url_hint: &str, name: &str) -> Result<(), StoreError> {
    if is_safe_repo_path(name) {
        Ok(())
    } else {
        Err(StoreError::UnsafeName {
            url: url_hint.to_string(),
            name: name.to_string(),
        })
    }
}
