//! The CUDA sources of rmx's kernels (kernels/*.cuh, one file per section) and the NVRTC header
//! a kernel is built from. MLX copies and hashes the whole source at every launch, so a kernel
//! gets only the sections it needs, without comment lines: a short source is CPU time saved on
//! every kernel of every token.

/// Every section, in the order a header concatenates them (a section after those it uses).
const SECTIONS: &[(&str, &str)] = &[
    ("common", include_str!("kernels/common.cuh")),
    ("qgemv", include_str!("kernels/qgemv.cuh")),
    ("qkv_rope", include_str!("kernels/qkv_rope.cuh")),
    ("attn", include_str!("kernels/attn.cuh")),
    ("swiglu", include_str!("kernels/swiglu.cuh")),
    ("route", include_str!("kernels/route.cuh")),
    ("layer", include_str!("kernels/layer.cuh")),
    ("layer_rows_mma", include_str!("kernels/layer_rows_mma.cuh")),
    ("layer_rows", include_str!("kernels/layer_rows.cuh")),
    ("layer_moe", include_str!("kernels/layer_moe.cuh")),
    ("gated_delta", include_str!("kernels/gated_delta.cuh")),
    ("moe", include_str!("kernels/moe.cuh")),
    ("layer_delta", include_str!("kernels/layer_delta.cuh")),
    ("pick", include_str!("kernels/pick.cuh")),
    ("embed_rows", include_str!("kernels/embed_rows.cuh")),
];

/// Sections built on another's helpers: (section, the section it uses).
const SECTION_USES: &[(&str, &str)] = &[
    ("moe", "qgemv"),
    ("moe", "route"),
    ("layer_rows", "layer"),
    ("layer_rows", "layer_rows_mma"),
    ("layer_moe", "layer"),
    ("layer_moe", "route"),
    ("layer_delta", "layer"),
    ("layer_delta", "gated_delta"),
];

/// The NVRTC header for kernels of one section: "common", the sections it uses, and its own,
/// without comment lines. Ends in a newline: MLX appends its own source after a header, and a
/// last line with a trailing comment would swallow MLX's next line.
pub(crate) fn header(section: &str) -> String {
    header_of(&[section])
}

/// `header` for a kernel built of several sections (a DeltaNet layer with its experts): each
/// once, in `SECTIONS` order.
pub(crate) fn header_of(sections: &[&str]) -> String {
    let mut out = String::new();
    for (name, src) in SECTIONS {
        let keep = *name == "common"
            || sections
                .iter()
                .any(|s| s == name || SECTION_USES.contains(&(*s, *name)));
        if !keep {
            continue;
        }
        for line in src.lines() {
            let t = line.trim_start();
            if !t.is_empty() && !t.starts_with("//") {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{header, header_of, SECTIONS};

    fn balanced(src: &str) -> bool {
        src.matches('{').count() == src.matches('}').count()
    }

    #[test]
    fn each_section_header_holds_what_its_kernels_call_and_no_comments() {
        let g = header("qgemv");
        let r = header("qkv_rope");
        let a = header("attn");
        let s = header("swiglu");
        for (h, has, lacks) in [
            (&a, &["decode_attn", "warp_sum", "neg_inf"][..], "chunk_dot"),
            (&s, &["swiglu", "to_float"][..], "decode_attn"),
            (
                &g,
                &["chunk_dot", "qgemv_swiglu", "warp_sum", "Vec8"][..],
                "qkv_rope",
            ),
            (&r, &["qkv_rope", "warp_sum", "to_float"][..], "chunk_dot"),
        ] {
            assert!(balanced(h), "unbalanced braces:\n{h}");
            for f in has {
                assert!(h.contains(f), "{f} missing");
            }
            assert!(!h.contains(lacks));
            assert!(h.lines().all(|l| !l.trim_start().starts_with("//")));
        }
        let all: usize = SECTIONS.iter().map(|(_, s)| s.len()).sum();
        assert!(g.len() < all / 2 + 2000);
    }

    #[test]
    fn a_section_that_uses_another_gets_it_first() {
        let rows = header("layer_rows");
        let layer = rows.find("decode_layers").expect("layer section");
        let own = rows.find("decode_layers_rows").expect("layer_rows section");
        assert!(layer < own);
        assert!(balanced(&rows));
        assert!(header("moe").contains("qgemv_swiglu"));
        assert!(header("moe").contains("moe_route"));
        // A DeltaNet layer with its experts: each section once, the phases after the kernel
        // that declares them.
        let both = header_of(&["layer_delta", "layer_moe"]);
        for f in [
            "decode_delta_layers",
            "delta_head",
            "moe_route",
            "decode_moe",
        ] {
            assert_eq!(both.matches(&format!("void {f}(")).count(), 1, "{f}");
        }
        assert!(both.find("struct MoePtrs").unwrap() < both.find("void decode_moe(").unwrap());
        assert!(!header("layer").contains("moe_route"));
    }
}
