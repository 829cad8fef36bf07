//! Short model names. The built-in table ships inside the binary (`data/aliases.toml`, where
//! the naming convention is written down); users add their own in `$RMX_HOME/aliases.toml`,
//! which override built-ins of the same name.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table};

use crate::error::{IoContext, StoreError};
use crate::repo_id::RepoId;

const BUILTIN_TOML: &str = include_str!("../data/aliases.toml");
const USER_FILE: &str = "aliases.toml";

/// How a model writes tool calls, so the engine knows which parser to run on its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolParser {
    /// `<tool_call>{json}</tool_call>` (Qwen2.5/3, SmolLM3, Hermes).
    Hermes,
    /// `<tool_call><function=name><parameter=...>` XML (Qwen3-Coder, Qwen3.5+).
    Qwen3Coder,
    /// A bare JSON object `{"name": ..., "parameters": ...}` (Llama 3.1+).
    Llama3Json,
    /// `[TOOL_CALLS][...]` (Mistral, Devstral).
    Mistral,
    /// Gemma 3's taught formats: ```` ```tool_code ```` fences or bare JSON.
    Gemma,
    /// `<|tool_call>call:name{..}<tool_call|>` (Gemma 4).
    Gemma4,
    /// OpenAI harmony channels (GPT-OSS).
    Harmony,
    #[default]
    None,
}

/// How a model marks its reasoning, so it can be split from the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningParser {
    /// `<think>...</think>`.
    Think,
    /// harmony's `analysis` channel (GPT-OSS).
    Harmony,
    #[default]
    None,
}

/// What the engine should assume about a model before (or without) reading its files.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelHints {
    #[serde(default)]
    pub tool_parser: ToolParser,
    #[serde(default)]
    pub reasoning_parser: ReasoningParser,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u64>,
    /// How answers store the KV cache on this model unless the request says (`rmx alias add
    /// --kv-bits`): mlx-lm's kv_bits (4 or 8), kv_group_size (32, 64, 128) and
    /// quantized_kv_start, checked where a request uses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_bits: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_group_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_quant_start: Option<i32>,
    /// How answers speculate on this model unless the request says (`rmx alias add
    /// --speculative`): a request's `speculative` value ("prompt-lookup", "draft:MODEL", "mtp") and
    /// `draft_tokens`, checked where a request uses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u8>,
}

impl ModelHints {
    /// A best guess from config.json's `model_type`, for repos no alias describes.
    pub fn guess(model_type: Option<&str>) -> Self {
        let (tool_parser, reasoning_parser) = match model_type.unwrap_or("") {
            "qwen3" | "qwen3_moe" => (ToolParser::Hermes, ReasoningParser::Think),
            "qwen2" | "qwen2_moe" => (ToolParser::Hermes, ReasoningParser::None),
            "qwen3_next" | "qwen3_5" | "qwen3_5_moe" => {
                (ToolParser::Qwen3Coder, ReasoningParser::Think)
            }
            "llama" => (ToolParser::Llama3Json, ReasoningParser::None),
            "mistral" | "mistral3" => (ToolParser::Mistral, ReasoningParser::None),
            "gemma4" | "gemma4_text" => (ToolParser::Gemma4, ReasoningParser::None),
            "gpt_oss" => (ToolParser::Harmony, ReasoningParser::Harmony),
            "smollm3" => (ToolParser::Hermes, ReasoningParser::Think),
            _ => (ToolParser::None, ReasoningParser::None),
        };
        ModelHints {
            tool_parser,
            reasoning_parser,
            ..ModelHints::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AliasSource {
    Builtin,
    User,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alias {
    pub name: String,
    /// A Hugging Face repo id; user aliases may also name an absolute local directory.
    pub repo: String,
    /// The repo's config.json `model_type`, as the built-in table records it (a test checks
    /// rmx loads each one). User aliases leave it out: their config.json is judged once the
    /// model is on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    #[serde(flatten)]
    pub hints: ModelHints,
    pub source: AliasSource,
}

/// One `[[alias]]` row as written in either file.
#[derive(Deserialize)]
struct AliasRow {
    name: String,
    repo: String,
    #[serde(default)]
    family: Option<String>,
    #[serde(flatten)]
    hints: ModelHints,
}

#[derive(Deserialize)]
struct AliasFile {
    #[serde(default)]
    alias: Vec<AliasRow>,
}

/// The compiled-in aliases. The table is our own data, checked by a unit test, so a parse
/// failure is a build bug, not a runtime condition.
pub fn builtin_aliases() -> &'static [Alias] {
    static TABLE: OnceLock<Vec<Alias>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let file: AliasFile = toml_edit::de::from_str(BUILTIN_TOML)
            .expect("data/aliases.toml is valid (checked by builtin_table_parses)");
        rows_to_aliases(file.alias, AliasSource::Builtin)
    })
}

fn rows_to_aliases(rows: Vec<AliasRow>, source: AliasSource) -> Vec<Alias> {
    rows.into_iter()
        .map(|row| Alias {
            name: row.name,
            repo: row.repo,
            family: row.family,
            hints: row.hints,
            source,
        })
        .collect()
}

pub fn user_aliases_path(rmx_home: &Path) -> PathBuf {
    rmx_home.join(USER_FILE)
}

/// The user's aliases; a missing file is an empty list.
pub fn load_user_aliases(path: &Path) -> Result<Vec<Alias>, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).at("read", path),
    };
    let file: AliasFile = toml_edit::de::from_str(&text).map_err(|e| StoreError::Toml {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    Ok(rows_to_aliases(file.alias, AliasSource::User))
}

/// Alias names are typed by people and end up in URLs of the API: keep them plain.
pub fn validate_alias_name(name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'))
    {
        Some("use lowercase letters, digits, `.`, `-` and `_` only")
    } else if name.starts_with(['.', '-']) {
        Some("it must start with a letter or digit")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(StoreError::InvalidAliasName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Add (or replace) a user alias, keeping whatever else the file holds, comments included.
pub fn add_user_alias(
    path: &Path,
    name: &str,
    target: &str,
    hints: ModelHints,
) -> Result<Alias, StoreError> {
    validate_alias_name(name)?;
    if !Path::new(target).is_absolute() {
        RepoId::parse(target)?;
    }
    let mut doc = read_doc(path)?;
    let rows = alias_rows(&mut doc, path)?;
    let mut table = Table::new();
    table["name"] = toml_edit::value(name);
    table["repo"] = toml_edit::value(target);
    let tool = serde_plain(&hints.tool_parser);
    let reasoning = serde_plain(&hints.reasoning_parser);
    table["tool_parser"] = toml_edit::value(tool);
    table["reasoning_parser"] = toml_edit::value(reasoning);
    if let Some(len) = hints.context_length {
        table["context_length"] = toml_edit::value(i64::try_from(len).unwrap_or(i64::MAX));
    }
    for (key, v) in [
        ("kv_bits", hints.kv_bits),
        ("kv_group_size", hints.kv_group_size),
        ("kv_quant_start", hints.kv_quant_start),
    ] {
        if let Some(v) = v {
            table[key] = toml_edit::value(i64::from(v));
        }
    }
    if let Some(method) = &hints.speculative {
        table["speculative"] = toml_edit::value(method.as_str());
    }
    if let Some(k) = hints.draft_tokens {
        table["draft_tokens"] = toml_edit::value(i64::from(k));
    }
    match position_of(rows, name) {
        Some(i) => {
            if let Some(existing) = rows.get_mut(i) {
                *existing = table;
            }
        }
        None => rows.push(table),
    }
    write_doc(path, &doc)?;
    Ok(Alias {
        name: name.to_string(),
        repo: target.to_string(),
        family: None,
        hints,
        source: AliasSource::User,
    })
}

/// Remove a user alias. Built-ins cannot be removed, only overridden.
pub fn remove_user_alias(path: &Path, name: &str) -> Result<(), StoreError> {
    let mut doc = read_doc(path)?;
    let rows = alias_rows(&mut doc, path)?;
    match position_of(rows, name) {
        Some(i) => {
            rows.remove(i);
        }
        None if builtin_aliases().iter().any(|a| a.name == name) => {
            return Err(StoreError::BuiltinAlias {
                name: name.to_string(),
            })
        }
        None => {
            return Err(StoreError::NoSuchUserAlias {
                name: name.to_string(),
                path: path.to_path_buf(),
            })
        }
    }
    write_doc(path, &doc)
}

fn serde_plain<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "none".to_string(),
    }
}

fn position_of(rows: &ArrayOfTables, name: &str) -> Option<usize> {
    rows.iter()
        .position(|t| t.get("name").and_then(|v| v.as_str()) == Some(name))
}

fn read_doc(path: &Path) -> Result<DocumentMut, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).at("read", path),
    };
    text.parse::<DocumentMut>().map_err(|e| StoreError::Toml {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

fn alias_rows<'d>(
    doc: &'d mut DocumentMut,
    path: &Path,
) -> Result<&'d mut ArrayOfTables, StoreError> {
    let item = doc
        .entry("alias")
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
    item.as_array_of_tables_mut()
        .ok_or_else(|| StoreError::Toml {
            path: path.to_path_buf(),
            source: "`alias` must be written as [[alias]] tables".into(),
        })
}

fn write_doc(path: &Path, doc: &DocumentMut) -> Result<(), StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).at("create", dir)?;
    }
    // Write then rename, so a crash never leaves a truncated alias file.
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, doc.to_string()).at("write", &tmp)?;
    std::fs::rename(&tmp, path).at("replace", path)
}

/// Built-in and user aliases together, user entries first.
#[derive(Debug, Clone)]
pub struct AliasRegistry {
    user: Vec<Alias>,
}

impl AliasRegistry {
    pub fn load(rmx_home: &Path) -> Result<Self, StoreError> {
        Ok(AliasRegistry {
            user: load_user_aliases(&user_aliases_path(rmx_home))?,
        })
    }

    pub fn builtin_only() -> Self {
        AliasRegistry { user: Vec::new() }
    }

    pub fn get(&self, name: &str) -> Option<&Alias> {
        self.user
            .iter()
            .chain(builtin_aliases())
            .find(|a| a.name == name)
    }

    /// Every alias in effect (a user alias hides the built-in of the same name), sorted.
    pub fn all(&self) -> Vec<&Alias> {
        let mut out: Vec<&Alias> = self.user.iter().collect();
        for alias in builtin_aliases() {
            if !self.user.iter().any(|u| u.name == alias.name) {
                out.push(alias);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The alias people know a repo by, for `rmx ls`.
    pub fn for_repo(&self, repo: &str) -> Option<&Alias> {
        self.user
            .iter()
            .chain(builtin_aliases())
            .find(|a| a.repo.eq_ignore_ascii_case(repo))
    }

    /// Aliases that start with or contain what the user typed, for "did you mean".
    pub fn suggest(&self, name: &str) -> Vec<String> {
        let needle = name.to_ascii_lowercase();
        let mut hits: Vec<String> = self
            .all()
            .into_iter()
            .filter(|a| !needle.is_empty() && a.name.contains(&needle))
            .map(|a| a.name.clone())
            .collect();
        hits.truncate(5);
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses() {
        let file: Result<AliasFile, _> = toml_edit::de::from_str(BUILTIN_TOML);
        assert!(file.is_ok(), "{:?}", file.err());
        assert!(builtin_aliases().len() >= 40);
    }

    #[test]
    fn builtin_names_follow_the_convention() {
        let quants = ["4bit", "6bit", "8bit", "bf16", "f32", "mxfp4"];
        let mut seen = std::collections::HashSet::new();
        for alias in builtin_aliases() {
            assert!(validate_alias_name(&alias.name).is_ok(), "{}", alias.name);
            assert!(
                quants
                    .iter()
                    .any(|q| alias.name.ends_with(&format!("-{q}"))),
                "{} lacks a quant suffix",
                alias.name
            );
            assert!(seen.insert(&alias.name), "{} twice", alias.name);
            assert!(RepoId::parse(&alias.repo).is_ok(), "{}", alias.repo);
            assert!(alias.hints.context_length.is_some(), "{}", alias.name);
        }
    }

    /// Whether rmx loads each family is checked where the engine's list is known
    /// (rmx-server's tests/alias_families.rs); here, that every row names one, spelled as
    /// config.json spells `model_type`.
    #[test]
    fn every_builtin_alias_records_its_family() {
        for alias in builtin_aliases() {
            let family = alias.family.as_deref().unwrap_or_default();
            assert!(
                !family.is_empty()
                    && family
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}: family {family:?}",
                alias.name
            );
        }
    }

    #[test]
    fn builtin_table_covers_the_families() {
        for family in [
            "qwen3-",
            "qwen3.5-",
            "qwen3.6-",
            "llama3",
            "gemma3",
            "gemma4",
            "mistral",
            "devstral",
            "phi4",
            "gpt-oss",
            "deepseek-r1",
            "smollm2",
            "smollm3",
        ] {
            assert!(
                builtin_aliases().iter().any(|a| a.name.starts_with(family)),
                "{family}"
            );
        }
    }
}
