//! Continuous batching on real (tiny, mlx-lm-written) models: requests that decode together
//! give the tokens each gives alone, sequences join and leave mid-stream, cancelled ones free
//! their rows, and sequences past the batch's size wait for a row.
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use std::time::{Duration, Instant};

use rmx_engine::{Engine, EngineOptions, Event, GenerateRequest, SamplingParams};
use tokio::sync::mpsc::UnboundedReceiver;

fn engine(family: &str, quant: &str, max_batch: usize) -> Engine {
    let options = EngineOptions {
        max_batch,
        prefix_cache_bytes: 0,
        ..EngineOptions::from_env()
    };
    Engine::load_with(&models::model(family, quant), options).unwrap()
}

const PROMPTS: &[&str] = &[
    "Hello",
    "Tell me a story about a lighthouse keeper and the sea",
    "1 2 3 4 5 6 7 8",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog again and again, and then",
    "Why?",
    "Write a poem about rain",
];

/// The requests: prompts of different lengths, different lengths of answer, and (`mixed`) a
/// seeded sampled one and one with a penalty and logprobs, which a batch samples row by row.
fn requests(e: &Engine, n: usize, mixed: bool) -> Vec<GenerateRequest> {
    (0..n)
        .map(|i| {
            let prompt = e.raw_tokens(PROMPTS[i % PROMPTS.len()]).unwrap();
            let mut r = GenerateRequest::new(prompt, 6 + 5 * (i % 5));
            r.ignore_eos = true;
            if mixed && i % 4 == 1 {
                r.sampling = SamplingParams {
                    temperature: 0.8,
                    top_p: 0.9,
                    seed: Some(i as u64),
                    ..SamplingParams::default()
                };
            }
            if mixed && i % 4 == 2 {
                r.sampling.repetition_penalty = 1.3;
                r.top_logprobs = Some(3);
            }
            r
        })
        .collect()
}

fn collect(rx: &mut UnboundedReceiver<Event>) -> Vec<u32> {
    let mut ids = vec![];
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => ids.push(id),
            Event::Done { .. } => return ids,
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done")
}

fn solo(e: &Engine, reqs: &[GenerateRequest]) -> Vec<Vec<u32>> {
    reqs.iter()
        .map(|r| collect(&mut e.generate(r.clone()).unwrap()))
        .collect()
}

/// All requests at once, the second half submitted once the first half decodes.
fn together(e: &Engine, reqs: &[GenerateRequest]) -> Vec<Vec<u32>> {
    let half = reqs.len() / 2;
    let mut rxs: Vec<_> = reqs[..half]
        .iter()
        .map(|r| e.generate(r.clone()).unwrap())
        .collect();
    let mut first: Vec<Option<Event>> = rxs.iter_mut().map(|rx| rx.blocking_recv()).collect();
    rxs.extend(reqs[half..].iter().map(|r| e.generate(r.clone()).unwrap()));
    first.resize_with(rxs.len(), || None);
    rxs.iter_mut()
        .zip(first)
        .map(|(rx, ev)| {
            let mut ids = match ev {
                Some(Event::Token { id, .. }) => vec![id],
                None => vec![],
                Some(other) => panic!("first event {other:?}"),
            };
            ids.extend(collect(rx));
            ids
        })
        .collect()
}

fn wait_idle(e: &Engine) {
    let t = Instant::now();
    while e.active_sequences() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{} sequences still active",
            e.active_sequences()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn same_tokens_batched_and_alone(family: &str) {
    let e = engine(family, "f32", 8);
    let reqs = requests(&e, 8, true);
    let alone = solo(&e, &reqs);
    let batched = together(&e, &reqs);
    for (i, (a, b)) in alone.iter().zip(&batched).enumerate() {
        assert_eq!(a, b, "{family} f32: request {i} changed in the batch");
    }
    wait_idle(&e);
}

#[test]
fn a_dense_model_gives_each_request_its_solo_tokens_in_a_batch() {
    same_tokens_batched_and_alone("qwen3");
}

#[test]
fn a_hybrid_model_gives_each_request_its_solo_tokens_in_a_batch() {
    same_tokens_batched_and_alone("qwen3_5");
}

#[test]
fn a_moe_model_gives_each_request_its_solo_tokens_in_a_batch() {
    same_tokens_batched_and_alone("qwen3_moe");
}

#[test]
fn a_sliding_window_model_decodes_concurrent_requests_one_by_one_exactly() {
    same_tokens_batched_and_alone("gemma3");
}

/// bf16 rounds a batch's products differently from a single row's: the tokens agree for a
/// while, then may part where two candidates are within bf16's rounding of each other.
#[test]
fn bf16_batches_agree_with_solo_decoding_within_rounding() {
    let e = engine("qwen3", "bf16", 8);
    let reqs = requests(&e, 6, false);
    let alone = solo(&e, &reqs);
    let batched = together(&e, &reqs);
    let mut agree = 0;
    let mut total = 0;
    for (a, b) in alone.iter().zip(&batched) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a[0], b[0], "the first token is read at batch 1 either way");
        agree += a.iter().zip(b).take_while(|(x, y)| x == y).count();
        total += a.len();
    }
    assert!(
        agree * 10 >= total * 8,
        "only {agree} of {total} tokens agree before the first difference"
    );
}

#[test]
fn sixteen_streams_with_cancellations_and_a_full_batch_each_get_their_solo_tokens() {
    // Rows for 4: the other streams wait for one, prefilled.
    let e = engine("qwen3", "f32", 4);
    let reqs = requests(&e, 16, false);
    let alone = solo(&e, &reqs);
    let mut rxs: Vec<_> = reqs
        .iter()
        .map(|r| Some(e.generate(r.clone()).unwrap()))
        .collect();
    // Every third stream hangs up after two tokens.
    let mut got: Vec<Vec<u32>> = vec![vec![]; rxs.len()];
    for (i, slot) in rxs.iter_mut().enumerate() {
        if i % 3 == 0 {
            let rx = slot.as_mut().unwrap();
            for _ in 0..2 {
                match rx.blocking_recv() {
                    Some(Event::Token { id, .. }) => got[i].push(id),
                    other => panic!("stream {i}: {other:?}"),
                }
            }
            *slot = None;
        }
    }
    for (i, slot) in rxs.iter_mut().enumerate() {
        if let Some(rx) = slot.as_mut() {
            got[i].extend(collect(rx));
        }
    }
    for (i, (a, b)) in alone.iter().zip(&got).enumerate() {
        if i % 3 == 0 {
            assert_eq!(&a[..2], &b[..], "stream {i} before it hung up");
        } else {
            assert_eq!(a, b, "stream {i}");
        }
    }
    wait_idle(&e);
    // The engine serves the next request as before.
    assert_eq!(solo(&e, &reqs[..1]), alone[..1]);
}
