//! A model's tokenizer as a Hugging Face model folder describes it.
//!
//! Three files say what a model's text looks like: `tokenizer.json` (the tokenizer itself, run
//! by the `tokenizers` crate), `tokenizer_config.json` (special tokens and the chat template)
//! and `generation_config.json` (which ids end a turn). They disagree in practice, so the stop
//! ids are the union of what they say, and every field is optional but `tokenizer.json`.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The named special tokens transformers passes to every chat template.
const SPECIAL_TOKEN_NAMES: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot load the tokenizer in {path}")]
    Load {
        path: PathBuf,
        #[source]
        source: tokenizers::Error,
    },
    #[error("{path}: field `{field}` {reason}")]
    Field {
        path: PathBuf,
        field: &'static str,
        reason: String,
    },
    #[error("cannot encode text")]
    Encode(#[source] tokenizers::Error),
    #[error("cannot decode token ids")]
    Decode(#[source] tokenizers::Error),
}

/// A loaded tokenizer with what its model folder says about special tokens and templates.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    special_tokens: BTreeMap<String, String>,
    add_bos_token: Option<bool>,
    bos_token_id: Option<u32>,
    eos_token_ids: BTreeSet<u32>,
    special_ids: HashSet<u32>,
    chat_template: Option<String>,
    named_templates: BTreeMap<String, String>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("special_tokens", &self.special_tokens)
            .field("eos_token_ids", &self.eos_token_ids)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Loads `tokenizer.json` and whichever of the other files the folder has.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, TokenizerError> {
        let dir = dir.as_ref();
        let tokenizer_path = dir.join("tokenizer.json");
        // Through the process's cache of parsed tokenizer files (parsed_tokenizers.rs): a
        // reload of a model, or another quantization of it, skips seconds of parsing.
        let mut inner = std::fs::read(&tokenizer_path)
            .map_err(tokenizers::Error::from)
            .and_then(crate::parsed_tokenizers::parse)
            .map_err(|source| TokenizerError::Load {
                path: tokenizer_path.clone(),
                source,
            })?;
        let config_path = dir.join("tokenizer_config.json");
        let config = read_json_if_present(&config_path)?.unwrap_or(Value::Null);
        let generation_path = dir.join("generation_config.json");
        let generation = read_json_if_present(&generation_path)?.unwrap_or(Value::Null);

        // Encoders' tokenizer.json files often carry truncation (all-MiniLM: 128) and padding
        // settings; rmx pads its own batches and truncates only where a request allows
        // (`encode_truncated`), never a prompt behind the caller's back.
        let _ = inner.with_truncation(None);
        inner.with_padding(None);

        if uses_llama_sentencepiece_class(&config, &inner) {
            apply_llama_pre_tokenizer(&mut inner, &config);
        }

        let mut special_tokens = BTreeMap::new();
        for name in SPECIAL_TOKEN_NAMES {
            if let Some(token) = config.get(name).and_then(token_content) {
                special_tokens.insert(name.to_string(), token);
            }
        }
        // Gemma 3 and other multimodal tokenizers name extra tokens (`boi_token`, ...) here;
        // transformers passes them to the template beside the standard ones.
        if let Some(extra) = config
            .get("extra_special_tokens")
            .and_then(Value::as_object)
        {
            for (name, value) in extra {
                if let Some(token) = token_content(value) {
                    special_tokens.entry(name.clone()).or_insert(token);
                }
            }
        }

        let mut special_ids: HashSet<u32> = inner
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, token)| token.special)
            .map(|(id, _)| id)
            .collect();
        for token in special_tokens.values() {
            if let Some(id) = inner.token_to_id(token) {
                special_ids.insert(id);
            }
        }

        let mut eos_token_ids = token_ids(&generation, "eos_token_id", &generation_path)?;
        if let Some(id) = special_tokens
            .get("eos_token")
            .and_then(|token| inner.token_to_id(token))
        {
            eos_token_ids.insert(id);
        }
        let bos_token_id = token_ids(&generation, "bos_token_id", &generation_path)?
            .into_iter()
            .next()
            .or_else(|| {
                special_tokens
                    .get("bos_token")
                    .and_then(|token| inner.token_to_id(token))
            });

        let (chat_template, named_templates) = load_chat_templates(dir, &config, &config_path)?;

        Ok(Self {
            inner,
            special_tokens,
            add_bos_token: config.get("add_bos_token").and_then(Value::as_bool),
            bos_token_id,
            eos_token_ids,
            special_ids,
            chat_template,
            named_templates,
        })
    }

    /// Token ids of `text`; `add_special_tokens` runs the post-processor of `tokenizer.json`
    /// (the BOS for Llama and Gemma), which is what transformers does too.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self
            .inner
            .encode_fast(text, add_special_tokens)
            .map_err(TokenizerError::Encode)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// [`Tokenizer::encode`] with special tokens, cut to at most `max_len` tokens the way
    /// transformers' `truncation=True` cuts (the text's tokens go, the special tokens the
    /// post-processor adds stay); also whether anything was cut.
    pub fn encode_truncated(
        &self,
        text: &str,
        max_len: usize,
    ) -> Result<(Vec<u32>, bool), TokenizerError> {
        let mut cut = self.inner.clone();
        cut.with_truncation(Some(tokenizers::TruncationParams {
            max_length: max_len,
            ..Default::default()
        }))
        .map_err(TokenizerError::Encode)?;
        let encoding = cut
            .encode_fast(text, true)
            .map_err(TokenizerError::Encode)?;
        let truncated = !encoding.get_overflowing().is_empty();
        Ok((encoding.get_ids().to_vec(), truncated))
    }

    /// Text of `ids`, without transformers' `clean_up_tokenization_spaces` (which would turn
    /// generated code like `a .b` into `a.b`).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TokenizerError> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(TokenizerError::Decode)
    }

    /// Ids that end generation: `generation_config.json`'s `eos_token_id` (one or a list)
    /// together with the id of `tokenizer_config.json`'s `eos_token`.
    pub fn eos_token_ids(&self) -> &BTreeSet<u32> {
        &self.eos_token_ids
    }

    pub fn is_eos(&self, id: u32) -> bool {
        self.eos_token_ids.contains(&id)
    }

    pub fn bos_token_id(&self) -> Option<u32> {
        self.bos_token_id
    }

    pub fn bos_token(&self) -> Option<&str> {
        self.special_token("bos_token")
    }

    pub fn eos_token(&self) -> Option<&str> {
        self.special_token("eos_token")
    }

    pub fn pad_token(&self) -> Option<&str> {
        self.special_token("pad_token")
    }

    /// `tokenizer_config.json`'s `add_bos_token`, when it says.
    pub fn add_bos_token(&self) -> Option<bool> {
        self.add_bos_token
    }

    /// A named special token (`bos_token`, `boi_token`, ...) as the config spells it.
    pub fn special_token(&self, name: &str) -> Option<&str> {
        self.special_tokens.get(name).map(String::as_str)
    }

    /// The named special tokens, as chat templates see them (`bos_token` -> `<s>`, ...).
    pub fn special_tokens(&self) -> &BTreeMap<String, String> {
        &self.special_tokens
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Whether `id` is an added token marked special (or one of the named special tokens):
    /// those are the ones `decode(.., skip_special_tokens = true)` drops.
    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.contains(&id)
    }

    /// The default chat template: `chat_template.jinja` when present, else the config's.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// A named chat template (`tool_use`, `rag`, ...) from a list-shaped `chat_template` or
    /// from `chat_templates/<name>.jinja`.
    pub fn named_chat_template(&self, name: &str) -> Option<&str> {
        self.named_templates.get(name).map(String::as_str)
    }

    pub fn named_chat_templates(&self) -> impl Iterator<Item = (&str, &str)> {
        self.named_templates
            .iter()
            .map(|(name, source)| (name.as_str(), source.as_str()))
    }

    /// The underlying `tokenizers` tokenizer, for what this type does not wrap.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// The default chat template of a model folder, found where [`Tokenizer::from_dir`] finds it,
/// without loading the tokenizer: what the daemon reports for a model it has not loaded.
pub fn chat_template_in(dir: &Path) -> Result<Option<String>, TokenizerError> {
    let config_path = dir.join("tokenizer_config.json");
    let config = read_json_if_present(&config_path)?.unwrap_or(Value::Null);
    Ok(load_chat_templates(dir, &config, &config_path)?.0)
}

/// transformers 5 does not run the SentencePiece normalizer that Llama-2-era `tokenizer.json`
/// files carry (prepend "▁", spaces to "▁"): its `LlamaTokenizer` class swaps in a Metaspace
/// pre-tokenizer, which adds no second "▁" before text that starts with a space, and with
/// `legacy: false` none after special tokens. mlx-lm tokenizes through transformers, so
/// prompts must be split the same way here.
fn uses_llama_sentencepiece_class(config: &Value, inner: &tokenizers::Tokenizer) -> bool {
    let class = config.get("tokenizer_class").and_then(Value::as_str);
    if !matches!(class, Some("LlamaTokenizer" | "LlamaTokenizerFast")) {
        return false;
    }
    let Some(normalizer) = inner
        .get_normalizer()
        .and_then(|n| serde_json::to_value(n).ok())
    else {
        return false;
    };
    let steps = match normalizer.get("normalizers").and_then(Value::as_array) {
        Some(steps) => steps.clone(),
        None => vec![normalizer],
    };
    steps.iter().any(|step| {
        step.get("type").and_then(Value::as_str) == Some("Prepend")
            && step.get("prepend").and_then(Value::as_str) == Some("\u{2581}")
    })
}

fn apply_llama_pre_tokenizer(inner: &mut tokenizers::Tokenizer, config: &Value) {
    use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
    let add_prefix_space = config
        .get("add_prefix_space")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let legacy = config
        .get("legacy")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let scheme = match (add_prefix_space, legacy) {
        (false, _) => PrependScheme::Never,
        (true, true) => PrependScheme::Always,
        (true, false) => PrependScheme::First,
    };
    inner.with_normalizer(None::<tokenizers::NormalizerWrapper>);
    inner.with_pre_tokenizer(Some(Metaspace::new('\u{2581}', scheme, false)));
}

fn read_json_if_present(path: &Path) -> Result<Option<Value>, TokenizerError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TokenizerError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| TokenizerError::Json {
            path: path.to_path_buf(),
            source,
        })
}

fn read_text_if_present(path: &Path) -> Result<Option<String>, TokenizerError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TokenizerError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// A special token written either as a string or as a serialized `AddedToken`.
fn token_content(value: &Value) -> Option<String> {
    match value {
        Value::String(token) => Some(token.clone()),
        Value::Object(map) => map.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

fn token_ids(
    config: &Value,
    field: &'static str,
    path: &Path,
) -> Result<BTreeSet<u32>, TokenizerError> {
    let bad = |reason: String| TokenizerError::Field {
        path: path.to_path_buf(),
        field,
        reason,
    };
    let as_id = |value: &Value| {
        value
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| bad(format!("holds {value}, not a token id")))
    };
    match config.get(field) {
        None | Some(Value::Null) => Ok(BTreeSet::new()),
        Some(Value::Array(ids)) => ids.iter().map(as_id).collect(),
        Some(value) => Ok(BTreeSet::from([as_id(value)?])),
    }
}

type Templates = (Option<String>, BTreeMap<String, String>);

fn load_chat_templates(
    dir: &Path,
    config: &Value,
    config_path: &Path,
) -> Result<Templates, TokenizerError> {
    let mut default = None;
    let mut named = BTreeMap::new();
    match config.get("chat_template") {
        None | Some(Value::Null) => {}
        Some(Value::String(source)) => default = Some(source.clone()),
        Some(Value::Array(entries)) => {
            for entry in entries {
                let name = entry.get("name").and_then(Value::as_str);
                let source = entry.get("template").and_then(Value::as_str);
                let (Some(name), Some(source)) = (name, source) else {
                    return Err(TokenizerError::Field {
                        path: config_path.to_path_buf(),
                        field: "chat_template",
                        reason: "has a list entry without a string `name` and `template`".into(),
                    });
                };
                named.insert(name.to_string(), source.to_string());
            }
            default = named.get("default").cloned();
        }
        Some(other) => {
            return Err(TokenizerError::Field {
                path: config_path.to_path_buf(),
                field: "chat_template",
                reason: format!("is neither a string nor a list but {other}"),
            })
        }
    }
    // Processors of multimodal models keep the template in `chat_template.json`.
    if default.is_none() {
        let path = dir.join("chat_template.json");
        if let Some(json) = read_json_if_present(&path)? {
            default = json
                .get("chat_template")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }
    // Newer transformers saves templates as files, and those win over the config.
    let templates_dir = dir.join("chat_templates");
    if templates_dir.is_dir() {
        let entries = std::fs::read_dir(&templates_dir).map_err(|source| TokenizerError::Read {
            path: templates_dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| TokenizerError::Read {
                path: templates_dir.clone(),
                source,
            })?;
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".jinja"))
            else {
                continue;
            };
            if let Some(source) = read_text_if_present(&path)? {
                named.insert(name.to_string(), source);
            }
        }
    }
    if let Some(source) = read_text_if_present(&dir.join("chat_template.jinja"))? {
        default = Some(source);
    }
    if let Some(source) = &default {
        named
            .entry("default".to_string())
            .or_insert_with(|| source.clone());
    }
    Ok((default, named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_content_reads_strings_and_added_tokens() {
        assert_eq!(token_content(&Value::from("<s>")), Some("<s>".into()));
        let dict = serde_json::json!({"__type": "AddedToken", "content": "</s>", "lstrip": false});
        assert_eq!(token_content(&dict), Some("</s>".into()));
        assert_eq!(token_content(&Value::Null), None);
    }

    #[test]
    fn eos_ids_accept_one_id_or_a_list() -> Result<(), TokenizerError> {
        let path = Path::new("generation_config.json");
        let one = serde_json::json!({"eos_token_id": 2});
        assert_eq!(token_ids(&one, "eos_token_id", path)?, BTreeSet::from([2]));
        let list = serde_json::json!({"eos_token_id": [128001, 128008, 128009]});
        assert_eq!(
            token_ids(&list, "eos_token_id", path)?,
            BTreeSet::from([128001, 128008, 128009])
        );
        let bad = serde_json::json!({"eos_token_id": "x"});
        assert!(token_ids(&bad, "eos_token_id", path).is_err());
        Ok(())
    }

    #[test]
    fn list_templates_pick_default_and_keep_names() -> Result<(), TokenizerError> {
        let config = serde_json::json!({"chat_template": [
            {"name": "default", "template": "D"},
            {"name": "tool_use", "template": "T"},
        ]});
        let dir = Path::new("/nonexistent-rmx-dir");
        let (default, named) = load_chat_templates(dir, &config, &dir.join("c.json"))?;
        assert_eq!(default.as_deref(), Some("D"));
        assert_eq!(named.get("tool_use").map(String::as_str), Some("T"));
        Ok(())
    }
}
