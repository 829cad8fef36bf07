//! Image bytes out of what clients send: OpenAI's `image_url` data URIs, Ollama's and
//! Anthropic's base64 strings. Each surface wraps the error in its own shape; what the bytes
//! hold is judged later, by the model's image processor (`prompt.rs`).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// The bytes of a base64 string (standard alphabet, padded or not; whitespace, as some clients
/// wrap long lines, is skipped).
pub fn decode_base64(data: &str) -> Result<Vec<u8>, String> {
    let clean: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let padded = match clean.len() % 4 {
        2 => format!("{clean}=="),
        3 => format!("{clean}="),
        _ => clean,
    };
    STANDARD
        .decode(padded)
        .map_err(|e| format!("the image is not valid base64 ({e})"))
}

/// `bytes` as standard base64 (padded), the form Anthropic's and Ollama's image fields hold.
pub fn encode_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// The bytes of an image URL: only `data:image/...;base64,...` is read here; an http(s) URL is
/// refused (where the daemon fetches URLs, `RMX_IMAGE_URLS=1`, each surface has swapped them for
/// data URIs before: service/image_fetch.rs).
pub fn image_url_bytes(url: &str) -> Result<Vec<u8>, String> {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err(
            "image URLs are not fetched: URL fetching is not enabled on this server \
             (RMX_IMAGE_URLS=1 in the daemon's environment turns it on); send the image inline \
             as a data URI (data:image/png;base64,...)"
                .into(),
        );
    }
    let Some(rest) = url.strip_prefix("data:") else {
        return Err(
            "the image URL is not a data URI; send data:image/png;base64,... (PNG, JPEG, WebP \
             or GIF)"
                .into(),
        );
    };
    let Some((header, data)) = rest.split_once(',') else {
        return Err("the data URI has no `,` before its data".into());
    };
    if !header.ends_with(";base64") {
        return Err("the data URI is not base64 (`data:image/png;base64,...`)".into());
    }
    decode_base64(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_uris_and_base64_decode_and_urls_are_refused() {
        assert_eq!(
            image_url_bytes("data:image/png;base64,AQID"),
            Ok(vec![1, 2, 3])
        );
        assert_eq!(decode_base64("AQI"), Ok(vec![1, 2]));
        assert_eq!(decode_base64("AQ\nID"), Ok(vec![1, 2, 3]));
        let url = image_url_bytes("HTTPS://example.com/a.png").unwrap_err();
        assert!(url.contains("URL fetching is not enabled"), "{url}");
        assert!(image_url_bytes("data:image/png,abc").is_err());
        assert!(image_url_bytes("file:///etc/passwd").is_err());
        assert!(decode_base64("not base64!").is_err());
    }
}
