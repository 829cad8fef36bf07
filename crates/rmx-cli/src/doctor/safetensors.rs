//! Whether a snapshot's weight files are whole: a safetensors file starts with the length of a
//! JSON header that gives every tensor's byte range, so a file shorter than the end of its last
//! range was cut off (an interrupted copy, a full disk) even though the file exists.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// One line per problem found in the folder's `*.safetensors` files (dangling links included).
pub fn check_dir(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![format!("cannot read {}", dir.display())];
    };
    let mut problems = Vec::new();
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if std::fs::metadata(&path).is_err() {
            problems.push(format!("{name} is a broken link (its blob is missing)"));
            continue;
        }
        if name.ends_with(".safetensors") {
            if let Err(problem) = check_file(&path) {
                problems.push(format!("{name}: {problem}"));
            }
        }
    }
    problems
}

fn check_file(path: &Path) -> Result<(), String> {
    let mut file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix)
        .map_err(|_| format!("truncated: {len} bytes, shorter than the 8-byte header length"))?;
    let header_len = u64::from_le_bytes(prefix);
    if header_len > 100 << 20 {
        return Err(format!(
            "not a safetensors file (header length {header_len})"
        ));
    }
    if 8 + header_len > len {
        return Err(format!(
            "truncated: {len} bytes, but the header alone needs {}",
            8 + header_len
        ));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header).map_err(|e| e.to_string())?;
    let json: serde_json::Value =
        serde_json::from_slice(&header).map_err(|e| format!("the header is not JSON: {e}"))?;
    let end = json
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "__metadata__")
        .filter_map(|(_, v)| v.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    let expected = 8 + header_len + end;
    if len < expected {
        return Err(format!(
            "truncated: {len} bytes, but its header says {expected}"
        ));
    }
    Ok(())
}
