//! Thinking budgets (issue #20): once a thought has taken its budget, the engine feeds the
//! model the tokens that close it, and the answer goes on from there exactly as if the prompt
//! had held the thought and its close: checked against a plain run from that prompt, in the
//! batch (greedy rows, rows sampled alone with penalties and logprobs, several budgets at
//! once) and alone (a constrained answer).
#![allow(clippy::unwrap_used)] // tests panic on failure by design

use rmx_engine::{Constraint, Engine, Event, GenerateRequest, Think, ThoughtBudget, TokenLogprob};
use rmx_tests::models;
use tokio::sync::mpsc::UnboundedReceiver;

/// A chat turn whose template opened the thought, as Qwen3's does with thinking on.
const PROMPT: &str =
    "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n<think>\n";
const CLOSE: &str = "\n</think>\n\n";

fn collect(mut rx: UnboundedReceiver<Event>) -> (Vec<u32>, Vec<Option<TokenLogprob>>, String) {
    let (mut ids, mut lps, mut text) = (Vec::new(), Vec::new(), String::new());
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token {
                id,
                text: t,
                logprob,
            } => {
                ids.push(id);
                lps.push(logprob);
                text.push_str(&t);
            }
            Event::Done { text: t, .. } => {
                text.push_str(&t);
                return (ids, lps, text);
            }
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

fn budget(e: &Engine, max_tokens: usize) -> ThoughtBudget {
    ThoughtBudget {
        max_tokens,
        open: "<think>".into(),
        close: "</think>".into(),
        starts_inside: true,
        forced: e.raw_tokens(CLOSE).unwrap(),
    }
}

fn request(prompt: &[u32], max_tokens: usize) -> GenerateRequest {
    let mut r = GenerateRequest::new(prompt.to_vec(), max_tokens);
    r.ignore_eos = true;
    r
}

/// `out` is the first `n` tokens of the thought, the close, then what a plain run from the
/// prompt with those tokens appended writes (same sampling settings as `like`).
fn assert_closed_after(e: &Engine, prompt: &[u32], like: &GenerateRequest, out: &[u32], n: usize) {
    let close = e.raw_tokens(CLOSE).unwrap();
    assert!(out.len() > n + close.len(), "{out:?}");
    assert_eq!(&out[n..n + close.len()], close.as_slice(), "{out:?}");
    let mut read = prompt.to_vec();
    read.extend(&out[..n + close.len()]);
    let mut plain = like.clone();
    plain.prompt = read;
    plain.thought_budget = None;
    plain.constraint = None;
    plain.max_tokens = out.len() - n - close.len();
    let (rest, _, _) = collect(e.generate(plain).unwrap());
    assert_eq!(&out[n + close.len()..], rest.as_slice());
}

#[test]
fn a_thought_is_closed_after_its_budget_and_the_answer_goes_on_from_the_close() {
    let e = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let (free, _, _) = collect(e.generate(request(&prompt, 12)).unwrap());
    for n in [0, 1, 5] {
        let mut r = request(&prompt, 20);
        r.thought_budget = Some(budget(&e, n));
        let (out, _, _) = collect(e.generate(r.clone()).unwrap());
        assert_eq!(out[..n], free[..n], "budget {n}");
        assert_closed_after(&e, &prompt, &r, &out, n);
    }
}

#[test]
fn penalties_count_the_close_and_its_logprobs_are_the_models() {
    let e = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let mut r = request(&prompt, 18);
    r.sampling.repetition_penalty = 1.5;
    r.top_logprobs = Some(2);
    r.thought_budget = Some(budget(&e, 4));
    let (out, lps, _) = collect(e.generate(r.clone()).unwrap());
    assert_closed_after(&e, &prompt, &r, &out, 4);
    // The close's logprobs are the model's for the tokens it was given, with the step's own
    // alternatives (which need not include them).
    let close = e.raw_tokens(CLOSE).unwrap();
    for (i, id) in close.iter().enumerate() {
        let lp = lps[4 + i].as_ref().unwrap();
        assert_eq!(lp.id, *id);
        assert!(lp.logprob.is_finite() && lp.logprob <= 0.0, "{lp:?}");
        assert_eq!(lp.top.len(), 2);
        assert!(lp.top[0].1 >= lp.logprob);
    }
}

#[test]
fn rows_of_one_batch_close_their_thoughts_at_their_own_budgets() {
    let e = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let budgets = [2, 6, 3];
    let reqs: Vec<GenerateRequest> = budgets
        .iter()
        .map(|&n| {
            let mut r = request(&prompt, 16);
            r.thought_budget = Some(budget(&e, n));
            r
        })
        .collect();
    let mut unbudgeted = request(&prompt, 16);
    unbudgeted.sampling.repetition_penalty = 1.2;
    // All at once, so they decode as rows of one batch, beside a row without a budget.
    let rxs: Vec<_> = reqs
        .iter()
        .chain([&unbudgeted])
        .map(|r| e.generate(r.clone()).unwrap())
        .collect();
    let outs: Vec<Vec<u32>> = rxs.into_iter().map(|rx| collect(rx).0).collect();
    for ((r, n), out) in reqs.iter().zip(budgets).zip(&outs) {
        assert_closed_after(&e, &prompt, r, out, n);
    }
    let (alone, _, _) = collect(e.generate(unbudgeted).unwrap());
    assert_eq!(outs[3], alone, "a row without a budget is untouched");
}

#[test]
fn a_constrained_answer_follows_the_closed_thought() {
    let e = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let prompt = e.raw_tokens(PROMPT).unwrap();
    let mut r = request(&prompt, 60);
    r.ignore_eos = false;
    r.constraint = Some(
        e.constrain(&Constraint::json_object().with_think(Think::Inside))
            .unwrap(),
    );
    r.thought_budget = Some(budget(&e, 3));
    let (out, _, text) = collect(e.generate(r).unwrap());
    let close = e.raw_tokens(CLOSE).unwrap();
    assert_eq!(&out[3..3 + close.len()], close.as_slice(), "{text:?}");
    let answer = text.split_once("</think>").unwrap().1;
    let v: serde_json::Value = serde_json::from_str(answer.trim()).unwrap();
    assert!(v.is_object(), "{text:?}");
}
