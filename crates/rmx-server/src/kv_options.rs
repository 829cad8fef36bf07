//! rmx's KV-cache fields (`kv_bits`, `kv_group_size`, `kv_quant_start`), read the same way on
//! every surface: the native options, OpenAI's chat, completions and Responses bodies,
//! Anthropic's messages. Each surface turns a refusal into a 400 in its own error shape naming
//! [`BadKv::param`].

use rmx_engine::KvQuant;

/// A KV-cache field the request got wrong; `param` is the field's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadKv {
    pub param: &'static str,
    pub message: String,
}

/// How the answer's KV cache is stored: `None` without `kv_bits` (the alias's or the daemon's
/// choice then applies); a group size or start without `kv_bits`, or a value MLX cannot store,
/// a refusal that says what is allowed.
pub fn parse(
    bits: Option<i32>,
    group_size: Option<i32>,
    start: Option<i32>,
) -> Result<Option<KvQuant>, BadKv> {
    let Some(bits) = bits else {
        let stray = [(group_size, "kv_group_size"), (start, "kv_quant_start")];
        return match stray.iter().find(|(v, _)| v.is_some()) {
            Some((_, param)) => Err(BadKv {
                param,
                message: "kv_group_size and kv_quant_start need kv_bits (4 or 8)".into(),
            }),
            None => Ok(None),
        };
    };
    let group_size = group_size.unwrap_or(KvQuant::DEFAULT_GROUP_SIZE);
    let start = start.unwrap_or(0);
    let param = if !KvQuant::BITS.contains(&bits) {
        "kv_bits"
    } else if !KvQuant::GROUP_SIZES.contains(&group_size) {
        "kv_group_size"
    } else {
        "kv_quant_start"
    };
    KvQuant::new(bits, group_size, start)
        .map(Some)
        .map_err(|e| BadKv {
            param,
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_and_defaulted() {
        assert_eq!(parse(None, None, None), Ok(None));
        let q = parse(Some(8), None, None).expect("8 bits").expect("some");
        assert_eq!(
            (q.bits, q.group_size, q.start),
            (8, KvQuant::DEFAULT_GROUP_SIZE, 0)
        );
        for (bits, group, start, param, says) in [
            (Some(3), None, None, "kv_bits", "4 or 8"),
            (Some(8), Some(48), None, "kv_group_size", "32, 64 or 128"),
            (Some(4), None, Some(-1), "kv_quant_start", "0 or more"),
            (None, Some(32), None, "kv_group_size", "need kv_bits"),
            (None, None, Some(5), "kv_quant_start", "need kv_bits"),
        ] {
            let e = parse(bits, group, start).expect_err("refused");
            assert_eq!(e.param, param, "{e}");
            assert!(e.message.contains(says), "{e}");
        }
    }
}
