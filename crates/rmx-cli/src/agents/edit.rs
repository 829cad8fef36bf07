//! Editing other tools' config files without losing anything of the user's: a backup before the
//! first change, writes that never leave half a file (temp file + rename), a diff to show first,
//! and small line-wise YAML edits (a YAML library would round-trip the file and drop comments).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// `<file>.rmx-backup`: the file as it was before rmx first changed it.
pub fn backup_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".rmx-backup");
    file.with_file_name(name)
}

/// The file's text, or "" when it does not exist yet.
pub fn read_or_empty(file: &Path) -> Result<Option<String>> {
    match fs::read(file) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .with_context(|| format!("{} is not UTF-8 text", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", file.display())),
    }
}

/// Writes `text` to `file` through a temp file in the same folder and a rename, so a crash
/// leaves either the old file or the new one. Keeps the old file's permissions.
pub fn write_atomic(file: &Path, text: &str) -> Result<()> {
    let dir = file.parent().context("the config file has no folder")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".rmx-tmp-{}", std::process::id()));
    let tmp = dir.join(name);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        if let Ok(meta) = fs::metadata(file) {
            fs::set_permissions(&tmp, meta.permissions())?;
        }
        fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", file.display()))
}

/// Saves the current file as the backup unless one exists: the backup keeps the state before
/// rmx's first change, so a second `--setup` does not overwrite the user's original.
/// Returns whether a backup was written now.
pub fn backup(file: &Path) -> Result<bool> {
    let backup = backup_path(file);
    if backup.exists() || !file.exists() {
        return Ok(false);
    }
    let bytes = fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let tmp = {
        let mut n = backup.file_name().unwrap_or_default().to_os_string();
        n.push(".tmp");
        backup.with_file_name(n)
    };
    fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
    if let Ok(meta) = fs::metadata(file) {
        let _ = fs::set_permissions(&tmp, meta.permissions());
    }
    fs::rename(&tmp, &backup).with_context(|| format!("writing {}", backup.display()))?;
    Ok(true)
}

/// Puts the backup back byte for byte and removes it.
pub fn restore(file: &Path) -> Result<()> {
    let backup = backup_path(file);
    if !backup.exists() {
        bail!(
            "no backup at {} (rmx makes one the first time --setup changes an existing file)",
            backup.display()
        );
    }
    fs::rename(&backup, file)
        .with_context(|| format!("moving {} back to {}", backup.display(), file.display()))
}

/// A unified diff of the old and new text, labelled with the file's path.
pub fn unified_diff(file: &Path, old: &str, new: &str) -> String {
    let name = file.display().to_string();
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("{name} (now)"), &format!("{name} (after setup)"))
        .to_string()
}

/// Quotes a YAML scalar (double quotes, JSON escaping is valid YAML).
pub fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Sets a top-level `key: value` line: the first line starting with `key:` at column 0 is
/// replaced (a trailing comment on it is kept), else the line is appended. Every other line,
/// comments included, stays as it is.
pub fn yaml_set_top(text: &str, key: &str, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let prefix = format!("{key}:");
    let found = lines.iter().position(|l| {
        l.starts_with(&prefix)
            && l[prefix.len()..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t')
    });
    match found {
        Some(i) => {
            let comment = trailing_comment(&lines[i][prefix.len()..]);
            lines[i] = format!("{prefix} {value}{comment}");
        }
        None => lines.push(format!("{prefix} {value}")),
    }
    join_lines(lines, text)
}

/// Sets `key: value` inside the top-level mapping `section:` (indented two spaces, or as the
/// block's first child is indented), creating the section at the end when it is missing.
pub fn yaml_set_nested(text: &str, section: &str, key: &str, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let head = format!("{section}:");
    let Some(start) = lines.iter().position(|l| {
        l.strip_prefix(&head)
            .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
    }) else {
        lines.push(head);
        lines.push(format!("  {key}: {value}"));
        return join_lines(lines, text);
    };
    // The block: the lines after the header that are indented, blank or comments.
    let mut end = start + 1;
    while end < lines.len() {
        let l = &lines[end];
        if l.trim().is_empty() || l.starts_with(' ') || l.starts_with('\t') || l.starts_with('#') {
            end += 1;
        } else {
            break;
        }
    }
    // Do not swallow trailing blank lines and comments that introduce the next section.
    while end > start + 1 && !lines[end - 1].starts_with(' ') && !lines[end - 1].starts_with('\t') {
        end -= 1;
    }
    let indent = lines[start + 1..end]
        .iter()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| l[..l.len() - l.trim_start().len()].to_string())
        .unwrap_or_else(|| "  ".to_string());
    let prefix = format!("{indent}{key}:");
    let found = (start + 1..end).find(|&i| {
        let l = &lines[i];
        l.starts_with(&prefix)
            && l[prefix.len()..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t')
    });
    match found {
        Some(i) => {
            let comment = trailing_comment(&lines[i][prefix.len()..]);
            lines[i] = format!("{prefix} {value}{comment}");
        }
        None => lines.insert(end, format!("{prefix} {value}")),
    }
    join_lines(lines, text)
}

/// ` # comment` after a value, kept when the value is replaced. A `#` inside quotes is part of
/// the value, not a comment.
fn trailing_comment(rest: &str) -> String {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in rest.char_indices() {
        match quote {
            Some(q) if c == q && prev != '\\' => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && (prev == ' ' || prev == '\t') => {
                let start = rest[..i].trim_end().len();
                return rest[start..].to_string();
            }
            None => {}
        }
        prev = c;
    }
    String::new()
}

/// Joins lines, keeping the original's final newline (or adding one to a new file).
fn join_lines(lines: Vec<String>, original: &str) -> String {
    let mut out = lines.join("\n");
    if original.is_empty() || original.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Parses `text` as a JSON object ("" is an empty one), for merging keys into it.
pub fn json_object(text: &str, file: &Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    if text.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => bail!("{} is not a JSON object", file.display()),
        Err(e) => Err(e).with_context(|| {
            format!(
                "{} is not plain JSON (rmx does not edit files with comments in JSON); \
                 fix or move it and run again",
                file.display()
            )
        }),
    }
}

/// The object under `key`, created when missing (replacing a non-object).
pub fn json_child<'a>(
    map: &'a mut serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> &'a mut serde_json::Map<String, serde_json::Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if !slot.is_object() {
        *slot = serde_json::Value::Object(Default::default());
    }
    slot.as_object_mut().expect("just made an object")
}

/// Pretty JSON with two-space indents and a final newline (what these tools write themselves).
pub fn json_text(map: serde_json::Map<String, serde_json::Value>) -> Result<String> {
    let mut s = serde_json::to_string_pretty(&serde_json::Value::Object(map))?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_yaml_keys_are_replaced_in_place_and_comments_stay() {
        let text = "# mine\nmodel: gpt-4 # old\nother: 1\n";
        let out = yaml_set_top(text, "model", "openai/x");
        assert_eq!(out, "# mine\nmodel: openai/x # old\nother: 1\n");
        let out = yaml_set_top(&out, "openai-api-base", "\"http://h/v1\"");
        assert_eq!(
            out,
            "# mine\nmodel: openai/x # old\nother: 1\nopenai-api-base: \"http://h/v1\"\n"
        );
    }

    #[test]
    fn nested_yaml_keys_go_into_their_section() {
        let text = "model:\n  default: a\n  # note\n\n# next\nother: 2\n";
        let out = yaml_set_nested(text, "model", "base_url", "b");
        assert_eq!(
            out,
            "model:\n  default: a\n  # note\n  base_url: b\n\n# next\nother: 2\n"
        );
        let out = yaml_set_nested(&out, "model", "default", "c");
        assert!(out.contains("  default: c\n"));
        let out = yaml_set_nested("x: 1\n", "model", "default", "c");
        assert_eq!(out, "x: 1\nmodel:\n  default: c\n");
    }
}
