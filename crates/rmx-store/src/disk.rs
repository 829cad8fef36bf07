//! Free disk space and byte counts for people.

use std::io;
use std::path::Path;
use std::sync::Arc;

/// How the store asks for free space. Injected so tests can pretend a disk is full.
pub type FreeSpaceFn = Arc<dyn Fn(&Path) -> io::Result<u64> + Send + Sync>;

/// The real free space (for this user) of the file system holding `path`, or of its nearest
/// existing ancestor: the cache folder may not exist before the first pull.
pub fn available_space(path: &Path) -> io::Result<u64> {
    let mut probe = path;
    loop {
        if probe.exists() {
            return fs4::available_space(probe);
        }
        match probe.parent() {
            Some(parent) => probe = parent,
            None => return fs4::available_space(path),
        }
    }
}

/// `1.5 GB`-style sizes (decimal units, as Hugging Face and Ollama show them).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_uses_decimal_units() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 KB");
        assert_eq!(human_bytes(4_500_000_000), "4.5 GB");
    }
}
