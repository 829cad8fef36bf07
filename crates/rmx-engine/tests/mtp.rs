//! Qwen3.5 and Qwen3-Next checkpoints in transformers' layout (the Hub's own, which keep the
//! multi-token-prediction head `mtp.*`) and speculation with that head (issue #24): the model's
//! greedy tokens are mlx-lm's on the same files, the head guesses what a reference built from
//! mlx-lm's Qwen3.5 layer guesses (tests/py/mtp_model.py), and speculating with it gives the
//! plain output token for token.
#![allow(clippy::unwrap_used)] // tests panic on failure by design

use rmx_engine::speculative::Drafts;
use rmx_engine::{Engine, Event, GenerateRequest, Speculation};
use rmx_mlx::Array;
use rmx_models::CausalLm;
use rmx_tests::models;

const PROMPT: &str = "The capital of France is a city of bridges, and the river that runs";

fn greedy(
    e: &Engine,
    prompt: &[u32],
    n: usize,
    spec: Option<Speculation>,
) -> (Vec<u32>, Option<Drafts>) {
    let mut r = GenerateRequest::new(prompt.to_vec(), n);
    r.ignore_eos = true;
    r.no_prefix_cache = true;
    r.speculative = spec;
    let mut rx = e.generate(r).unwrap();
    let mut ids = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => ids.push(id),
            Event::Done { usage, .. } => return (ids, usage.drafts),
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

/// mlx-lm reads the transformers layout through its own sanitize: the same greedy tokens.
fn layout_parity(family: &str, quant: &str) {
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = models::mtp_model(family, quant);
    let pending = models::spawn_references(&dir, &[(PROMPT, false)], 24);
    let e = Engine::load(&dir).unwrap();
    assert_eq!(e.info().mtp_layers, 1, "{family}-{quant}: the head is read");
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let (got, _) = greedy(&e, &prompt, 24, None);
    let want = pending.wait().remove(0);
    assert_eq!(prompt, want.prompt_ids);
    assert_eq!(
        got, want.tokens,
        "{family}-{quant}: greedy tokens differ from mlx-lm's"
    );
}

#[test]
fn transformers_layout_qwen3_5_is_mlx_lm_f32_and_bf16() {
    layout_parity("qwen3_5", "f32");
    layout_parity("qwen3_5", "bf16");
}

#[test]
fn transformers_layout_qwen3_5_moe_and_qwen3_next_are_mlx_lm_f32() {
    layout_parity("qwen3_5_moe", "f32");
    // Qwen3-Next's experts one by one, stacked on load as mlx-lm stacks them.
    layout_parity("qwen3_next", "f32");
}

fn row(ids: &[u32]) -> Array {
    Array::from_slice(ids, &[1, ids.len() as i32]).unwrap()
}

fn argmax_rows(m: &dyn CausalLm, hidden: &Array) -> Vec<u32> {
    let ids = m.lm_head(hidden).unwrap().argmax(-1, false).unwrap();
    rmx_mlx::eval(&[&ids]).unwrap();
    ids.to_vec::<u32>().unwrap()
}

/// The head's guesses at every prompt position and three chained ones after, as the reference
/// computes them (f32: exactly).
fn head_parity(family: &str) {
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = models::mtp_model(family, "f32");
    let model = rmx_models::load(&dir).unwrap();
    let prompt: Vec<u32> = vec![785, 6722, 315, 9625, 374, 264, 3283, 315, 38973, 11, 323];
    let want = models::mtp_reference(&dir, &prompt, 3);
    let mut cache = model.make_cache();
    let hidden = model.forward_hidden(&row(&prompt), &mut cache).unwrap();
    let n = prompt.len() as i32;
    let next = argmax_rows(model.as_ref(), &hidden.slice_axis(1, n - 1, n).unwrap())[0];
    assert_eq!(next, want.next, "{family}: the model's next token");
    let mut head = model.mtp_cache();
    let mut after: Vec<u32> = prompt[1..].to_vec();
    after.push(next);
    let out = model
        .mtp_forward(&hidden, &row(&after), 0, &mut head)
        .unwrap();
    assert_eq!(
        argmax_rows(model.as_ref(), &out),
        want.rows,
        "{family}: the head's rows"
    );
    let (mut last, mut guess) = (
        out.slice_axis(1, n - 1, n).unwrap(),
        *want.rows.last().unwrap(),
    );
    let mut chain = Vec::new();
    for _ in 0..3 {
        last = model
            .mtp_forward(&last, &row(&[guess]), 0, &mut head)
            .unwrap();
        guess = argmax_rows(model.as_ref(), &last)[0];
        chain.push(guess);
    }
    assert_eq!(chain, want.chain, "{family}: the head's chained guesses");
}

#[test]
fn the_head_guesses_as_the_reference_f32() {
    head_parity("qwen3_5");
    head_parity("qwen3_5_moe");
    head_parity("qwen3_next");
}

/// Guessing with the head gives the plain greedy tokens (a random head is mostly refused: the
/// blocks pause and the head starts over after each pause), with guesses counted.
#[test]
fn greedy_with_the_head_is_greedy_without_it_f32() {
    let e = Engine::load(&models::mtp_model("qwen3_5", "f32")).unwrap();
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let (plain, _) = greedy(&e, &prompt, 40, None);
    for k in [1, 3] {
        let (spec, drafts) = greedy(&e, &prompt, 40, Some(Speculation::mtp(k).unwrap()));
        assert_eq!(spec, plain, "k={k}");
        let d = drafts.expect("a speculating run reports its guesses");
        eprintln!("k={k}: {d:?}");
        assert!(d.drafted > 0, "k={k}: the head guessed nothing");
    }
}

/// A model without the head refuses "mtp" before anything runs, and says what to use.
#[test]
fn mtp_without_a_head_is_refused() {
    let e = Engine::load(&models::model("qwen3_5", "f32")).unwrap();
    assert_eq!(e.info().mtp_layers, 0);
    let mut r = GenerateRequest::new(e.raw_tokens(PROMPT).unwrap(), 4);
    r.speculative = Some(Speculation::mtp(3).unwrap());
    let err = e.generate(r).expect_err("refused").to_string();
    assert!(
        err.contains("multi-token-prediction head") && err.contains("prompt-lookup"),
        "{err}"
    );
}

/// A head that guesses right along a scripted reply: its blocks are taken whole, and the output
/// is still the plain one.
#[test]
fn guesses_the_model_agrees_with_are_taken_f32() {
    let script = " The quick brown fox jumps over the lazy dog, then sleeps.";
    let e = Engine::load(&models::mtp_scripted("scripted-fox", script)).unwrap();
    // The script follows the token "assistant" ends with.
    let mut prompt = e.raw_tokens("Say it.\n").unwrap();
    prompt.push(*e.raw_tokens("assistant").unwrap().last().unwrap());
    let n = e.raw_tokens(script).unwrap().len();
    let (plain, _) = greedy(&e, &prompt, n, None);
    assert_eq!(
        e.tokenizer().decode(&plain, true).unwrap(),
        script,
        "the scripted reply"
    );
    for k in [1, 3, 6] {
        let (spec, drafts) = greedy(&e, &prompt, n, Some(Speculation::mtp(k).unwrap()));
        assert_eq!(spec, plain, "k={k}");
        let d = drafts.unwrap();
        eprintln!("k={k}: {d:?}");
        // The head read the prompt with it, so it guesses from the first block on, and every
        // guess is right: each block gives k tokens guessed and one more of the model's own
        // (the last block cut to what max_tokens leaves).
        assert_eq!(d.accepted, d.drafted, "k={k}: {d:?}");
        assert_eq!(
            d.drafted,
            n - n.div_ceil(k + 1),
            "k={k}: {d:?} of {n} tokens"
        );
    }
}

/// `rmx import FOLDER` (rmx-models' checkpoint.rs) writes what `mlx_lm.convert` writes from the
/// same checkpoint, tensor for tensor, plus the head (quantized like the model), and the model
/// it writes speculates with that head to its plain output. An MLX folder is refused.
#[test]
fn an_imported_checkpoint_is_mlx_lm_convert_plus_the_head() {
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let tmp = tempfile::tempdir().unwrap();
    for (family, bits) in [
        ("qwen3_5", Some(4)),
        ("qwen3_5_moe", Some(8)),
        ("qwen3_next", Some(4)),
        ("qwen3_5", None),
    ] {
        let src = models::mtp_model(family, "bf16");
        let what = format!("{family} {bits:?}");
        let (ours, theirs) = (
            tmp.path().join(format!("{family}-{bits:?}-rmx")),
            tmp.path().join(format!("{family}-{bits:?}-mlx-lm")),
        );
        let mut seen = 0;
        let s = rmx_models::checkpoint::import_checkpoint(&src, &ours, bits, |i, total, _| {
            assert!(i <= total);
            seen = i;
        })
        .unwrap();
        assert!(s.mtp && seen == s.tensors, "{what}: {s:?}");
        models::mlx_lm_convert(&src, &theirs, bits);
        let c = models::compare_mlx_folders(&theirs, &ours);
        assert_eq!(c["only_mlx_lm"], serde_json::json!([]), "{what}: {c}");
        assert_eq!(c["differ"], serde_json::json!([]), "{what}: {c}");
        assert_eq!(c["same_quantization"], true, "{what}: {c}");
        let extra = c["only_rmx"].as_array().unwrap();
        assert!(
            !extra.is_empty()
                && extra
                    .iter()
                    .all(|n| n.as_str().unwrap().starts_with("mtp.")),
            "{what}: {c}"
        );
        let e = Engine::load(&ours).unwrap();
        assert_eq!(e.info().mtp_layers, 1, "{what}");
        let prompt = e.raw_tokens(PROMPT).unwrap();
        let (plain, _) = greedy(&e, &prompt, 16, None);
        let (spec, drafts) = greedy(&e, &prompt, 16, Some(Speculation::mtp(3).unwrap()));
        assert_eq!(spec, plain, "{what}");
        assert!(drafts.unwrap().drafted > 0, "{what}");
    }
    let mlx = models::model("qwen3_5", "f32");
    let err = rmx_models::checkpoint::import_checkpoint(
        &mlx,
        &tmp.path().join("x"),
        Some(4),
        |_, _, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("MLX's layout already"), "{err}");
}
