//! How much memory models may take, and how much one takes. The estimate is the size of the
//! weight files on disk: MLX maps them in as they are, and the KV cache of a few requests is
//! small next to them for the models people run locally.

use std::path::Path;

/// Sum of the `*.safetensors` files in a model folder (symlinks followed, as the HF cache
/// links snapshots to blobs); every file when there is none.
pub fn weight_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut weights = 0;
    let mut all = 0;
    for entry in entries.flatten() {
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        all += meta.len();
        if entry
            .file_name()
            .to_string_lossy()
            .ends_with(".safetensors")
        {
            weights += meta.len();
        }
    }
    if weights > 0 {
        weights
    } else {
        all
    }
}

/// The default share of system RAM models may fill, leaving room for the KV caches, the
/// system and the user's other programs.
pub const DEFAULT_FRACTION: f64 = 0.75;

/// `RMX_MAX_MEMORY`: bytes ("8GB", "512MiB", "1.5G", "1000000"), or a share of system RAM
/// ("0.5", "50%"). Unset: [`DEFAULT_FRACTION`] of system RAM.
pub fn budget_from(value: Option<&str>, system_ram: u64) -> Result<u64, String> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok((system_ram as f64 * DEFAULT_FRACTION) as u64);
    };
    if let Some(p) = v.strip_suffix('%') {
        let p: f64 = p.trim().parse().map_err(|_| bad(v))?;
        return Ok((system_ram as f64 * p / 100.0) as u64);
    }
    if let Ok(x) = v.parse::<f64>() {
        if x > 0.0 && x <= 1.0 && v.contains('.') {
            return Ok((system_ram as f64 * x) as u64);
        }
        return Ok(x as u64);
    }
    parse_bytes(v).ok_or_else(|| bad(v))
}

fn bad(v: &str) -> String {
    format!("RMX_MAX_MEMORY=`{v}`: expected bytes like 8GB or 512MiB, or a share of RAM like 0.5 or 50%")
}

fn parse_bytes(v: &str) -> Option<u64> {
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = v.split_at(split);
    let num: f64 = num.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        _ => return None,
    };
    Some((num * scale) as u64)
}

/// Total RAM: `/proc/meminfo` on Linux, `sysctl hw.memsize` on macOS; 16 GiB if neither answers.
pub fn system_ram() -> u64 {
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        let kib = text
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            });
        if let Some(kib) = kib {
            return kib * 1024;
        }
    }
    std::process::Command::new("sysctl")
        .args(["-n", "hw.memsize"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_spellings() {
        let ram = 16_000_000_000;
        assert_eq!(budget_from(None, ram), Ok(12_000_000_000));
        assert_eq!(budget_from(Some("8GB"), ram), Ok(8_000_000_000));
        assert_eq!(budget_from(Some("512MiB"), ram), Ok(512 << 20));
        assert_eq!(budget_from(Some("0.5"), ram), Ok(8_000_000_000));
        assert_eq!(budget_from(Some("25%"), ram), Ok(4_000_000_000));
        assert_eq!(budget_from(Some("1000"), ram), Ok(1000));
        assert!(budget_from(Some("lots"), ram).is_err());
    }
}
