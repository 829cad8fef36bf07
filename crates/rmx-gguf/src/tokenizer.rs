//! tokenizer.json (HF `tokenizers` format), tokenizer_config.json and generation_config.json
//! from a GGUF's `tokenizer.*` metadata.
//!
//! Two vocabularies exist in GGUF files:
//! - `gpt2`: byte-level BPE; tokens and merges are stored as HF has them, and only the
//!   pre-tokenizer (named by `tokenizer.ggml.pre`) must be chosen to match the model.
//! - `llama`: SentencePiece; tokens, scores and types but no merges. As HF's own converters do,
//!   it becomes a BPE with byte fallback whose merges are recovered from the vocabulary
//!   (`generate_merges` in transformers' `tokenization_utils_base.py`).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::arch::Arch;
use crate::error::{GgufError, Result};
use crate::metadata::MetaValue;
use crate::reader::GgufFile;

/// The three tokenizer-side files of a model directory.
#[derive(Debug, Clone)]
pub struct TokenizerFiles {
    pub tokenizer_json: Value,
    pub tokenizer_config: Value,
    pub generation_config: Value,
}

// llama.cpp's token types (`llama_token_type`).
const TYPE_UNKNOWN: i64 = 2;
const TYPE_CONTROL: i64 = 3;
const TYPE_USER_DEFINED: i64 = 4;

const SPIECE_SPACE: char = '\u{2581}';

const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Everything the builders need, read out of the metadata once.
struct Vocab {
    model: String,
    pre: String,
    tokens: Vec<String>,
    scores: Option<Vec<f64>>,
    types: Option<Vec<i64>>,
    merges: Option<Vec<String>>,
    bos: Option<u64>,
    eos: Option<u64>,
    unk: Option<u64>,
    pad: Option<u64>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
}

impl Vocab {
    fn read(gguf: &GgufFile) -> Result<Self> {
        let strings = |key: &str| -> Result<Option<Vec<String>>> {
            match gguf.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_array()
                    .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect())
                    .map(Some)
                    .ok_or_else(|| gguf.metadata_error(key, "array of strings")),
            }
        };
        let numbers = |key: &str, f: fn(&MetaValue) -> Option<f64>| -> Result<Option<Vec<f64>>> {
            match gguf.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_array()
                    .and_then(|a| a.iter().map(f).collect())
                    .map(Some)
                    .ok_or_else(|| gguf.metadata_error(key, "array of numbers")),
            }
        };
        let model = gguf
            .get_str("tokenizer.ggml.model")
            .ok_or_else(|| gguf.metadata_error("tokenizer.ggml.model", "string"))?
            .to_owned();
        let tokens = strings("tokenizer.ggml.tokens")?
            .ok_or_else(|| gguf.metadata_error("tokenizer.ggml.tokens", "array of strings"))?;
        let types = numbers("tokenizer.ggml.token_type", MetaValue::as_f64)?
            .map(|t| t.into_iter().map(|x| x as i64).collect());
        let id = |k: &str| gguf.get_u64(&format!("tokenizer.ggml.{k}"));
        let is_spm = model == "llama";
        Ok(Self {
            pre: gguf
                .get_str("tokenizer.ggml.pre")
                .unwrap_or("default")
                .to_owned(),
            scores: numbers("tokenizer.ggml.scores", MetaValue::as_f64)?,
            merges: strings("tokenizer.ggml.merges")?,
            bos: id("bos_token_id"),
            eos: id("eos_token_id"),
            unk: id("unknown_token_id"),
            pad: id("padding_token_id"),
            // llama.cpp's defaults: SentencePiece vocabularies add BOS and a leading space
            // unless the file says otherwise; byte-level ones do neither.
            add_bos: gguf
                .get_bool("tokenizer.ggml.add_bos_token")
                .unwrap_or(is_spm),
            add_eos: gguf
                .get_bool("tokenizer.ggml.add_eos_token")
                .unwrap_or(false),
            add_space_prefix: gguf
                .get_bool("tokenizer.ggml.add_space_prefix")
                .unwrap_or(is_spm),
            model,
            tokens,
            types,
        })
    }

    fn token(&self, id: Option<u64>) -> Option<&str> {
        self.tokens
            .get(usize::try_from(id?).ok()?)
            .map(String::as_str)
    }

    /// Control, unknown and user-defined tokens are matched whole before the model runs,
    /// as llama.cpp does; control and unknown ones are also "special" (skipped on decode).
    /// `tokens` is the vocabulary as the tokenizer.json spells it.
    fn added_tokens(&self, tokens: &[String]) -> Vec<Value> {
        let Some(types) = &self.types else {
            return Vec::new();
        };
        tokens
            .iter()
            .zip(types)
            .enumerate()
            .filter(|(_, (_, &t))| matches!(t, TYPE_UNKNOWN | TYPE_CONTROL | TYPE_USER_DEFINED))
            .map(|(id, (content, &t))| {
                json!({
                    "id": id, "content": content, "single_word": false, "lstrip": false,
                    "rstrip": false, "normalized": false, "special": t != TYPE_USER_DEFINED,
                })
            })
            .collect()
    }

    /// token → id, first occurrence winning (padded vocabularies repeat names).
    fn vocab_map(tokens: &[String]) -> (serde_json::Map<String, Value>, HashMap<&str, usize>) {
        let mut index = HashMap::with_capacity(tokens.len());
        let mut map = serde_json::Map::new();
        for (id, t) in tokens.iter().enumerate() {
            if !index.contains_key(t.as_str()) {
                index.insert(t.as_str(), id);
                map.insert(t.clone(), json!(id));
            }
        }
        (map, index)
    }

    /// Prepends BOS / appends EOS the way the GGUF asks; `None` if it adds neither.
    fn template_processor(&self) -> Option<Value> {
        let bos = self.token(self.bos).filter(|_| self.add_bos);
        let eos = self.token(self.eos).filter(|_| self.add_eos);
        if bos.is_none() && eos.is_none() {
            return None;
        }
        let special =
            |tok: &str, type_id: u32| json!({"SpecialToken": {"id": tok, "type_id": type_id}});
        let seq = |id: &str, type_id: u32| json!({"Sequence": {"id": id, "type_id": type_id}});
        let mut single = Vec::new();
        let mut pair = Vec::new();
        let mut specials = serde_json::Map::new();
        for (tok, id) in [(bos, self.bos), (eos, self.eos)] {
            if let (Some(tok), Some(id)) = (tok, id) {
                specials.insert(tok.into(), json!({"id": tok, "ids": [id], "tokens": [tok]}));
            }
        }
        for (part, type_id) in [("A", 0), ("B", 1)] {
            let target = if part == "A" { &mut single } else { &mut pair };
            if let Some(b) = bos {
                target.push(special(b, type_id));
            }
            target.push(seq(part, type_id));
            if let Some(e) = eos {
                target.push(special(e, type_id));
            }
        }
        let pair: Vec<Value> = single.iter().cloned().chain(pair).collect();
        Some(
            json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}),
        )
    }
}

/// Builds the tokenizer files for `gguf`, whose architecture is `arch`.
pub fn build_tokenizer(gguf: &GgufFile, arch: Arch) -> Result<TokenizerFiles> {
    let v = Vocab::read(gguf)?;
    let tokenizer_json = match v.model.as_str() {
        "gpt2" => byte_level(&v),
        "llama" => sentencepiece(&v, arch),
        other => {
            return Err(GgufError::UnsupportedTokenizer {
                path: gguf.path().to_path_buf(),
                model: other.to_owned(),
            })
        }
    };

    let mut config = serde_json::Map::new();
    config.insert("tokenizer_class".into(), json!("PreTrainedTokenizerFast"));
    config.insert("add_bos_token".into(), json!(v.add_bos));
    config.insert("add_eos_token".into(), json!(v.add_eos));
    config.insert("clean_up_tokenization_spaces".into(), json!(false));
    for (field, id) in [
        ("bos_token", v.bos),
        ("eos_token", v.eos),
        ("unk_token", v.unk),
        ("pad_token", v.pad),
    ] {
        if let Some(tok) = v.token(id) {
            config.insert(field.into(), json!(tok));
        }
    }
    if let Some(ctx) = gguf.get_u64(&format!("{}.context_length", arch.gguf_name())) {
        config.insert("model_max_length".into(), json!(ctx));
    }
    if let Some(template) = gguf.get_str("tokenizer.chat_template") {
        config.insert("chat_template".into(), json!(template));
    }

    // End-of-turn tokens end a generation as much as EOS does.
    let mut eos_ids: Vec<u64> = v.eos.into_iter().collect();
    for k in ["eot_token_id", "eom_token_id"] {
        if let Some(id) = gguf.get_u64(&format!("tokenizer.ggml.{k}")) {
            if !eos_ids.contains(&id) {
                eos_ids.push(id);
            }
        }
    }
    let mut generation = serde_json::Map::new();
    if let Some(bos) = v.bos {
        generation.insert("bos_token_id".into(), json!(bos));
    }
    match eos_ids.as_slice() {
        [] => {}
        [one] => {
            generation.insert("eos_token_id".into(), json!(one));
        }
        many => {
            generation.insert("eos_token_id".into(), json!(many));
        }
    }
    if let Some(pad) = v.pad {
        generation.insert("pad_token_id".into(), json!(pad));
    }

    Ok(TokenizerFiles {
        tokenizer_json,
        tokenizer_config: Value::Object(config),
        generation_config: Value::Object(generation),
    })
}

fn byte_level_step(add_prefix_space: bool, trim_offsets: bool, use_regex: bool) -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": trim_offsets, "use_regex": use_regex})
}

/// `tokenizer.ggml.pre` → (normalizer, pre-tokenizer, ignore_merges), after HF's own
/// tokenizer.json files for those models and llama.cpp's `llama-vocab.cpp` regexes.
fn byte_level_pre(pre: &str) -> (Value, Value, bool) {
    let split = |re: &str| json!({"type": "Split", "pattern": {"Regex": re}, "behavior": "Isolated", "invert": false});
    match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "smaug-bpe" | "dbrx" | "pixtral" => (
            Value::Null,
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_SPLIT), byte_level_step(false, true, false)]}),
            true,
        ),
        "qwen2" | "deepseek-r1-qwen" | "megrez" => (
            json!({"type": "NFC"}),
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_SPLIT), byte_level_step(false, false, false)]}),
            false,
        ),
        // llama.cpp splits digits one by one, then applies GPT-2's regex.
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            (
                Value::Null,
                json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Digits", "individual_digits": true},
                    byte_level_step(false, true, true),
                ]}),
                false,
            )
        }
        // "gpt2", "default" and anything unknown: GPT-2's own regex.
        _ => (Value::Null, byte_level_step(false, true, true), false),
    }
}

fn byte_level(v: &Vocab) -> Value {
    let (vocab, _) = Vocab::vocab_map(&v.tokens);
    let merges: Vec<Value> = v
        .merges
        .iter()
        .flatten()
        .filter_map(|m| m.split_once(' ').map(|(a, b)| json!([a, b])))
        .collect();
    let (normalizer, pre_tokenizer, ignore_merges) = byte_level_pre(&v.pre);
    let post_processor = match v.template_processor() {
        Some(t) => {
            json!({"type": "Sequence", "processors": [byte_level_step(true, false, true), t]})
        }
        None => byte_level_step(true, false, true),
    };
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": v.added_tokens(&v.tokens),
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": byte_level_step(true, true, true),
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges,
        },
    })
}

fn sentencepiece(v: &Vocab, arch: Arch) -> Value {
    // GGUF spells whitespace-run tokens with real spaces ("  "), but the normalizer turns the
    // text's spaces into '▁' first, so the vocabulary must say "▁▁" to ever match.
    let tokens: Vec<String> = v
        .tokens
        .iter()
        .map(|t| {
            if !t.is_empty() && t.chars().all(|c| c == ' ') {
                SPIECE_SPACE.to_string().repeat(t.chars().count())
            } else {
                t.clone()
            }
        })
        .collect();
    let (vocab, index) = Vocab::vocab_map(&tokens);
    // SentencePiece's BPE merges the pair whose result scores best; files without scores
    // fall back to vocabulary order. llama.cpp's converter writes -1000 for user-defined
    // pieces, whose SentencePiece score is 0: restoring that puts Gemma's whitespace-run merges
    // first, exactly as in Google's own tokenizer.json.
    let priority: Vec<f64> = match &v.scores {
        Some(scores) => scores
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let user_defined =
                    v.types.as_ref().and_then(|t| t.get(i)) == Some(&TYPE_USER_DEFINED);
                if user_defined {
                    0.0
                } else {
                    // -0.0 must tie with 0.0 (as in Python's sort), which total_cmp does not do.
                    s + 0.0
                }
            })
            .collect(),
        None => (0..tokens.len()).map(|i| -(i as f64)).collect(),
    };
    let merges: Vec<Value> = generate_merges(&tokens, &index, &priority)
        .into_iter()
        .map(|(a, b)| json!([a, b]))
        .collect();

    let replace_space =
        json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
    let (normalizer, pre_tokenizer) = if arch == Arch::Gemma3 {
        // As in Gemma 3's own tokenizer.json.
        (
            replace_space,
            json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}),
        )
    } else if v.add_space_prefix {
        (
            json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u{2581}"}, replace_space]}),
            Value::Null,
        )
    } else {
        (replace_space, Value::Null)
    };
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if v.add_space_prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": v.added_tokens(&tokens),
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": v.template_processor(),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": v.token(v.unk), "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    })
}

/// Every split of every token into two tokens, best first: by the merged token's priority
/// (higher first), then longer left piece, then longer right piece; ties keep vocabulary
/// order, then the pieces' ids. This is transformers' `generate_merges` with `vocab_scores`.
fn generate_merges<'a>(
    tokens: &'a [String],
    index: &HashMap<&str, usize>,
    priority: &[f64],
) -> Vec<(&'a str, &'a str)> {
    struct Merge<'a> {
        left: &'a str,
        right: &'a str,
        priority: f64,
        left_chars: usize,
        right_chars: usize,
    }
    let mut merges = Vec::new();
    for (id, token) in tokens.iter().enumerate() {
        // Duplicates were dropped from the vocabulary; their splits would repeat.
        if index.get(token.as_str()) != Some(&id) {
            continue;
        }
        let mut local: Vec<(usize, usize, Merge<'a>)> = Vec::new();
        for (at, _) in token.char_indices().skip(1) {
            let (left, right) = token.split_at(at);
            if let (Some(&l), Some(&r)) = (index.get(left), index.get(right)) {
                let left_chars = left.chars().count();
                let merge = Merge {
                    left,
                    right,
                    priority: priority.get(id).copied().unwrap_or(f64::NEG_INFINITY),
                    left_chars,
                    right_chars: token.chars().count() - left_chars,
                };
                local.push((l, r, merge));
            }
        }
        local.sort_by_key(|&(l, r, _)| (l, r));
        merges.extend(local.into_iter().map(|(_, _, m)| m));
    }
    merges.sort_by(|a, b| {
        b.priority
            .total_cmp(&a.priority)
            .then(b.left_chars.cmp(&a.left_chars))
            .then(b.right_chars.cmp(&a.right_chars))
    });
    merges.into_iter().map(|m| (m.left, m.right)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_follow_priority_then_length() {
        let tokens: Vec<String> = ["a", "b", "c", "ab", "abc", "bc"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let index: HashMap<&str, usize> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i))
            .collect();
        let priority: Vec<f64> = (0..tokens.len()).map(|i| -(i as f64)).collect();
        let merges = generate_merges(&tokens, &index, &priority);
        assert_eq!(
            merges,
            vec![("a", "b"), ("ab", "c"), ("a", "bc"), ("b", "c")]
        );
    }
}
