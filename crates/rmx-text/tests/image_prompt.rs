//! Gemma 3's prompt with images as mlx-vlm's processor makes it (issue #27): the real chat
//! template renders one `<start_of_image>` per image part, and widening each into its run
//! before tokenizing gives the processor's ids (without added special tokens, as mlx-vlm
//! tokenizes when the template writes the BOS).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use rmx_text::image_prompt::ImagePrompt;
use rmx_text::template::{ChatTemplate, RenderInput};
use rmx_text::tokenizer::Tokenizer;
use serde_json::{json, Value};

fn processor_ids(per_image: usize, images: usize, prompt: &str) -> Value {
    let python = std::env::var("RMX_TEST_PYTHON").expect("RMX_TEST_PYTHON (scripts/test-env.sh)");
    let out = std::env::temp_dir().join(format!(
        "rmx-image-prompt-{}-{per_image}-{images}.json",
        std::process::id()
    ));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/tiny_vlm.py");
    let status = Command::new(python)
        .arg(script)
        .args(["prompt-ids", "--per-image", &per_image.to_string()])
        .args(["--images", &images.to_string(), "--prompt", prompt, "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "tiny_vlm.py prompt-ids failed");
    let v = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let _ = std::fs::remove_file(out);
    v
}

#[test]
fn gemma3_images_widen_as_the_processor_does() {
    let dir = common::tokenizer_dir("gemma3");
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    let template = ChatTemplate::new(tokenizer.chat_template().unwrap()).unwrap();
    let per_image = 16;
    let prompt = ImagePrompt::Gemma3 {
        begin: "<start_of_image>".into(),
        placeholder: "<image_soft_token>".into(),
        end: "<end_of_image>".into(),
        per_image,
    };
    for (images, text) in [(1, "What is in this picture?"), (2, "Compare them.")] {
        let want = processor_ids(per_image, images, text);
        let mut content: Vec<Value> = (0..images).map(|_| json!({"type": "image"})).collect();
        content.push(json!({"type": "text", "text": text}));
        let messages = json!([{"role": "user", "content": content}]);
        let mut input = RenderInput::new(&messages).with_special_tokens(tokenizer.special_tokens());
        input.add_generation_prompt = true;
        let rendered = template.render(&input).unwrap();
        assert_eq!(
            rendered,
            want["rendered"].as_str().unwrap(),
            "{images} image(s)"
        );
        let ids = tokenizer
            .encode(
                &prompt.expand(&rendered, &vec![(32, 32); images]).unwrap(),
                false,
            )
            .unwrap();
        let want: Vec<u32> = want["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(ids, want, "{images} image(s)");
        let placeholders = ids.iter().filter(|&&t| t == 262144).count();
        assert_eq!(placeholders, images * per_image);
    }
}
