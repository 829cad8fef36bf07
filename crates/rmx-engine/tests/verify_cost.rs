//! `Engine::verify_cost` (what `rmx bench --verify-cost` prints): a plain decode step and a
//! verify step per drafted count, timed on the engine thread over a prompt's cache that each
//! step is cut back to; the engine answers as before afterwards.
#![allow(clippy::unwrap_used)]

use rmx_engine::{Engine, Event, GenerateRequest};
use rmx_tests::models;

fn greedy(engine: &Engine, prompt: &str) -> Vec<u32> {
    let ids = engine.tokenizer().encode(prompt, true).unwrap();
    let mut req = GenerateRequest::new(ids, 12);
    req.ignore_eos = true;
    req.no_prefix_cache = true;
    let mut rx = engine.generate(req).unwrap();
    let mut out = vec![];
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => out.push(id),
            Event::Done { .. } => break,
            Event::Error(e) => panic!("{e}"),
        }
    }
    out
}

#[test]
fn verify_steps_are_timed_per_drafted_count_and_leave_the_engine_as_it_was() {
    // Qwen3.5's recurrent layers are put back after each step as a speculative block's are.
    for family in ["llama", "qwen3_5"] {
        timed_and_unchanged(family);
    }
}

fn timed_and_unchanged(family: &str) {
    let engine = Engine::load(&models::model(family, "f32")).unwrap();
    let before = greedy(&engine, "The lighthouse keeper climbed the stairs");
    let costs = engine.verify_cost(40, &[1, 4, 2], 3).unwrap();
    let drafted: Vec<usize> = costs.iter().map(|c| c.drafted).collect();
    assert_eq!(
        drafted,
        vec![0, 1, 4, 2],
        "the plain step first, then each count asked"
    );
    for c in &costs {
        assert!(
            c.step_ms.min > 0.0 && c.step_ms.min <= c.step_ms.median,
            "{c:?}"
        );
        assert!(c.step_ms.median <= c.step_ms.max, "{c:?}");
    }
    assert_eq!(
        greedy(&engine, "The lighthouse keeper climbed the stairs"),
        before,
        "the measurement changed what the engine answers"
    );
}

/// An embedding model has no decode step to time: a clear error, not a hang.
#[test]
fn an_embedding_model_has_no_verify_steps() {
    let engine = Engine::load(&rmx_tests::api::tiny_embedder()).unwrap();
    let e = engine.verify_cost(8, &[1], 1).unwrap_err().to_string();
    assert!(e.contains("generating model"), "{e}");
}
