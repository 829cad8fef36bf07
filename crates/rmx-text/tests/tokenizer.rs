//! `Tokenizer` against transformers on the npm tokenizer packages: the same ids for the same
//! text, the same text for the same ids, and what the config files say about special tokens.

mod common;

use rmx_text::tokenizer::Tokenizer;
use serde_json::{json, Value};

const TEXTS: [&str; 7] = [
    "Hello world",
    " leading space and  double  spaces\n\nnew paragraph\tTab",
    "Emoji 😀🦀👩‍👩‍👧 and CJK 你好世界 日本語 한국어 and Ünïcödé",
    "fn main() { println!(\"{}\", 1 + 2); } // code ...",
    "Rare glyphs 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⟨⟩ ꙮ",
    "<|im_start|>user\nspecial tokens in text<|im_end|>",
    "Hi</s> there<s>again<bos>  twice<|endoftext|>x",
];

fn load(package: &str) -> Tokenizer {
    Tokenizer::from_dir(common::tokenizer_dir(package))
        .unwrap_or_else(|err| panic!("{package}: {err}"))
}

#[test]
fn encode_and_decode_match_transformers() {
    let mut encodes = Vec::new();
    for package in common::TOKENIZERS {
        for text in TEXTS {
            for add_special_tokens in [false, true] {
                encodes.push((package, text, add_special_tokens));
            }
        }
    }
    let tokenizers: Vec<(&str, Tokenizer)> = common::TOKENIZERS
        .iter()
        .map(|package| (*package, load(package)))
        .collect();
    let tokenizer = |package: &str| -> &Tokenizer {
        &tokenizers
            .iter()
            .find(|(name, _)| *name == package)
            .expect("loaded above")
            .1
    };
    let mut ours = Vec::new();
    for (package, text, add_special_tokens) in &encodes {
        let ids = tokenizer(package)
            .encode(text, *add_special_tokens)
            .unwrap_or_else(|err| panic!("{package}: encode {text:?}: {err}"));
        ours.push(ids);
    }
    // Decode what we encoded with specials, both skipping them and not.
    let decodes: Vec<(usize, bool)> = (0..encodes.len())
        .filter(|i| encodes[*i].2)
        .flat_map(|i| [(i, true), (i, false)])
        .collect();
    let request = json!({
        "encodes": encodes.iter().map(|(package, text, add)| json!({
            "dir": common::tokenizer_dir(package), "text": text, "add_special_tokens": add,
        })).collect::<Vec<_>>(),
        "decodes": decodes.iter().map(|(i, skip)| json!({
            "dir": common::tokenizer_dir(encodes[*i].0), "ids": ours[*i], "skip_special_tokens": skip,
        })).collect::<Vec<_>>(),
    });
    let answer = common::reference(&request);
    let want_ids: Vec<Vec<u32>> =
        serde_json::from_value(answer["encodes"].clone()).expect("encodes are id lists");
    let mut failures = Vec::new();
    for ((package, text, add), (got, want)) in encodes.iter().zip(ours.iter().zip(&want_ids)) {
        if got != want {
            failures.push(format!(
                "{package} encode({text:?}, add_special_tokens={add}):\n rmx {got:?}\n hf  {want:?}"
            ));
        }
    }
    let want_texts = answer["decodes"].as_array().expect("decodes is a list");
    for ((i, skip), want) in decodes.iter().zip(want_texts) {
        let package = encodes[*i].0;
        let got = tokenizer(package)
            .decode(&ours[*i], *skip)
            .unwrap_or_else(|err| panic!("{package}: decode: {err}"));
        if Some(got.as_str()) != want.as_str() {
            failures.push(format!(
                "{package} decode(skip_special_tokens={skip}):\n rmx {got:?}\n hf  {want}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn special_tokens_and_stop_ids_come_from_the_config() {
    let llama3 = load("llama3_1");
    assert_eq!(llama3.bos_token(), Some("<|begin_of_text|>"));
    assert_eq!(llama3.eos_token(), Some("<|eot_id|>"));
    let eot = llama3
        .token_to_id("<|eot_id|>")
        .expect("llama 3 has <|eot_id|>");
    assert!(llama3.is_eos(eot));
    assert!(llama3.is_special(eot));
    assert_eq!(
        llama3.bos_token_id(),
        llama3.token_to_id("<|begin_of_text|>")
    );
    assert_eq!(llama3.vocab_size(), 128_256);
    assert!(llama3.chat_template().is_some());

    // AddedToken dicts in tokenizer_config.json.
    let deepseek = load("deepseek_v3");
    assert_eq!(deepseek.bos_token(), Some("<｜begin▁of▁sentence｜>"));
    assert_eq!(deepseek.eos_token(), Some("<｜end▁of▁sentence｜>"));
    assert_eq!(deepseek.add_bos_token(), Some(true));

    let qwen3 = load("qwen3");
    assert_eq!(qwen3.bos_token(), None);
    let im_end = qwen3
        .token_to_id("<|im_end|>")
        .expect("qwen has <|im_end|>");
    assert_eq!(
        qwen3.eos_token_ids().iter().copied().collect::<Vec<_>>(),
        [im_end]
    );
    assert!(!qwen3.is_special(qwen3.token_to_id("Hello").expect("a plain token")));

    let gemma3 = load("gemma3");
    assert_eq!(gemma3.special_token("boi_token"), Some("<start_of_image>"));

    let llama2 = load("llama2");
    assert_eq!(llama2.id_to_token(1).as_deref(), Some("<s>"));
    assert!(llama2.chat_template().is_none());
}

#[test]
fn generation_config_and_template_files_extend_the_config() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = std::env::temp_dir().join(format!("rmx-text-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("chat_templates"))?;
    let source = common::tokenizer_dir("llama3_1");
    std::fs::copy(source.join("tokenizer.json"), dir.join("tokenizer.json"))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(
        source.join("tokenizer_config.json"),
    )?)?;
    config["chat_template"] = json!([
        {"name": "default", "template": "from config"},
        {"name": "tool_use", "template": "tools from config"},
    ]);
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string())?;
    std::fs::write(
        dir.join("generation_config.json"),
        r#"{"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]}"#,
    )?;
    std::fs::write(dir.join("chat_templates/rag.jinja"), "rag file")?;

    let tokenizer = Tokenizer::from_dir(&dir)?;
    assert_eq!(tokenizer.chat_template(), Some("from config"));
    assert_eq!(
        tokenizer.named_chat_template("tool_use"),
        Some("tools from config")
    );
    assert_eq!(tokenizer.named_chat_template("rag"), Some("rag file"));
    let eos: Vec<u32> = tokenizer.eos_token_ids().iter().copied().collect();
    assert_eq!(eos, [128001, 128008, 128009]);

    std::fs::write(dir.join("chat_template.jinja"), "from file")?;
    let tokenizer = Tokenizer::from_dir(&dir)?;
    assert_eq!(tokenizer.chat_template(), Some("from file"));

    std::fs::write(
        dir.join("generation_config.json"),
        r#"{"eos_token_id": "oops"}"#,
    )?;
    let err = Tokenizer::from_dir(&dir).expect_err("a string eos id is refused");
    assert!(err.to_string().contains("generation_config.json"), "{err}");
    std::fs::remove_dir_all(&dir)?;

    let missing = Tokenizer::from_dir(std::env::temp_dir().join("rmx-no-such-model"));
    assert!(missing
        .expect_err("no tokenizer.json")
        .to_string()
        .contains("tokenizer.json"));
    Ok(())
}
