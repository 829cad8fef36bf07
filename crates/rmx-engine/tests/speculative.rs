//! Speculative decoding by prompt lookup (issue #24): the output is the one a plain decode
//! gives, token for token (greedy, seeded sampling, stop strings and max_tokens cutting a
//! block of agreed guesses), and sampled outputs keep their distribution.
#![allow(clippy::unwrap_used)] // tests panic on failure by design

use std::collections::HashMap;

use rmx_engine::speculative::{Drafts, Off};
use rmx_engine::{Engine, Event, FinishReason, GenerateRequest, SamplingParams, Speculation};
use rmx_tests::models;

/// Everything a generation sent: each token event, and how it ended.
#[derive(Debug, PartialEq)]
struct Run {
    tokens: Vec<(u32, String)>,
    logprobs: Vec<Option<rmx_engine::TokenLogprob>>,
    finish: FinishReason,
    stop_sequence: Option<String>,
    tail: String,
    completion_tokens: usize,
    drafts: Option<Drafts>,
    off: Option<Off>,
    /// Prompt tokens read from the prefix cache.
    cached: usize,
}

impl Run {
    fn ids(&self) -> Vec<u32> {
        self.tokens.iter().map(|t| t.0).collect()
    }
}

fn generate(e: &Engine, req: GenerateRequest) -> Run {
    collect(e.generate(req).unwrap())
}

fn collect(mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>) -> Run {
    let (mut tokens, mut logprobs) = (Vec::new(), Vec::new());
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, text, logprob } => {
                tokens.push((id, text));
                logprobs.push(logprob);
            }
            Event::Done {
                finish,
                stop_sequence,
                text,
                usage,
                ..
            } => {
                return Run {
                    tokens,
                    logprobs,
                    finish,
                    stop_sequence,
                    tail: text,
                    completion_tokens: usage.completion_tokens,
                    drafts: usage.drafts,
                    off: usage.speculation_off,
                    cached: usage.cached_tokens,
                }
            }
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

fn request(prompt: &[u32], max_tokens: usize) -> GenerateRequest {
    let mut r = GenerateRequest::new(prompt.to_vec(), max_tokens);
    r.ignore_eos = true;
    r
}

fn speculating(mut r: GenerateRequest, k: usize) -> GenerateRequest {
    r.speculative = Some(Speculation::prompt_lookup(k).unwrap());
    r
}

/// Code that repeats itself, so guesses copied from it are often right once the model copies.
const REPETITIVE: &str = "fn add(a: i32, b: i32) -> i32 { a + b }\n\
    fn add(a: i32, b: i32) -> i32 { a + b }\n\
    fn add(a: i32, b: i32) -> i32 { a + b }\n\
    fn add(a: i32, b: i32) -> i32 { a + b }\n";

const PLAIN: &str = "The history of the lighthouse keeper's daughter began on a cold morning";

/// The request's output, with nothing but `ids` likely: their logits raised far above the
/// rest, so the text cycles through them and copied guesses are often right (and often not).
fn narrowed(mut r: GenerateRequest, ids: &[u32]) -> GenerateRequest {
    r.sampling.logit_bias = ids.iter().map(|&i| (i, 30.0)).collect::<HashMap<_, _>>();
    r
}

/// Three distinct ids of the model's vocabulary, and a prompt that cycles through them.
fn three_ids(e: &Engine) -> ([u32; 3], Vec<u32>) {
    let mut ids = e.raw_tokens(REPETITIVE).unwrap();
    ids.dedup();
    let mut three = Vec::new();
    for id in ids.iter().rev() {
        if !three.contains(id) {
            three.push(*id);
        }
        if three.len() == 3 {
            break;
        }
    }
    let three = [three[0], three[1], three[2]];
    let pattern = [0, 1, 2, 0, 2, 1, 1, 0, 2, 2, 0, 1, 0, 1, 2, 0, 0, 2, 1, 0];
    let mut prompt = e.raw_tokens("Say:").unwrap();
    prompt.extend(pattern.iter().map(|&i| three[i]));
    (three, prompt)
}

/// The parts of two runs that must agree (everything but the speculation counts).
fn assert_same(spec: &Run, plain: &Run, what: &str) {
    assert_eq!(spec.tokens, plain.tokens, "{what}");
    assert_eq!(spec.logprobs, plain.logprobs, "{what}");
    assert_eq!(
        (
            spec.finish,
            &spec.stop_sequence,
            &spec.tail,
            spec.completion_tokens
        ),
        (
            plain.finish,
            &plain.stop_sequence,
            &plain.tail,
            plain.completion_tokens
        ),
        "{what}"
    );
}

fn add(total: &mut Drafts, run: &Run) {
    let d = run.drafts.expect("a speculating run reports its guesses");
    total.drafted += d.drafted;
    total.accepted += d.accepted;
}

/// f32 models have no near-ties: the same tokens exactly, plain greedy (one argmax over the
/// block) and greedy with a logit bias (the block's rows sampled one by one), with guesses
/// both agreed with and refused along the way.
#[test]
fn greedy_with_prompt_lookup_is_greedy_without_it_f32() {
    for family in ["llama", "qwen3"] {
        let e = Engine::load(&models::model(family, "f32")).unwrap();
        let (three, cycling) = three_ids(&e);
        let mut total = Drafts::default();
        let cases = [
            (e.raw_tokens(REPETITIVE).unwrap(), None),
            (e.raw_tokens(PLAIN).unwrap(), None),
            (cycling, Some(three)),
        ];
        for (prompt, bias) in cases {
            let base = |n| match bias {
                Some(ids) => narrowed(request(&prompt, n), &ids),
                None => request(&prompt, n),
            };
            let plain = generate(&e, base(48));
            for k in [3, 8] {
                let spec = generate(&e, speculating(base(48), k));
                eprintln!("{family} k={k} bias={}: {:?}", bias.is_some(), spec.drafts);
                assert_same(&spec, &plain, &format!("{family} k={k}"));
                add(&mut total, &spec);
            }
        }
        assert!(total.accepted > 0, "{family}: no guess was agreed with");
        assert!(
            total.accepted < total.drafted,
            "{family}: no guess was refused"
        );
    }
}

/// `max_tokens` and stop strings cut inside a block of agreed guesses exactly where a plain
/// run stops: same tokens, same text pieces, same finish, same stop string and held-back tail.
#[test]
fn max_tokens_and_stop_strings_cut_a_block_where_plain_decoding_stops() {
    let e = Engine::load(&models::model("llama", "f32")).unwrap();
    let (three, prompt) = three_ids(&e);
    let base = |n| narrowed(request(&prompt, n), &three);
    let full = generate(&e, base(40));
    for n in 1..=12 {
        let spec = generate(&e, speculating(base(n), 8));
        assert_same(&spec, &generate(&e, base(n)), &format!("max_tokens {n}"));
    }
    // Stop strings made of two neighbouring tokens' text, at several places in the output.
    let mut stops = 0;
    for j in (2..full.tokens.len() - 1).step_by(5) {
        let stop = format!("{}{}", full.tokens[j].1, full.tokens[j + 1].1);
        if stop.trim().is_empty() {
            continue;
        }
        let mut plain_req = base(40);
        plain_req.stop = vec![stop.clone()];
        let plain = generate(&e, plain_req.clone());
        assert_eq!(plain.finish, FinishReason::Stop, "{stop:?}");
        let spec = generate(&e, speculating(plain_req, 8));
        assert_same(&spec, &plain, &format!("stop {stop:?}"));
        assert!(
            spec.drafts.unwrap().accepted > 0,
            "{stop:?}: no block to cut"
        );
        stops += 1;
    }
    assert!(stops >= 3, "only {stops} stop strings tried");
}

/// With a seed, a sampled speculative run draws the same random numbers for the same tokens as
/// a plain one (the sampler is asked once per sent token), so on f32 it is the same output,
/// logprobs included, under top-k, top-p, min-p, penalties and a logit bias.
#[test]
fn seeded_sampling_with_prompt_lookup_is_the_plain_output() {
    let e = Engine::load(&models::model("llama", "f32")).unwrap();
    let (three, prompt) = three_ids(&e);
    let settings = [
        SamplingParams {
            temperature: 1.0,
            ..SamplingParams::default()
        },
        SamplingParams {
            temperature: 0.8,
            top_k: 2,
            top_p: 0.9,
            min_p: 0.05,
            ..SamplingParams::default()
        },
        SamplingParams {
            temperature: 1.0,
            repetition_penalty: 1.3,
            presence_penalty: 0.5,
            frequency_penalty: 0.3,
            ..SamplingParams::default()
        },
    ];
    let mut total = Drafts::default();
    for (i, s) in settings.iter().enumerate() {
        for seed in 0..3 {
            let mut r = narrowed(request(&prompt, 24), &three);
            let bias = std::mem::take(&mut r.sampling.logit_bias);
            r.sampling = SamplingParams {
                seed: Some(seed),
                logit_bias: bias,
                ..s.clone()
            };
            r.top_logprobs = Some(3);
            let plain = generate(&e, r.clone());
            let spec = generate(&e, speculating(r, 6));
            assert_same(&spec, &plain, &format!("settings {i} seed {seed}"));
            add(&mut total, &spec);
        }
    }
    assert!(
        total.accepted > 0 && total.accepted < total.drafted,
        "{total:?}"
    );
}

/// bf16 and 4-bit: a k+1-token forward rounds differently from a one-token one, so the first
/// token that differs (if any) must be a near-tie in the plain run's own log-probabilities.
#[test]
fn greedy_with_prompt_lookup_bf16_and_4bit_differs_only_at_near_ties() {
    for quant in ["bf16", "4bit"] {
        let e = Engine::load(&models::model("llama", quant)).unwrap();
        let (three, cycling) = three_ids(&e);
        let cases = [
            (e.raw_tokens(REPETITIVE).unwrap(), None),
            (cycling, Some(three)),
        ];
        let mut total = Drafts::default();
        for (prompt, bias) in cases {
            let base = |n| match bias {
                Some(ids) => narrowed(request(&prompt, n), &ids),
                None => request(&prompt, n),
            };
            let mut with_top = base(24);
            with_top.top_logprobs = Some(8);
            let plain = generate(&e, with_top);
            let spec = generate(&e, speculating(base(24), 6));
            add(&mut total, &spec);
            differs_only_at_a_tie(&spec, &plain, quant);
        }
        assert!(total.accepted > 0, "{quant}: {total:?}");
    }
}

/// The first token where `spec` leaves `plain` (run with top logprobs), if any, is a near tie
/// there: the two candidates' log-probabilities within two bf16 steps at the magnitude of a
/// 128K-151K vocabulary's (about -12).
fn differs_only_at_a_tie(spec: &Run, plain: &Run, what: &str) {
    const TIE: f32 = 0.125;
    let (a, b) = (spec.ids(), plain.ids());
    let Some(j) = (0..a.len()).find(|&j| a[j] != b[j]) else {
        return;
    };
    let lp = plain.logprobs[j].as_ref().unwrap();
    let alt = lp.top.iter().find(|t| t.0 == a[j]);
    let gap = alt.map_or(f32::INFINITY, |t| lp.logprob - t.1);
    eprintln!("{what}: first difference at {j}, gap {gap}");
    assert!(gap <= TIE, "{what}: token {j} differs by {gap} (not a tie)");
}

/// Chi-square statistic of two samples' counts over the same categories (homogeneity), and its
/// degrees of freedom.
fn chi_square(a: &HashMap<u32, usize>, b: &HashMap<u32, usize>) -> (f64, usize) {
    let (na, nb) = (
        a.values().sum::<usize>() as f64,
        b.values().sum::<usize>() as f64,
    );
    let mut keys: Vec<u32> = a.keys().chain(b.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let mut chi = 0.0;
    for k in &keys {
        let (x, y) = (
            *a.get(k).unwrap_or(&0) as f64,
            *b.get(k).unwrap_or(&0) as f64,
        );
        let total = x + y;
        for (obs, n) in [(x, na), (y, nb)] {
            let expected = total * n / (na + nb);
            chi += (obs - expected).powi(2) / expected;
        }
    }
    (chi, keys.len().saturating_sub(1))
}

/// Sampled speculative decoding keeps the model's distribution: at temperature 2, the first
/// token's frequencies over 800 seeds fit the exact distribution the plain sampler draws from,
/// and the first five tokens' frequencies over 200 seeds match a plain run's over other seeds
/// (chi-square tests at p = 1e-4). Checked by mutation: a rule that draws again from the whole
/// distribution (guess included) on a refusal, so accepting guesses too often, fails the
/// first check (chi-square 76 against a bound of 18.4).
#[test]
fn sampled_prompt_lookup_keeps_the_distribution() {
    const SEEDS: u64 = 200;
    const POSITIONS: usize = 5;
    let e = Engine::load(&models::model("llama", "f32")).unwrap();
    let (three, prompt) = three_ids(&e);
    let counts = |spec: bool, first_seed: u64| {
        let receivers: Vec<_> = (first_seed..first_seed + SEEDS)
            .map(|seed| {
                let mut r = request(&prompt, POSITIONS);
                // Twice `narrowed`'s: at temperature 2 the rest of the vocabulary keeps a
                // few percent with 30.
                r.sampling.logit_bias = three.iter().map(|&i| (i, 60.0)).collect();
                // The flattest the API allows: guesses are agreed with often, and a rule
                // that favours guesses shows more.
                r.sampling.temperature = 2.0;
                r.sampling.seed = Some(seed);
                if spec {
                    r = speculating(r, 2);
                }
                e.generate(r).unwrap()
            })
            .collect();
        let mut per_position = vec![HashMap::<u32, usize>::new(); POSITIONS];
        let mut total = Drafts::default();
        for rx in receivers {
            let run = collect(rx);
            if spec {
                add(&mut total, &run);
            }
            for (p, id) in run.ids().into_iter().enumerate() {
                // The rest of the vocabulary shares what the bias leaves it: one category.
                let id = if three.contains(&id) { id } else { u32::MAX };
                *per_position[p].entry(id).or_default() += 1;
            }
        }
        (per_position, total)
    };
    // Other seeds for the speculative runs: independent samples, not the same draws.
    let (plain, _) = counts(false, 0);
    let (spec, drafts) = counts(true, 100_000);
    eprintln!("{drafts:?}");
    assert!(
        drafts.accepted >= SEEDS as usize / 4 && drafts.accepted < drafts.drafted,
        "the rule was hardly exercised: {drafts:?}"
    );
    // The first token, where the guess is always the same one, against the exact distribution
    // the plain sampler draws from (the logprobs at temperature 2, renormalised over the three
    // ids), from many more draws: the sharpest check of the acceptance rule.
    let mut exact = request(&prompt, 1);
    exact.sampling.logit_bias = three.iter().map(|&i| (i, 60.0)).collect();
    exact.top_logprobs = Some(3);
    let top = generate(&e, exact).logprobs[0].clone().unwrap().top;
    let norm: f64 = top.iter().map(|t| (t.1 as f64 / 2.0).exp()).sum();
    let firsts: Vec<_> = (0..4 * SEEDS)
        .map(|seed| {
            let mut r = request(&prompt, 2);
            r.sampling.logit_bias = three.iter().map(|&i| (i, 60.0)).collect();
            r.sampling.temperature = 2.0;
            r.sampling.seed = Some(200_000 + seed);
            e.generate(speculating(r, 1)).unwrap()
        })
        .collect();
    let mut seen = HashMap::<u32, usize>::new();
    for rx in firsts {
        *seen.entry(collect(rx).ids()[0]).or_default() += 1;
    }
    let mut chi = 0.0;
    for (id, lp) in &top {
        let expected = 4.0 * SEEDS as f64 * (*lp as f64 / 2.0).exp() / norm;
        let got = *seen.get(id).unwrap_or(&0) as f64;
        chi += (got - expected).powi(2) / expected;
    }
    eprintln!("first token: chi2 {chi:.2} seen {seen:?} exact {top:?}");
    assert_eq!(seen.keys().filter(|k| !three.contains(k)).count(), 0);
    assert!(
        chi < 18.42,
        "first token: chi-square {chi:.2} >= 18.42 (2 df)"
    );
    for p in 0..POSITIONS {
        let (chi, df) = chi_square(&plain[p], &spec[p]);
        // The chi-square distribution's 1e-4 upper tail for 1..=3 degrees of freedom.
        let bound = [0.0, 15.14, 18.42, 21.11][df];
        eprintln!(
            "position {p}: chi2 {chi:.2} df {df} plain {:?} spec {:?}",
            plain[p], spec[p]
        );
        assert!(
            chi < bound,
            "position {p}: chi-square {chi:.2} >= {bound} ({df} df)"
        );
    }
}

/// Models with recurrent layers (Qwen3.5's and Qwen3-Next's Gated DeltaNet) speculate too: a
/// block with a refused guess puts their states back and reads the kept tokens again, so the
/// output is the plain one, greedy and seeded, by prompt lookup and with a draft model (a
/// Qwen3 of the same tokenizer); and what the answer leaves in the prefix cache is the plain
/// run's (the same prompt again reads it and answers the same).
#[test]
fn recurrent_layers_speculate_with_the_plain_output() {
    let draft = models::model("qwen3", "f32");
    for family in ["qwen3_5", "qwen3_next"] {
        let e = Engine::load(&models::model(family, "f32")).unwrap();
        e.use_draft(&draft).unwrap();
        let (three, cycling) = three_ids(&e);
        let mut total = Drafts::default();
        let sampled = SamplingParams {
            temperature: 0.9,
            seed: Some(3),
            ..SamplingParams::default()
        };
        for (prompt, bias) in [
            (e.raw_tokens(REPETITIVE).unwrap(), None),
            (cycling, Some(three)),
        ] {
            for sampling in [SamplingParams::default(), sampled.clone()] {
                let base = |n| {
                    let mut r = match bias {
                        Some(ids) => narrowed(request(&prompt, n), &ids),
                        None => request(&prompt, n),
                    };
                    r.sampling.temperature = sampling.temperature;
                    r.sampling.seed = sampling.seed;
                    r.no_prefix_cache = true;
                    r
                };
                let plain = generate(&e, base(32));
                for spec in [
                    speculating(base(32), 3),
                    speculating(base(32), 8),
                    drafting(base(32), &draft, 4),
                ] {
                    let what = format!("{family} {:?} seed {:?}", spec.speculative, sampling.seed);
                    let got = generate(&e, spec);
                    assert_eq!(got.off, None, "{what}");
                    assert_same(&got, &plain, &what);
                    add(&mut total, &got);
                }
            }
        }
        assert!(total.accepted > 0, "{family}: no guess was agreed with");
        assert!(
            total.accepted < total.drafted,
            "{family}: no guess was refused"
        );
        // The prefix cache: a speculating answer leaves its cache, which the next turn (the
        // prompt, the answer, more text) reads past the first prompt and answers from as a run
        // that reads nothing from the cache does.
        let prompt = e.raw_tokens(REPETITIVE).unwrap();
        let first = generate(&e, speculating(request(&prompt, 16), 6));
        assert!(first.drafts.unwrap().drafted > 0);
        let mut next = prompt.clone();
        next.extend(first.ids());
        next.extend(e.raw_tokens(" and then").unwrap());
        let mut cold = request(&next, 12);
        cold.no_prefix_cache = true;
        let want = generate(&e, cold);
        let got = generate(&e, request(&next, 12));
        assert!(got.cached > prompt.len(), "{family}: cached {}", got.cached);
        assert_eq!(got.ids(), want.ids(), "{family}: the cached answer's state");
    }
    assert!(Off::Cache.to_string().contains("cannot"));
}

/// Gemma 3's sliding-window layers (a window of 8 in the tiny model, so blocks land on both
/// sides of the ring's wrap) drop refused guesses too: the same tokens as without.
#[test]
fn a_sliding_window_model_speculates_and_keeps_its_greedy_tokens() {
    let e = Engine::load(&models::model("gemma3", "f32")).unwrap();
    let (three, cycling) = three_ids(&e);
    let mut total = Drafts::default();
    for (prompt, bias) in [
        (e.raw_tokens(REPETITIVE).unwrap(), None),
        (cycling, Some(three)),
    ] {
        let base = |n| match bias {
            Some(ids) => narrowed(request(&prompt, n), &ids),
            None => request(&prompt, n),
        };
        let plain = generate(&e, base(40));
        for k in [2, 6] {
            let spec = generate(&e, speculating(base(40), k));
            assert_eq!(spec.off, None);
            assert_same(&spec, &plain, &format!("gemma3 k={k}"));
            add(&mut total, &spec);
        }
    }
    assert!(total.accepted > 0, "no guess was agreed with: {total:?}");
    assert!(
        total.accepted < total.drafted,
        "no guess was refused: {total:?}"
    );
}

/// A quantized KV cache is not cut back: such a request runs plainly (its quantized answer)
/// and says why.
#[test]
fn a_quantized_kv_cache_turns_speculation_off_and_says_so() {
    let e = Engine::load(&models::model("llama_hd64", "f32")).unwrap();
    let prompt = e.raw_tokens(REPETITIVE).unwrap();
    let quantized = |mut r: GenerateRequest| {
        r.kv_quant = Some(rmx_engine::KvQuant::new(8, 64, 0).unwrap());
        r
    };
    let plain = generate(&e, quantized(request(&prompt, 12)));
    let spec = generate(&e, quantized(speculating(request(&prompt, 12), 4)));
    assert_eq!(spec.off, Some(Off::KvQuant));
    assert_eq!(spec.drafts, None);
    assert_same(&spec, &plain, "llama_hd64 8-bit KV");
}

fn drafting(mut r: GenerateRequest, draft: &std::path::Path, k: usize) -> GenerateRequest {
    r.speculative = Some(Speculation::draft(draft, k).unwrap());
    r
}

/// A draft model's greedy guesses (draft.rs) leave the output as it is without them, on f32
/// exactly: greedy, seeded sampling with logprobs, and `max_tokens` cutting a block. Drafts: a
/// Qwen2 of other weights for a Qwen3 (same tokenizer; its guesses are mostly refused) and the
/// model itself, whose guesses the model takes (all of them but where a one-token step and the
/// block's forward round a near tie apart).
#[test]
fn a_draft_model_gives_the_plain_output_f32() {
    let target = models::model("qwen3", "f32");
    let other = models::model("qwen2", "f32");
    let e = Engine::load(&target).unwrap();
    e.use_draft(&other).unwrap();
    e.use_draft(&target).unwrap();
    let sampled = SamplingParams {
        temperature: 0.8,
        top_k: 20,
        seed: Some(7),
        ..SamplingParams::default()
    };
    let mut own = Drafts::default();
    for text in [PLAIN, REPETITIVE] {
        let prompt = e.raw_tokens(text).unwrap();
        for sampling in [SamplingParams::default(), sampled.clone()] {
            let mut base = request(&prompt, 40);
            base.sampling = sampling;
            base.top_logprobs = Some(2);
            let plain = generate(&e, base.clone());
            for (draft, k) in [(&other, 4), (&target, 6)] {
                let spec = generate(&e, drafting(base.clone(), draft, k));
                let what = format!("{} k={k} {:?}", draft.display(), base.sampling.seed);
                eprintln!("{what}: {:?}", spec.drafts);
                assert_eq!(spec.off, None, "{what}");
                assert_same(&spec, &plain, &what);
                let d = spec.drafts.expect("a drafting run reports its guesses");
                assert!(d.drafted > 0, "{what}: {d:?}");
                if d.accepted == 0 {
                    // Every block refused: the guessing pauses (speculative::Pause), so fewer
                    // than a block of k guesses a token.
                    assert!(d.drafted < k * plain.completion_tokens / 2, "{what}: {d:?}");
                }
                if draft == &target && base.sampling.is_greedy() {
                    add(&mut own, &spec);
                }
            }
        }
        // max_tokens inside a block of taken guesses: the plain run's length and tokens.
        for n in 1..=7 {
            let spec = generate(&e, drafting(request(&prompt, n), &target, 6));
            assert_same(
                &spec,
                &generate(&e, request(&prompt, n)),
                &format!("max_tokens {n}"),
            );
        }
    }
    assert!(
        own.accepted * 10 >= own.drafted * 9,
        "the model refused its own greedy guesses: {own:?}"
    );
}

/// A draft the model cannot take is refused before any answer, saying why: another tokenizer,
/// recurrent layers (their state cannot be cut back), a folder that holds no model.
#[test]
fn a_draft_of_another_tokenizer_or_with_recurrent_layers_is_refused() {
    let e = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let refusal = |dir: &std::path::Path| e.use_draft(dir).unwrap_err().to_string();
    let other = refusal(&models::model("llama", "f32"));
    assert!(other.contains("tokenizer differs"), "{other}");
    let recurrent = refusal(&models::model("qwen3_5", "f32"));
    assert!(recurrent.contains("recurrent layers"), "{recurrent}");
    let empty = tempfile::tempdir().unwrap();
    let none = refusal(empty.path());
    assert!(none.contains("tokenizer"), "{none}");
    // The model still answers, and plain prompt lookup still speculates.
    let prompt = e.raw_tokens(REPETITIVE).unwrap();
    assert_eq!(
        generate(&e, speculating(request(&prompt, 8), 4))
            .tokens
            .len(),
        8
    );
}

/// bf16 and 4-bit with a draft model (the model itself, so most guesses are taken and the
/// block's forward replaces one-token steps): where the tokens first differ from plain greedy
/// decoding, the plain run's top two are within the tie rule (two bf16 steps).
#[test]
fn a_draft_model_bf16_and_4bit_differs_only_at_near_ties() {
    for quant in ["bf16", "4bit"] {
        let target = models::model("qwen3", quant);
        let e = Engine::load(&target).unwrap();
        e.use_draft(&target).unwrap();
        let mut total = Drafts::default();
        for text in [PLAIN, REPETITIVE] {
            let prompt = e.raw_tokens(text).unwrap();
            let mut with_top = request(&prompt, 24);
            with_top.top_logprobs = Some(8);
            let plain = generate(&e, with_top);
            let spec = generate(&e, drafting(request(&prompt, 24), &target, 4));
            add(&mut total, &spec);
            differs_only_at_a_tie(&spec, &plain, quant);
        }
        assert!(total.accepted > 0, "{quant}: {total:?}");
    }
}
