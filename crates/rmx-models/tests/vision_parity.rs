//! Gemma 3, Gemma 4, Mistral Small 3.1 and Qwen3.5 with images give mlx-vlm's greedy tokens
//! (issue #27): tiny random-weight Gemma3ForConditionalGeneration,
//! Gemma4ForConditionalGeneration (each image's placeholders attending both ways),
//! Mistral3ForConditionalGeneration and Qwen3_5ForConditionalGeneration (Qwen3.5: three-axis
//! rope positions too) made with
//! mlx-vlm's model classes (tests/py/tiny_vlm.py), prompts with one and with two images, f32
//! and bf16, token for token and the first step's log-probabilities bit for bit. The prompt ids are mlx-vlm's
//! own (its processor expands each image into its placeholder run); the pixels are rmx's
//! (rmx-vision, checked against the processor in its own tests), so this covers the tower,
//! the projector and the splice.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rmx_mlx::{Array, Dtype};
use rmx_models::CausalLm;
use rmx_vision::{decode, ImageProcessor, Limits};

const MAX_TOKENS: usize = 12;

fn tiny_vlm(args: &[&str]) {
    let status = Command::new(rmx_tests::python())
        .arg(rmx_tests::py("tiny_vlm.py"))
        .args(args)
        .status()
        .expect("run tiny_vlm.py");
    assert!(status.success(), "tiny_vlm.py {args:?} failed");
}

/// The model, made once per version of the generator (rmx_tests::models::tiny_vlm_of).
fn model(family: &str, quant: &str) -> PathBuf {
    rmx_tests::models::tiny_vlm_of(family, quant)
}

/// The model's image processor, as its family's processor calls it: Mistral 3's with sides a
/// multiple of patch x merge.
fn processor(dir: &Path) -> ImageProcessor {
    let p = ImageProcessor::from_dir(dir)
        .unwrap()
        .expect("an image processor config");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    if config["model_type"] == "mistral3" {
        let unit = config["vision_config"]["patch_size"].as_u64().unwrap()
            * config["spatial_merge_size"].as_u64().unwrap();
        return p.with_patch_multiple(unit as u32);
    }
    p
}

/// Two images of odd sizes, which each processor shrinks or stretches (Gemma 3: to its 32x32;
/// Mistral 3: within 64, to multiples of 8).
fn images(dir: &Path) -> Vec<PathBuf> {
    rmx_tests::images::two_pngs(dir, 12345)
}

struct Reference {
    prompt_ids: Vec<u32>,
    tokens: Vec<u32>,
    /// The first step's log-probabilities.
    logprobs: Vec<f32>,
}

fn reference(model: &Path, prompt: &str, images: &[PathBuf], out: &Path) -> Reference {
    let mut args = vec![
        "reference".to_string(),
        "--model".into(),
        model.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--max-tokens".into(),
        MAX_TOKENS.to_string(),
        "--prompt".into(),
        prompt.into(),
    ];
    args.extend(images.iter().map(|p| p.display().to_string()));
    tiny_vlm(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect()
    };
    let logprobs = std::fs::read(out.with_extension("f32"))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Reference {
        prompt_ids: ids("prompt_ids"),
        tokens: ids("tokens"),
        logprobs,
    }
}

/// The last position's log-probabilities.
fn logprobs(model: &dyn CausalLm, hidden: &Array) -> Array {
    let last = hidden
        .slice_axis(1, hidden.dim(1) - 1, hidden.dim(1))
        .unwrap();
    // In the model's dtype, as mlx-vlm computes them.
    let logits = model.lm_head(&last).unwrap();
    logits
        .subtract(&logits.logsumexp(&[-1], true).unwrap())
        .unwrap()
        .astype(Dtype::F32)
        .unwrap()
}

/// Greedy as mlx-vlm picks: the argmax of the log-probabilities.
fn pick(lp: &Array) -> u32 {
    lp.argmax(-1, false)
        .unwrap()
        .astype(Dtype::U32)
        .unwrap()
        .to_vec::<u32>()
        .unwrap()[0]
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// rmx's greedy tokens and first-step log-probabilities.
fn rmx_tokens(
    model: &dyn CausalLm,
    dir: &Path,
    prompt_ids: &[u32],
    images: &[PathBuf],
) -> (Vec<u32>, Vec<f32>) {
    let processor = processor(dir);
    let mut sizes = Vec::new();
    let pixels: Vec<Array> = images
        .iter()
        .map(|path| {
            let img = decode(&std::fs::read(path).unwrap(), &Limits::default()).unwrap();
            let px = processor.pixel_values(&img);
            sizes.push((px.height, px.width));
            Array::from_slice(&px.data, &[3, px.height as i32, px.width as i32]).unwrap()
        })
        .collect();
    let vision = model.vision().expect("the tower is loaded");
    let features = vision.encode(&pixels).unwrap();
    // As mlx-vlm prefills: all but the last prompt token, then the last one; positions planned
    // for the whole prompt first (Qwen3.5's multimodal rope; nothing for the others). Gemma 4's
    // images, which attend both ways, it reads with the whole prompt in one forward (its
    // `chunked_prefill_policy`); the engine's split gives the same tokens (its own test).
    let mut cache = model.make_cache();
    model.plan_images(prompt_ids, &sizes, &mut cache).unwrap();
    let hidden = if model.info().model_type == "gemma4" {
        let all = Array::from_slice(prompt_ids, &[1, prompt_ids.len() as i32]).unwrap();
        model
            .forward_hidden_with_images(&all, &features, &mut cache)
            .unwrap()
    } else {
        let (head, last) = prompt_ids.split_at(prompt_ids.len() - 1);
        let head = Array::from_slice(head, &[1, head.len() as i32]).unwrap();
        model
            .forward_hidden_with_images(&head, &features, &mut cache)
            .unwrap();
        let last = Array::from_slice(last, &[1, 1]).unwrap();
        model.forward_hidden(&last, &mut cache).unwrap()
    };
    let first = logprobs(model, &hidden);
    let mut tokens = vec![pick(&first)];
    while tokens.len() < MAX_TOKENS {
        let t = Array::from_slice(&tokens[tokens.len() - 1..], &[1, 1]).unwrap();
        let hidden = model.forward_hidden(&t, &mut cache).unwrap();
        tokens.push(pick(&logprobs(model, &hidden)));
    }
    (tokens, first.to_vec::<f32>().unwrap())
}

#[test]
fn gemma3_one_and_two_images_f32_exact() {
    check("gemma3", "f32");
}

#[test]
fn gemma3_one_and_two_images_bf16_exact() {
    // The same ops in the same order round the same way in bf16 too.
    check("gemma3", "bf16");
}

#[test]
fn mistral3_one_and_two_images_f32_exact() {
    check("mistral3", "f32");
}

#[test]
fn mistral3_one_and_two_images_bf16_exact() {
    check("mistral3", "bf16");
}

#[test]
fn qwen3_5_one_and_two_images_f32_exact() {
    check("qwen3_5", "f32");
}

#[test]
fn qwen3_5_one_and_two_images_bf16_exact() {
    check("qwen3_5", "bf16");
}

#[test]
fn gemma4_one_and_two_images_f32_exact() {
    check("gemma4", "f32");
}

#[test]
fn gemma4_one_and_two_images_bf16_exact() {
    check("gemma4", "bf16");
}

fn check(family: &str, quant: &str) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = model(family, quant);
    let work = rmx_tests::target_tmp(&format!("{family}-vision-parity-{quant}"));
    let imgs = images(&work);
    let model = rmx_models::load(&dir).unwrap();
    let vision = model.vision().unwrap();
    let image_token = vision.image_token();
    // Each image's placeholders, at the size its processor makes it.
    let processor = processor(&dir);
    let per_image: Vec<usize> = imgs
        .iter()
        .map(|p| {
            let img = decode(&std::fs::read(p).unwrap(), &Limits::default()).unwrap();
            let (h, w) = processor.output_size(img.height, img.width);
            vision.placeholders(h, w)
        })
        .collect();
    for (name, prompt, imgs) in [
        ("one", "What is in this picture?", &imgs[..1]),
        ("two", "Compare them.", &imgs[..]),
    ] {
        let want = reference(&dir, prompt, imgs, &work.join(format!("{name}.json")));
        let placeholders = want
            .prompt_ids
            .iter()
            .filter(|&&t| t == image_token)
            .count();
        let want_placeholders: usize = per_image[..imgs.len()].iter().sum();
        assert_eq!(placeholders, want_placeholders, "{name}: mlx-vlm's prompt");
        let (got, lp) = rmx_tokens(model.as_ref(), &dir, &want.prompt_ids, imgs);
        assert_eq!(got, want.tokens[..MAX_TOKENS], "{name} image(s)");
        let diff = max_diff(&lp, &want.logprobs);
        // Bit for bit: the same ops in the same order as mlx-vlm, prefill split as it splits.
        // Qwen3.5's text model is mlx-lm's in rmx (its parity tests), and mlx-vlm's copy of it
        // computes the gated norm's SiLU and the DeltaNet conv in float32 where mlx-lm's does
        // not: within float32 rounding in f32, a couple of bf16 steps (at logprobs of 16-32)
        // in bf16, the same greedy tokens.
        let tolerance = match (family, quant) {
            ("qwen3_5", "f32") => 1e-4,
            ("qwen3_5", _) => 0.5,
            _ => 0.0,
        };
        assert!(
            diff <= tolerance,
            "{name}: first-step log-probabilities differ by {diff}"
        );
    }
    // The images matter: the two in the other order move the log-probabilities.
    let two = reference(&dir, "Compare them.", &imgs, &work.join("two.json"));
    let swapped = [imgs[1].clone(), imgs[0].clone()];
    // Their own prompt: images of other sizes take other runs (Mistral 3, Qwen3.5).
    let ids = reference(&dir, "Compare them.", &swapped, &work.join("swapped.json")).prompt_ids;
    let (_, lp) = rmx_tokens(model.as_ref(), &dir, &ids, &swapped);
    let moved = max_diff(&lp, &two.logprobs);
    assert!(
        moved > 1e-2,
        "swapping the images moved the log-probabilities by {moved} only"
    );
}
