//! The metadata's sizes held against the tensors, before anything is converted or written. A
//! file whose metadata says 4294967295 layers or heads (0xFFFFFFFF: a broken writer, a damaged
//! or a hostile file) would otherwise be imported and then fail to load (or build a config of
//! four billion layers first); it is refused at import instead, naming the key, what it says
//! and what the tensors say.
//!
//! Sizes the tensors show must agree with them (layers, width, heads, feed-forward width).
//! The context length, which no tensor shows, must be below [`MAX_CONTEXT`], and token ids must
//! be in the vocabulary.

use crate::arch::Arch;
use crate::error::{GgufError, Result};
use crate::reader::GgufFile;

/// More tokens of context than any model has (the longest are about 10M).
pub const MAX_CONTEXT: u64 = 1 << 27;

/// Refuses metadata that contradicts the tensors or no model could have.
pub(crate) fn check(gguf: &GgufFile, arch: Arch) -> Result<()> {
    let p = arch.gguf_name();
    let key = |k: &str| format!("{p}.{k}");
    // As `build_config` reads them: a per-layer array stands for its first entry.
    let get = |k: &str| {
        let v = gguf.get(&key(k))?;
        v.as_u64().or_else(|| v.as_array()?.first()?.as_u64())
    };
    let bad = |key: String, value: u64, why: String| {
        Err(GgufError::Implausible {
            path: gguf.path().to_path_buf(),
            key,
            value,
            why,
        })
    };
    // `dims[1]` of a weight is its output rows (ggml order: `dims[0]` is the input width).
    let rows = |tensor: &str| gguf.tensor(tensor).and_then(|t| t.dims.get(1).copied());

    let layers = gguf
        .tensors()
        .iter()
        .filter_map(|t| {
            t.name
                .strip_prefix("blk.")?
                .split('.')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .map_or(0, |last| last + 1);
    if let Some(n) = get("block_count").filter(|&n| n != layers) {
        return bad(
            key("block_count"),
            n,
            format!("the file has tensors for {layers} layers"),
        );
    }
    let embed = gguf.tensor("token_embd.weight");
    let hidden = get("embedding_length");
    if let (Some(h), Some(width)) = (hidden, embed.and_then(|t| t.dims.first().copied())) {
        if h != width {
            return bad(
                key("embedding_length"),
                h,
                format!("token_embd.weight is {width} wide"),
            );
        }
    }
    if let Some(h) = get("attention.head_count") {
        if h == 0 {
            return bad(key("attention.head_count"), h, "a model has heads".into());
        }
        let head_dim = get("attention.key_length").or_else(|| hidden.map(|w| w / h));
        let rows_are_heads = |k: &str, n: u64, tensor: &str| match (head_dim, rows(tensor)) {
            (Some(d), Some(r)) if n.checked_mul(d) != Some(r) => bad(
                key(k),
                n,
                format!("{tensor} has {r} rows, which are not {n} heads of {d}"),
            ),
            _ => Ok(()),
        };
        rows_are_heads("attention.head_count", h, "blk.0.attn_q.weight")?;
        if let Some(kv) = get("attention.head_count_kv") {
            if kv == 0 || h % kv != 0 {
                return bad(
                    key("attention.head_count_kv"),
                    kv,
                    format!("{h} query heads do not share {kv} key/value heads evenly"),
                );
            }
            rows_are_heads("attention.head_count_kv", kv, "blk.0.attn_k.weight")?;
        }
    }
    if let (Some(f), Some(up)) = (get("feed_forward_length"), rows("blk.0.ffn_up.weight")) {
        if f != up {
            return bad(
                key("feed_forward_length"),
                f,
                format!("blk.0.ffn_up.weight has {up} rows"),
            );
        }
    }
    for k in ["context_length", "attention.sliding_window"] {
        if let Some(n) = get(k).filter(|&n| n > MAX_CONTEXT) {
            return bad(
                key(k),
                n,
                format!("no model has a context of more than {MAX_CONTEXT} tokens"),
            );
        }
    }
    if let Some(vocab) = embed.and_then(|t| t.dims.get(1).copied()) {
        for k in ["bos_token_id", "eos_token_id"] {
            let k = format!("tokenizer.ggml.{k}");
            if let Some(id) = gguf.get_u64(&k).filter(|&id| id >= vocab) {
                return bad(k, id, format!("the vocabulary has {vocab} tokens"));
            }
        }
    }
    Ok(())
}
