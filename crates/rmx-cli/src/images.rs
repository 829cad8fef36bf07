//! Image files for the prompt (`rmx run --image`, the chat's `/image`), sent as the base64
//! strings of Ollama's `images`. The CLI checks only what it must to send a file: that it can
//! be read and fits a request. Whether it is an image the model can take is the daemon's to
//! say: it decodes the image (so it is decoded once, by the code that will use it), and its
//! 400 says what is wrong.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use base64::Engine as _;

/// The most images one request may carry (the daemon refuses more).
pub const MAX: usize = rmx_server::service::MAX_IMAGES_PER_REQUEST;

/// The most base64 the images of one request may take: the daemon's body limit less 1 MiB
/// for the text and the rest of the request. Over it the daemon would refuse the whole body
/// without reading which part was large; this says it in terms of the images.
const MAX_BASE64: usize = rmx_server::router::BODY_LIMIT - (1 << 20);

/// An image file read for sending.
#[derive(Debug, Clone)]
pub struct Image {
    pub path: PathBuf,
    /// The file's bytes in base64, as the API takes them.
    pub base64: String,
}

/// Reads an image file for a request. The errors name the path and what to do.
pub fn read(path: &Path) -> Result<Image> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "no image file {shown}: check the path (an image is a PNG, JPEG, WebP or GIF file)"
            )
        }
        Err(e) => bail!("cannot read the image {shown}: {e}; check the path and its permissions"),
    };
    if meta.is_dir() {
        bail!("{shown} is a folder: give an image file (PNG, JPEG, WebP or GIF)");
    }
    // Checked before reading, so a wrong path to a huge file fails at once.
    if base64_len(meta.len()) > MAX_BASE64 {
        bail!(
            "the image {shown} is {}; a request takes at most {} of images: send a smaller \
             image (the model scales it down anyway: to 896x896 for Gemma 3, within 1540 for Mistral)",
            mib(meta.len() as usize),
            mib(MAX_BASE64 / 4 * 3)
        );
    }
    let bytes = std::fs::read(path).map_err(|e| {
        anyhow::anyhow!("cannot read the image {shown}: {e}; check its permissions")
    })?;
    Ok(Image {
        path: path.to_path_buf(),
        base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// Reads the images of one request, refusing more than the daemon takes before reading any.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<Image>> {
    if paths.len() > MAX {
        bail!(
            "{} images, over the limit of {MAX} per request: send fewer",
            paths.len()
        );
    }
    let images = paths.iter().map(|p| read(p)).collect::<Result<Vec<_>>>()?;
    check_size(images.iter().map(|i| i.base64.len()).sum())?;
    Ok(images)
}

/// Refuses images whose base64 (`total` bytes) would not fit one request.
pub fn check_size(total: usize) -> Result<()> {
    if total > MAX_BASE64 {
        bail!(
            "the images come to {} in all; a request takes at most {} of images: send fewer \
             or smaller images",
            mib(total / 4 * 3),
            mib(MAX_BASE64 / 4 * 3)
        );
    }
    Ok(())
}

fn base64_len(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(3).saturating_mul(4)).unwrap_or(usize::MAX)
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A fresh folder of this test's own (the crate has no tempfile dependency).
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("rmx-cli-images-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_is_sent_as_its_bytes_in_base64() {
        let dir = scratch("read");
        let path = dir.join("a.png");
        std::fs::write(&path, b"not decoded here").unwrap();
        let image = read(&path).unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(&image.base64)
                .unwrap(),
            b"not decoded here"
        );
        assert_eq!(image.path, path);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn errors_name_the_path_and_what_to_do() {
        let dir = scratch("errors");
        let missing = dir.join("missing.png");
        let e = format!("{:#}", read(&missing).unwrap_err());
        assert!(
            e.contains("missing.png") && e.contains("check the path"),
            "{e}"
        );
        let e = format!("{:#}", read(&dir).unwrap_err());
        assert!(e.contains("is a folder"), "{e}");
        let e = format!("{:#}", read_all(&vec![missing; MAX + 1]).unwrap_err());
        assert!(e.contains(&format!("{} images", MAX + 1)), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn too_much_base64_for_one_request_is_refused() {
        assert!(check_size(MAX_BASE64).is_ok());
        let e = format!("{:#}", check_size(MAX_BASE64 + 1).unwrap_err());
        assert!(e.contains("send fewer or smaller images"), "{e}");
        assert_eq!(base64_len(3), 4);
        assert_eq!(base64_len(4), 8);
    }
}
