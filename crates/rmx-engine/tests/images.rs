//! A chat with images through the engine gives mlx-vlm's greedy tokens (issue #27): the tiny
//! Gemma 3, Gemma 4, Mistral Small 3.1 and Qwen3.5 vision-language models (tests/py/tiny_vlm.py;
//! Mistral's and Qwen's images keep their own sizes, so two images differ in tokens), rmx's
//! own prompt (the template's image
//! markers widened: Engine::chat_tokens_with_images) and pixels (ImageInput::prepare), one and
//! two images, f32 token for token; fed to mlx-vlm as they are. A prompt repeated with the same image reads it
//! from the prefix cache, with another image it does not; bad image requests fail with what to
//! do.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use rmx_engine::{ChatPrompt, Engine, Event, GenerateRequest};
use rmx_vision::PixelValues;
use serde_json::{json, Value};

const MAX_TOKENS: usize = 12;

fn tiny_vlm(args: &[String]) {
    let status = Command::new(rmx_tests::python())
        .arg(rmx_tests::py("tiny_vlm.py"))
        .args(args)
        .status()
        .expect("run tiny_vlm.py");
    assert!(status.success(), "tiny_vlm.py {args:?} failed");
}

fn images(dir: &Path) -> Vec<PathBuf> {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    rmx_tests::images::two_pngs(dir, 777)
}

/// rmx's prompt ids for a user turn of the images (their pixel values) then `text`
/// (Engine::chat_tokens_with_images).
fn prompt(engine: &Engine, images: &[PixelValues], text: &str) -> Vec<u32> {
    let mut content: Vec<Value> = images.iter().map(|_| json!({"type": "image"})).collect();
    content.push(json!({"type": "text", "text": text}));
    let chat = ChatPrompt {
        messages: json!([{"role": "user", "content": content}]),
        add_generation_prompt: true,
        ..Default::default()
    };
    let input = engine
        .image_input()
        .unwrap()
        .expect("the model takes images");
    let ids = engine
        .chat_tokens_with_images(&chat, &input, images)
        .unwrap();
    let placeholders: usize = images
        .iter()
        .map(|p| input.prompt.placeholders(p.height, p.width))
        .sum();
    let image_token = engine
        .tokenizer()
        .token_to_id(match &input.prompt {
            rmx_text::image_prompt::ImagePrompt::Gemma3 { placeholder, .. } => placeholder,
            rmx_text::image_prompt::ImagePrompt::Pixtral { image, .. } => image,
            rmx_text::image_prompt::ImagePrompt::Qwen { pad, .. } => pad,
            rmx_text::image_prompt::ImagePrompt::Gemma4 { image, .. } => image,
        })
        .unwrap();
    assert_eq!(
        ids.iter().filter(|&&t| t == image_token).count(),
        placeholders
    );
    ids
}

/// The images' tensors (ImageInput::prepare).
fn pixels(engine: &Engine, images: &[PathBuf]) -> Vec<PixelValues> {
    let input = engine.image_input().unwrap().unwrap();
    images
        .iter()
        .map(|p| input.prepare(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

fn run(engine: &Engine, ids: &[u32], images: Vec<PixelValues>) -> Result<Vec<u32>, String> {
    let mut req = GenerateRequest::new(ids.to_vec(), MAX_TOKENS);
    req.ignore_eos = true;
    req.images = images;
    let mut rx = engine.generate(req).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => out.push(id),
            Event::Done { .. } => return Ok(out),
            Event::Error(e) => return Err(e),
        }
    }
    panic!("stream ended without Done");
}

/// mlx-vlm's run of a user turn of `images` then `text` (tiny_vlm.py reference), its JSON
/// written to `out` ({"prompt_ids", "tokens"}): on the prompt `ids` given, else on its
/// processor's own.
fn mlx_vlm(
    dir: &Path,
    out: &Path,
    ids: Option<&[u32]>,
    text: &str,
    images: &[PathBuf],
    max_tokens: usize,
) -> Value {
    let mut args: Vec<String> = vec![
        "reference".into(),
        "--model".into(),
        dir.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--max-tokens".into(),
        max_tokens.to_string(),
        "--prompt".into(),
        text.into(),
    ];
    if let Some(ids) = ids {
        let ids_file = out.with_extension("ids.json");
        std::fs::write(&ids_file, serde_json::to_string(ids).unwrap()).unwrap();
        args.extend(["--prompt-ids".into(), ids_file.display().to_string()]);
    }
    args.extend(images.iter().map(|p| p.display().to_string()));
    tiny_vlm(&args);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

/// mlx-vlm's greedy tokens on rmx's prompt `ids`.
fn reference(
    dir: &Path,
    work: &Path,
    name: &str,
    ids: &[u32],
    text: &str,
    images: &[PathBuf],
) -> Vec<u32> {
    let out = work.join(format!("{name}.json"));
    let v = mlx_vlm(dir, &out, Some(ids), text, images, MAX_TOKENS);
    ids_of(&v["tokens"])[..MAX_TOKENS].to_vec()
}

fn check_family(family: &str) {
    let dir = rmx_tests::models::tiny_vlm_of(family, "f32");
    let work = rmx_tests::target_tmp(&format!("engine-images-{family}"));
    let imgs = images(&work);
    let engine = Engine::load(&dir).unwrap();

    let px_one = pixels(&engine, &imgs[..1]);
    let one = prompt(&engine, &px_one, "What is in this picture?");
    let got_one = run(&engine, &one, px_one).unwrap();
    let want_one = reference(
        &dir,
        &work,
        "one",
        &one,
        "What is in this picture?",
        &imgs[..1],
    );
    assert_eq!(got_one, want_one, "{family}: one image");

    let px_two = pixels(&engine, &imgs);
    let two = prompt(&engine, &px_two, "Compare them.");
    let got_two = run(&engine, &two, px_two).unwrap();
    let want_two = reference(&dir, &work, "two", &two, "Compare them.", &imgs);
    assert_eq!(got_two, want_two, "{family}: two images");
    if family != "gemma3" {
        // The prompt is the processor's too (Mistral 3: each image its own rows of [IMG],
        // [IMG_BREAK] between them, [IMG_END]; Qwen3.5: a pad per merged patch; Gemma 4:
        // <|image>, a placeholder per soft token, <image|>), but for the BOS mlx-vlm adds
        // before the template's (Mistral's, Gemma 4's: its image path tokenizes with special
        // tokens whatever it is told).
        let mut theirs = processor_ids(&dir, &work, "Compare them.", &imgs);
        if theirs.len() > 1 && theirs[0] == theirs[1] && theirs[1] == two[0] && two[1] != two[0] {
            theirs.remove(0);
        }
        assert_eq!(two, theirs, "{family}: the prompt with two images");
    }

    // The first prompt with the other image, then the first again: each answer is its own
    // image's (an answer from the prefix cache would repeat the first). Where images keep
    // their sizes, the other image's prompt is its own.
    let px_other = pixels(&engine, &imgs[1..]);
    let other_ids = prompt(&engine, &px_other, "What is in this picture?");
    let other = run(&engine, &other_ids, px_other).unwrap();
    assert_ne!(other, got_one, "{family}: another image, the same answer");
    assert_eq!(
        run(&engine, &one, pixels(&engine, &imgs[..1])).unwrap(),
        want_one
    );

    // Placeholders that do not match the images.
    let err = run(&engine, &two, pixels(&engine, &imgs[..1])).unwrap_err();
    assert!(err.contains("image placeholder tokens"), "{err}");
}

/// The prompt ids mlx-vlm's processor makes of a user turn of `images` then `text`.
fn processor_ids(dir: &Path, work: &Path, text: &str, images: &[PathBuf]) -> Vec<u32> {
    let v = mlx_vlm(dir, &work.join("processor.json"), None, text, images, 1);
    ids_of(&v["prompt_ids"])
}

#[test]
fn chat_with_images_gives_mlx_vlm_tokens() {
    check_family("gemma3");
}

/// Gemma 4 (E2B's layout: sliding window 8 under 16-token images, KV sharing, per-layer
/// inputs): each image's placeholders attend to one another both ways.
/// A long prompt whose first prefill chunk would end inside the image is read with the image's
/// run whole in one chunk: mlx-vlm's tokens (it reads the whole prompt in one forward).
#[test]
fn gemma4_chat_with_images_gives_mlx_vlm_tokens() {
    check_family("gemma4");
    let dir = rmx_tests::models::tiny_vlm_of("gemma4", "f32");
    let work = rmx_tests::target_tmp("engine-images-gemma4-chunks");
    let imgs = images(&work);
    let engine = Engine::load(&dir).unwrap();
    let px = pixels(&engine, &imgs[..1]);
    let input = engine.image_input().unwrap().unwrap();
    let image_token = engine
        .tokenizer()
        .token_to_id(input.prompt.marker())
        .unwrap();
    let chunk = rmx_engine::PREFILL_CHUNK;
    let ids_for = |words: usize| {
        let content = json!([
            {"type": "text", "text": "a ".repeat(words)},
            {"type": "image"},
            {"type": "text", "text": "What is in this picture?"},
        ]);
        let chat = ChatPrompt {
            messages: json!([{"role": "user", "content": content}]),
            add_generation_prompt: true,
            ..Default::default()
        };
        let ids = engine.chat_tokens_with_images(&chat, &input, &px).unwrap();
        let first = ids.iter().position(|&t| t == image_token).unwrap();
        (ids, first)
    };
    // The image's run starts a few tokens before the chunk's end.
    let (_, first) = ids_for(chunk);
    let (ids, first) = ids_for(chunk + chunk - 4 - first);
    let last = ids.iter().rposition(|&t| t == image_token).unwrap();
    assert!(
        first < chunk && chunk <= last,
        "the image spans {first}..={last}"
    );
    let got = run(&engine, &ids, px).unwrap();
    let want = reference(
        &dir,
        &work,
        "long",
        &ids,
        "What is in this picture?",
        &imgs[..1],
    );
    assert_eq!(
        got, want,
        "a long prompt with the image across the chunk's end"
    );
}

#[test]
fn mistral3_chat_with_images_gives_mlx_vlm_tokens() {
    check_family("mistral3");
}

/// Qwen3.5 (its tower, and each token's rope position on three axes, planned for the prompt):
/// mlx-vlm's tokens for one and two images. Its images move the positions after them: the same
/// prompt and image again reads its prefix (past the image) from the cache, planned again, and
/// answers the same; a next turn (the prompt, the answer, more text) reads the whole first turn
/// and answers as a fresh engine does.
#[test]
fn qwen3_5_chat_with_images_gives_mlx_vlm_tokens() {
    check_family("qwen3_5");
    let dir = rmx_tests::models::tiny_vlm_of("qwen3_5", "f32");
    let work = rmx_tests::target_tmp("engine-images-qwen3_5-cache");
    let imgs = images(&work);
    let engine = Engine::load(&dir).unwrap();
    let ids = prompt(&engine, &pixels(&engine, &imgs[..1]), "Once more.");
    let image_token = engine.tokenizer().token_to_id("<|image_pad|>").unwrap();
    let last = ids.iter().rposition(|&t| t == image_token).unwrap();
    let (cached, first) = cached_and_answer(&engine, &ids, pixels(&engine, &imgs[..1]));
    assert_eq!(cached, 0);
    let (cached, again) = cached_and_answer(&engine, &ids, pixels(&engine, &imgs[..1]));
    assert!(cached > last, "cached {cached}, the image ends at {last}");
    assert_eq!(again, first);
    // The next turn: positions after the image continue from the plan's delta in both runs.
    let mut next = ids.clone();
    next.extend(&first);
    next.extend(engine.raw_tokens(" And the colours?").unwrap());
    let fresh = Engine::load(&dir).unwrap();
    let (_, alone) = cached_and_answer(&fresh, &next, pixels(&fresh, &imgs[..1]));
    let (cached, reused) = cached_and_answer(&engine, &next, pixels(&engine, &imgs[..1]));
    assert!(
        cached >= ids.len(),
        "cached {cached} of the first turn's {}",
        ids.len()
    );
    assert_eq!(reused, alone);
}

#[test]
fn a_text_model_refuses_images() {
    let dir = rmx_tests::models::tiny_qwen3();
    let engine = Engine::load(&dir).unwrap();
    assert!(engine.image_input().unwrap().is_none());
    let ids = engine.raw_tokens("Describe this").unwrap();
    let img = PixelValues {
        height: 32,
        width: 32,
        data: vec![0.0; 3 * 32 * 32],
    };
    let err = run(&engine, &ids, vec![img]).unwrap_err();
    assert!(err.contains("takes no images"), "{err}");
}

/// The prompt's cached tokens and the answer, for `images`.
fn cached_and_answer(engine: &Engine, ids: &[u32], images: Vec<PixelValues>) -> (usize, Vec<u32>) {
    let mut req = GenerateRequest::new(ids.to_vec(), MAX_TOKENS);
    req.ignore_eos = true;
    req.images = images;
    let mut rx = engine.generate(req).unwrap();
    let mut out = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => out.push(id),
            Event::Done { usage, .. } => return (usage.cached_tokens, out),
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("stream ended without Done");
}

/// The prefix cache keys an image by its pixels: the same image again is read from the cache
/// (past its placeholders, same answer); another image shares only the text before it.
#[test]
fn the_prefix_cache_keys_images_by_their_pixels() {
    let dir = rmx_tests::models::tiny_vlm("f32");
    let work = rmx_tests::target_tmp("engine-image-prefix");
    let imgs = images(&work);
    let engine = Engine::load(&dir).unwrap();
    let ids = prompt(
        &engine,
        &pixels(&engine, &imgs[..1]),
        "What is in this picture?",
    );
    let image_token = *ids
        .iter()
        .max_by_key(|&&t| ids.iter().filter(|&&u| u == t).count())
        .unwrap();
    let first = ids.iter().position(|&t| t == image_token).unwrap();
    let last = ids.iter().rposition(|&t| t == image_token).unwrap();

    let (cached, answer) = cached_and_answer(&engine, &ids, pixels(&engine, &imgs[..1]));
    assert_eq!(cached, 0);
    let (cached, again) = cached_and_answer(&engine, &ids, pixels(&engine, &imgs[..1]));
    assert!(cached > last, "cached {cached}, the image ends at {last}");
    assert_eq!(again, answer);
    let (cached, other) = cached_and_answer(&engine, &ids, pixels(&engine, &imgs[1..]));
    assert!(
        cached <= first,
        "cached {cached}, the image starts at {first}"
    );
    assert_ne!(other, answer);
}
