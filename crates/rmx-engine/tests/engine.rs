//! Engine behaviour on a real (tiny, mlx-lm-written) model: cancellation, stop strings that span
//! tokens, EOS, length, and the errors a bad request gets.
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use std::time::{Duration, Instant};

use rmx_engine::{Engine, EngineError, Event, FinishReason, GenerateRequest};

fn engine() -> Engine {
    Engine::load(&models::model("qwen3", "bf16")).unwrap()
}

/// Text and finish reason of a whole generation.
fn collect(engine: &Engine, req: GenerateRequest) -> (Vec<u32>, String, FinishReason) {
    let (ids, text, finish, _) = collect_with_stop(engine, req);
    (ids, text, finish)
}

/// [`collect`], plus the stop string the engine says ended the generation.
fn collect_with_stop(
    engine: &Engine,
    req: GenerateRequest,
) -> (Vec<u32>, String, FinishReason, Option<String>) {
    let mut rx = engine.generate(req).unwrap();
    let (mut ids, mut text) = (vec![], String::new());
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, text: t, .. } => {
                ids.push(id);
                text.push_str(&t);
            }
            Event::Done {
                finish,
                stop_sequence,
                text: t,
                ..
            } => {
                text.push_str(&t);
                return (ids, text, finish, stop_sequence);
            }
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

#[test]
fn dropping_the_receiver_cancels_and_frees_the_sequence() {
    let e = engine();
    let prompt = e.raw_tokens("Tell me a very long story").unwrap();
    let mut req = GenerateRequest::new(prompt.clone(), 100_000);
    req.ignore_eos = true;
    let mut rx = e.generate(req).unwrap();
    for _ in 0..3 {
        assert!(matches!(rx.blocking_recv(), Some(Event::Token { .. })));
    }
    assert_eq!(e.active_sequences(), 1);
    drop(rx);
    let t = Instant::now();
    while e.active_sequences() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the cancelled sequence is still running"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The engine is free for the next request.
    let (ids, _, finish) = collect(&e, GenerateRequest::new(prompt, 5));
    assert_eq!((ids.len(), finish), (5, FinishReason::Length));
}

#[test]
fn stop_strings_spanning_tokens_end_generation_and_are_not_emitted() {
    let e = engine();
    let prompt = e.raw_tokens("Once upon a time").unwrap();
    let mut base = GenerateRequest::new(prompt.clone(), 40);
    base.ignore_eos = true;
    let (ids, full, finish, matched) = collect_with_stop(&e, base.clone());
    // Running to the length limit names no stop string.
    assert_eq!((finish, matched), (FinishReason::Length, None));
    // A stop string made of the end of one token's text and the start of the next.
    let tok = e.tokenizer();
    let mut cut = None;
    for i in 5..ids.len() - 1 {
        let before = tok.decode(&ids[..i], true).unwrap();
        let after = tok.decode(&ids[..i + 1], true).unwrap();
        let piece = &after[before.len()..];
        let prev_piece = &before[tok.decode(&ids[..i - 1], true).unwrap().len()..];
        if piece.chars().count() >= 2
            && prev_piece.chars().count() >= 2
            && full.matches(prev_piece).count() == 1
        {
            let tail: String = prev_piece
                .chars()
                .skip(prev_piece.chars().count() - 1)
                .collect();
            let head: String = piece.chars().take(1).collect();
            let stop = format!("{tail}{head}");
            if full.find(&stop) == Some(before.len() - tail.len()) {
                cut = Some((stop, before.len() - tail.len()));
                break;
            }
        }
    }
    let (stop, at) = cut.expect("the test model's text has two multi-character tokens in a row");
    let mut req = base;
    // A stop string that never comes next to the one that does: the engine names the one
    // that matched.
    req.stop = vec!["\u{1}never\u{1}".into(), stop.clone()];
    let (_, text, finish, matched) = collect_with_stop(&e, req);
    assert_eq!(finish, FinishReason::Stop);
    assert_eq!(text, full[..at], "stop {stop:?}");
    assert_eq!(matched.as_deref(), Some(stop.as_str()));
}

#[test]
fn eos_stops_unless_ignored() {
    let e = engine();
    let eos = *e.tokenizer().eos_token_ids().iter().next().unwrap();
    let prompt = e.raw_tokens("Hello").unwrap();
    // A huge bias on EOS makes the model pick it at once.
    let mut req = GenerateRequest::new(prompt.clone(), 10);
    req.sampling.logit_bias.insert(eos, 1e4);
    // The EOS token ends the generation without being streamed.
    let (ids, text, finish, matched) = collect_with_stop(&e, req.clone());
    assert_eq!(
        (ids, text.as_str(), finish, matched),
        (vec![], "", FinishReason::Stop, None)
    );
    req.ignore_eos = true;
    let (ids, _, finish) = collect(&e, req);
    assert_eq!((ids.len(), finish), (10, FinishReason::Length));
}

#[test]
fn bad_requests_get_errors() {
    let e = engine();
    assert!(matches!(
        e.generate(GenerateRequest::new(vec![], 5)),
        Err(EngineError::EmptyPrompt)
    ));
    let ctx = e.info().context_length.unwrap() as usize;
    match e.generate(GenerateRequest::new(vec![1; ctx + 1], 5)) {
        Err(EngineError::PromptTooLong { prompt, context }) => {
            assert_eq!((prompt, context), (ctx + 1, ctx))
        }
        other => panic!("{other:?}"),
    }
    let vocab = e.info().vocab_size as u32;
    let err = e
        .generate(GenerateRequest::new(vec![vocab + 5], 5))
        .unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
}

#[test]
fn broken_model_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = models::model("qwen3", "bf16");
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    // Truncated weights.
    let w = std::fs::read(src.join("model.safetensors")).unwrap();
    std::fs::write(dir.path().join("model.safetensors"), &w[..w.len() / 2]).unwrap();
    let err = Engine::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    // A config that disagrees with the weights names the tensor.
    std::fs::write(dir.path().join("model.safetensors"), &w).unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    cfg["intermediate_size"] = serde_json::json!(cfg["intermediate_size"].as_i64().unwrap() + 8);
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    let err = Engine::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("mlp") && err.contains("shape"), "{err}");
}
