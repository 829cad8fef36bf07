//! The sampler on fixed logits: greedy, seeds, truncation (top-k, top-p, min-p), penalties and
//! logit bias, each checked against what its definition says.
#![allow(clippy::unwrap_used)] // tests panic on failure by design

use std::collections::{HashMap, HashSet};

use rmx_engine::sampler::Sampler;
use rmx_engine::SamplingParams;
use rmx_mlx::Array;

fn logits_of(probs: &[f32]) -> Array {
    let l: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    Array::from_slice(&l, &[1, probs.len() as i32]).unwrap()
}

/// Draws `n` tokens, each from a fresh step over the same logits.
fn draws(params: SamplingParams, logits: &Array, n: usize) -> Vec<u32> {
    let vocab = logits.dim(-1);
    let mut s = Sampler::new(&params, vocab, &[]).unwrap();
    (0..n)
        .map(|_| s.choose(logits).unwrap().token.item::<u32>().unwrap())
        .collect()
}

fn sampled(temperature: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        seed: Some(seed),
        ..SamplingParams::default()
    }
}

const PROBS: [f32; 6] = [0.4, 0.25, 0.15, 0.1, 0.06, 0.04];

#[test]
fn greedy_is_argmax_of_logprobs() {
    let l = logits_of(&PROBS);
    assert_eq!(draws(SamplingParams::default(), &l, 3), vec![0, 0, 0]);
    let mut s = Sampler::new(&SamplingParams::default(), 6, &[]).unwrap();
    let c = s.choose(&l).unwrap();
    let lp = c.logprobs.to_vec::<f32>().unwrap();
    // logits - logsumexp(logits): exp sums to 1.
    let total: f32 = lp.iter().map(|x| x.exp()).sum();
    assert!((total - 1.0).abs() < 1e-5, "{total}");
}

#[test]
fn same_seed_same_tokens_other_seed_other_tokens() {
    let l = logits_of(&PROBS);
    let a = draws(sampled(1.0, 7), &l, 64);
    let b = draws(sampled(1.0, 7), &l, 64);
    let c = draws(sampled(1.0, 8), &l, 64);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // And it really samples: more than one distinct token in 64 draws at p_max = 0.4.
    assert!(a.iter().collect::<HashSet<_>>().len() > 2, "{a:?}");
}

#[test]
fn frequencies_follow_the_distribution() {
    let l = logits_of(&PROBS);
    let d = draws(sampled(1.0, 1), &l, 3000);
    let f0 = d.iter().filter(|&&t| t == 0).count() as f32 / d.len() as f32;
    assert!((f0 - 0.4).abs() < 0.04, "{f0}");
}

#[test]
fn top_k_keeps_the_k_most_likely() {
    let l = logits_of(&PROBS);
    let p = SamplingParams {
        top_k: 2,
        ..sampled(1.0, 3)
    };
    let seen: HashSet<u32> = draws(p, &l, 400).into_iter().collect();
    assert_eq!(seen, HashSet::from([0, 1]));
}

/// Issue #20: a `top_k` of 2^31 or more (any u32 a request may send) keeps every token, as one
/// of the vocabulary's size does; it used to wrap to a negative k that MLX refused (a 500).
#[test]
fn issue_20_a_top_k_past_i32_keeps_every_token() {
    let l = logits_of(&PROBS);
    let all = draws(sampled(1.0, 5), &l, 64);
    for top_k in [1 << 31, u32::MAX] {
        let p = SamplingParams {
            top_k,
            ..sampled(1.0, 5)
        };
        assert_eq!(draws(p, &l, 64), all, "top_k {top_k}");
    }
}

#[test]
fn top_p_keeps_the_smallest_set_reaching_p() {
    // Mass before each token in order: 0, .4, .65, .8, ... With top_p = .7 tokens 0..=2 stay
    // (their preceding mass is below .7); token 3 (preceded by .8) goes.
    let l = logits_of(&PROBS);
    let p = SamplingParams {
        top_p: 0.7,
        ..sampled(1.0, 4)
    };
    let seen: HashSet<u32> = draws(p, &l, 600).into_iter().collect();
    assert_eq!(seen, HashSet::from([0, 1, 2]));
    // The most likely token always survives, even for a tiny top_p.
    let p = SamplingParams {
        top_p: 0.01,
        ..sampled(1.0, 4)
    };
    assert_eq!(
        draws(p, &l, 50).into_iter().collect::<HashSet<_>>(),
        HashSet::from([0])
    );
}

#[test]
fn min_p_drops_tokens_below_a_fraction_of_the_best() {
    // min_p .5 of p_max .4: keep p >= .2, i.e. tokens 0 and 1.
    let l = logits_of(&PROBS);
    let p = SamplingParams {
        min_p: 0.5,
        ..sampled(1.0, 5)
    };
    let seen: HashSet<u32> = draws(p, &l, 400).into_iter().collect();
    assert_eq!(seen, HashSet::from([0, 1]));
}

#[test]
fn low_temperature_sharpens() {
    let l = logits_of(&PROBS);
    let d = draws(sampled(0.05, 6), &l, 200);
    assert!(d.iter().all(|&t| t == 0), "{d:?}");
}

#[test]
fn presence_and_frequency_penalties_subtract_as_specified() {
    // Logits 2.0, 1.9, 0: greedy picks 0; after that, presence 0.5 makes it 1.5 < 1.9.
    let l = Array::from_slice(&[2.0f32, 1.9, 0.0], &[1, 3]).unwrap();
    let p = SamplingParams {
        presence_penalty: 0.5,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(&p, 3, &[]).unwrap();
    let first = s.choose(&l).unwrap();
    assert_eq!(first.token.item::<u32>().unwrap(), 0);
    let second = s.choose(&l).unwrap();
    assert_eq!(second.token.item::<u32>().unwrap(), 1);
    // The penalized logit is exactly 2.0 - 0.5: compare logprob differences.
    let lp = second.logprobs.to_vec::<f32>().unwrap();
    assert!((lp[0] - lp[2] - 1.5).abs() < 1e-5, "{lp:?}");

    // Frequency: 0.3 per occurrence. Token 0 is chosen while 2.0 - 0.3 n > 1.9, i.e. once;
    // then 1 (1.9 - 0.3 = 1.6 < 1.7), then 0 again (1.7 > 1.6) ...
    let p = SamplingParams {
        frequency_penalty: 0.3,
        ..SamplingParams::default()
    };
    let mut s = Sampler::new(&p, 3, &[]).unwrap();
    let picks: Vec<u32> = (0..4)
        .map(|_| s.choose(&l).unwrap().token.item::<u32>().unwrap())
        .collect();
    assert_eq!(picks, vec![0, 1, 0, 1]);
}

#[test]
fn repetition_penalty_covers_the_prompt_and_divides_positive_logits() {
    let l = Array::from_slice(&[2.0f32, 1.9, -1.0], &[1, 3]).unwrap();
    let p = SamplingParams {
        repetition_penalty: 1.5,
        ..SamplingParams::default()
    };
    // Token 0 appears in the prompt: 2.0 / 1.5 = 1.33 < 1.9.
    let mut s = Sampler::new(&p, 3, &[0, 2]).unwrap();
    let c = s.choose(&l).unwrap();
    assert_eq!(c.token.item::<u32>().unwrap(), 1);
    let lp = c.logprobs.to_vec::<f32>().unwrap();
    // Negative logits are multiplied: -1.0 * 1.5.
    assert!((lp[0] - lp[2] - (2.0 / 1.5 + 1.5)).abs() < 1e-5, "{lp:?}");
}

#[test]
fn logit_bias_is_added() {
    let l = logits_of(&PROBS);
    let p = SamplingParams {
        logit_bias: HashMap::from([(5, 10.0)]),
        ..SamplingParams::default()
    };
    assert_eq!(draws(p, &l, 2), vec![5, 5]);
}
