//! Images named by http(s) URL, fetched by the daemon only where `RMX_IMAGE_URLS=1` allows it:
//! a server that fetches whatever a client names can be made to reach hosts the client cannot
//! (other services on the machine or its network), so it is off unless the user turns it on.
//! Each surface swaps a fetched URL for the same bytes as a data URI before it reads the request,
//! so what the bytes hold is judged as for an inline image (the model's image processor, with its
//! limits on dimensions before anything is decoded).

use std::time::Duration;

/// The most bytes one fetched image may have (an inline one is bounded by the request's size).
pub const MAX_FETCH_BYTES: usize = 20 << 20;
/// How long one fetch may take, connection, redirects and body included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed before a fetch gives up.
const MAX_REDIRECTS: usize = 3;

/// Fetches images by URL, within a size and a time limit.
#[derive(Clone, Debug)]
pub struct ImageFetcher {
    client: reqwest::Client,
    max_bytes: usize,
    timeout: Duration,
}

impl ImageFetcher {
    pub fn new() -> ImageFetcher {
        ImageFetcher::with_limits(MAX_FETCH_BYTES, FETCH_TIMEOUT)
    }

    pub fn with_limits(max_bytes: usize, timeout: Duration) -> ImageFetcher {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .build()
            .unwrap_or_default();
        ImageFetcher {
            client,
            max_bytes,
            timeout,
        }
    }

    /// The bytes of the image at `url` (http or https), or why they could not be had: a failed
    /// connection or timeout, a status other than success, a body that is said to be something
    /// other than an image, or more than the limit.
    pub async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let mut resp = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("the image URL could not be fetched ({})", self.reason(e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("fetching the image URL gave HTTP {status}"));
        }
        let kind = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase);
        if let Some(kind) = kind.filter(|k| !k.starts_with("image/") && !k.contains("octet-stream"))
        {
            return Err(format!("the image URL holds {kind}, not an image"));
        }
        let too_big = || {
            format!(
                "the image at the URL is over the limit of {} MB",
                self.max_bytes >> 20
            )
        };
        if resp
            .content_length()
            .is_some_and(|n| n > self.max_bytes as u64)
        {
            return Err(too_big());
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("the image URL could not be read ({})", self.reason(e)))?
        {
            if body.len() + chunk.len() > self.max_bytes {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A fetch error in a few words (reqwest's own text names the URL, which the client knows).
    fn reason(&self, e: reqwest::Error) -> String {
        if e.is_timeout() {
            format!("no answer within {} ms", self.timeout.as_millis())
        } else if e.is_redirect() {
            format!("more than {MAX_REDIRECTS} redirects")
        } else if e.is_connect() {
            "the host could not be reached".into()
        } else {
            e.without_url().to_string()
        }
    }
}

impl Default for ImageFetcher {
    fn default() -> Self {
        ImageFetcher::new()
    }
}

/// Whether `url` is one a fetcher takes: http or https (any case).
pub fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// `bytes` as a data URI, the form every surface reads an inline image in.
pub fn data_uri(bytes: &[u8]) -> String {
    format!("data:image/*;base64,{}", super::encode_base64(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-connection HTTP server answering `head` and then `body` (or nothing, `stall`).
    async fn serve(head: String, body: Vec<u8>, stall: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            if stall {
                tokio::time::sleep(Duration::from_secs(5)).await;
                return;
            }
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(&body).await;
        });
        format!("http://{addr}/a.png")
    }

    fn ok_head(kind: &str, len: usize) -> String {
        format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
    }

    #[tokio::test]
    async fn fetches_an_image_and_refuses_what_is_not_one() {
        let f = ImageFetcher::with_limits(64, Duration::from_millis(500));
        let png = b"\x89PNG\r\n\x1a\n0123".to_vec();
        let url = serve(ok_head("image/png", png.len()), png.clone(), false).await;
        assert_eq!(f.fetch(&url).await, Ok(png));

        let url = serve(ok_head("text/html", 5), b"<html".to_vec(), false).await;
        let e = f.fetch(&url).await.unwrap_err();
        assert!(e.contains("text/html, not an image"), "{e}");

        let head = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string();
        let e = f
            .fetch(&serve(head, vec![], false).await)
            .await
            .unwrap_err();
        assert!(e.contains("HTTP 404"), "{e}");

        // Said to be too big, and too big without saying.
        let url = serve(ok_head("image/png", 65), vec![0; 65], false).await;
        assert!(f.fetch(&url).await.unwrap_err().contains("over the limit"));
        let head = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n";
        let url = serve(head.to_string(), vec![0; 100], false).await;
        assert!(f.fetch(&url).await.unwrap_err().contains("over the limit"));

        let e = f.fetch(&serve(String::new(), vec![], true).await).await;
        assert!(e.unwrap_err().contains("no answer within"));

        let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/a.png", dead.local_addr().unwrap());
        drop(dead);
        assert!(f.fetch(&url).await.unwrap_err().contains("could not be"));
    }

    #[test]
    fn web_urls_and_data_uris() {
        assert!(is_web_url("HTTPS://example.com/a.png"));
        assert!(is_web_url("http://x/y"));
        assert!(!is_web_url("data:image/png;base64,AQID"));
        assert!(!is_web_url("file:///etc/passwd"));
        let uri = data_uri(&[1, 2, 3]);
        assert_eq!(super::super::image_url_bytes(&uri), Ok(vec![1, 2, 3]));
    }
}
