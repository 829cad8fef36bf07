//! Tiny random-weight models written by mlx-lm itself, and mlx-lm's outputs on them, through
//! `py/tiny_models.py` run with the reference Python ([`crate::python`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::py_worker::Call;

pub fn script() -> PathBuf {
    crate::py("tiny_models.py")
}

/// A folder under target/test-models for a model `script` generates, keyed by the script's
/// content, so a changed generator makes new models: `<prefix><hash>/<name>`.
pub(crate) fn generated_dir(script: &Path, prefix: &str, name: &str) -> PathBuf {
    let src = std::fs::read(script).expect("read the model generator");
    let hash = src.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    });
    crate::target_dir().join(format!("test-models/{prefix}{hash:016x}/{name}"))
}

/// Where [`model`] keeps a family's model in form `quant`.
fn model_dir(family: &str, quant: &str) -> PathBuf {
    generated_dir(&script(), "", &format!("{family}-{quant}"))
}

/// Tests run in parallel threads, and the generator writes through one temp dir per model: one
/// lock per model, so different models are made side by side and one is made once.
pub(crate) fn building(dir: &Path) -> Arc<Mutex<()>> {
    static BUILDING: Mutex<BTreeMap<PathBuf, Arc<Mutex<()>>>> = Mutex::new(BTreeMap::new());
    BUILDING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(dir.to_path_buf())
        .or_default()
        .clone()
}

/// A tiny random-weight model of a family tiny_models.py knows, in MLX format (`quant`: bf16,
/// f32, 4bit, ...), made on first use.
pub fn model(family: &str, quant: &str) -> PathBuf {
    let dir = model_dir(family, quant);
    let lock = building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("config.json").exists() {
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        run(&[
            "make",
            "--family",
            family,
            "--quant",
            quant,
            "--out",
            dir.to_str().unwrap(),
        ]);
    }
    dir
}

/// A tiny random-weight Qwen3 (real Qwen3 tokenizer and chat template), as [`model`] makes it.
pub fn tiny_qwen3() -> PathBuf {
    model("qwen3", "bf16")
}

/// The tiny random-weight Gemma 3 vision-language model (`py/tiny_vlm.py`, mlx-vlm's classes;
/// `quant`: f32 or bf16), made on first use into `test-models/vlm-<generator hash>/gemma3-<quant>`,
/// the folder the crates' own image tests use.
pub fn tiny_vlm(quant: &str) -> PathBuf {
    tiny_vlm_of("gemma3", quant)
}

/// [`tiny_vlm`] of another family tiny_vlm.py makes (`gemma3`, `mistral3`).
pub fn tiny_vlm_of(family: &str, quant: &str) -> PathBuf {
    let script = crate::py("tiny_vlm.py");
    let dir = generated_dir(&script, "vlm-", &format!("{family}-{quant}"));
    let lock = building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("config.json").exists() {
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        // The script writes beside the folder and renames it into place.
        let status = std::process::Command::new(crate::python())
            .arg(&script)
            .args(["make", "--family", family, "--quant", quant, "--out"])
            .arg(&dir)
            .status()
            .expect("run tiny_vlm.py");
        assert!(
            status.success(),
            "tiny_vlm.py make --family {family} --quant {quant} failed"
        );
    }
    dir
}

/// Runs tiny_models.py with `args` (on one of this process's workers); its stdout.
pub fn run(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    Call::start(&script(), &args).expect_ok()
}

pub struct Reference {
    pub prompt_ids: Vec<u32>,
    pub tokens: Vec<u32>,
    /// Step 0 and step 1 log-probabilities, `vocab` each.
    pub logprobs: Vec<Vec<f32>>,
}

/// mlx-lm's greedy outputs for some prompts (`true`: through the chat template), computed on a
/// reference worker ([`crate::py_worker`]) in the background: loading a model and generating
/// take seconds, and the caller can run its own side meanwhile. [`PendingReferences::wait`]
/// collects.
pub fn spawn_references(
    model: &Path,
    prompts: &[(&str, bool)],
    max_tokens: usize,
) -> PendingReferences {
    start_references(model, prompts, max_tokens, &[])
}

/// [`model`] and [`spawn_references`] as one command of a reference worker: it writes the model
/// if it is not there yet, and returns once the model is on disk, while mlx-lm goes on
/// computing.
pub fn model_with_references(
    family: &str,
    quant: &str,
    prompts: &[(&str, bool)],
    max_tokens: usize,
) -> (PathBuf, PendingReferences) {
    model_with_references_and(family, quant, prompts, max_tokens, &[])
}

/// [`model_with_references`] with more arguments for the reference (`--kv-bits 8`, ...).
pub fn model_with_references_and(
    family: &str,
    quant: &str,
    prompts: &[(&str, bool)],
    max_tokens: usize,
    extra: &[&str],
) -> (PathBuf, PendingReferences) {
    let dir = model_dir(family, quant);
    let lock = building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    let args: Vec<&str> = ["--make", family, quant]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let mut pending = start_references(&dir, prompts, max_tokens, &args);
    match pending.call.next_signal() {
        Ok(line) if line == "ready" => {}
        Ok(line) => panic!(
            "tiny_models.py {:?}: said {line:?}, not ready",
            pending.args
        ),
        Err(reply) => panic!(
            "tiny_models.py {:?} did not make {family}-{quant}:\n{}",
            pending.args, reply.error
        ),
    }
    (dir, pending)
}

fn start_references(
    model: &Path,
    prompts: &[(&str, bool)],
    max_tokens: usize,
    extra: &[&str],
) -> PendingReferences {
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.json");
    let reqs: Vec<_> = prompts
        .iter()
        .map(|(p, chat)| serde_json::json!({"prompt": p, "chat": chat}))
        .collect();
    std::fs::write(&requests, serde_json::to_vec(&reqs).unwrap()).unwrap();
    let mut args: Vec<String> = vec![
        "reference".into(),
        "--model".into(),
        model.to_str().unwrap().into(),
        "--requests".into(),
        requests.to_str().unwrap().into(),
        "--max-tokens".into(),
        max_tokens.to_string(),
        "--out".into(),
        dir.path().join("out.json").to_str().unwrap().into(),
        "--logits".into(),
        dir.path().join("logits.f32").to_str().unwrap().into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let call = Call::start(&script(), &args);
    PendingReferences { call, dir, args }
}

pub struct PendingReferences {
    call: Call,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl PendingReferences {
    pub fn wait(self) -> Vec<Reference> {
        self.call.expect_ok();
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(self.dir.path().join("out.json")).unwrap(),
        )
        .unwrap();
        let raw = std::fs::read(self.dir.path().join("logits.f32")).unwrap();
        let floats: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let answers = v.as_array().unwrap();
        // two steps of logits per answer
        let vocab = floats.len() / (2 * answers.len());
        answers
            .iter()
            .zip(floats.chunks_exact(2 * vocab))
            .map(|(a, lp)| {
                let ids = |k: &str| -> Vec<u32> {
                    a[k].as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_u64().unwrap() as u32)
                        .collect()
                };
                Reference {
                    prompt_ids: ids("prompt_ids"),
                    tokens: ids("tokens"),
                    logprobs: vec![lp[..vocab].to_vec(), lp[vocab..].to_vec()],
                }
            })
            .collect()
    }
}

/// A tiny Qwen3.5 as the Hub ships it, in transformers' layout with a random
/// multi-token-prediction head (`py/mtp_model.py`), made on first use from [`model`]'s
/// `family` (qwen3_5, qwen3_5_moe, qwen3_next) in `quant` (f32 or bf16).
pub fn mtp_model(family: &str, quant: &str) -> PathBuf {
    let script = crate::py("mtp_model.py");
    let src = model(family, quant);
    let dir = generated_dir(&script, "mtp-", &format!("{family}-{quant}"));
    let lock = building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("config.json").exists() {
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        mtp_script(&[
            "make",
            "--src",
            src.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ]);
    }
    dir
}

/// A tiny Qwen3.5 (f32) scripted to write `text` after a prompt that ends in "assistant"
/// (tiny_models.py `--script`), in transformers' layout with a head that guesses the script's
/// next-but-one token (py/mtp_model.py `--head successor`): its guesses are right along the
/// script.
pub fn mtp_scripted(name: &str, text: &str) -> PathBuf {
    let script = crate::py("mtp_model.py");
    let src = generated_dir(&script, "mtp-", &format!("{name}-target"));
    let dir = generated_dir(&script, "mtp-", name);
    let lock = building(&dir);
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("config.json").exists() {
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        let (src_s, dir_s) = (src.to_str().unwrap(), dir.to_str().unwrap());
        run(&[
            "make", "--family", "qwen3_5", "--quant", "f32", "--script", text, "--out", src_s,
        ]);
        mtp_script(&[
            "make",
            "--src",
            src_s,
            "--out",
            dir_s,
            "--head",
            "successor",
        ]);
    }
    dir
}

/// The head's greedy guesses on a prompt, from py/mtp_model.py's reference.
#[derive(Debug)]
pub struct MtpReference {
    /// The model's own greedy token after the prompt.
    pub next: u32,
    /// At each prompt position `i`: the head's guess for the token at `i + 2`.
    pub rows: Vec<u32>,
    /// Guesses after the last row's, each from the head's previous output and guess.
    pub chain: Vec<u32>,
}

pub fn mtp_reference(model: &Path, prompt_ids: &[u32], chain: usize) -> MtpReference {
    let ids: Vec<String> = prompt_ids.iter().map(u32::to_string).collect();
    let out = mtp_script(&[
        "reference",
        "--model",
        model.to_str().unwrap(),
        "--prompt-ids",
        &ids.join(","),
        "--chain",
        &chain.to_string(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).expect("mtp_model.py reference prints JSON");
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap_or_else(|| panic!("{k} in {v}"))
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    MtpReference {
        next: v["next"].as_u64().unwrap() as u32,
        rows: ids("rows"),
        chain: ids("chain"),
    }
}

fn mtp_script(args: &[&str]) -> String {
    let out = std::process::Command::new(crate::python())
        .arg(crate::py("mtp_model.py"))
        .args(args)
        .output()
        .expect("run mtp_model.py");
    assert!(
        out.status.success(),
        "mtp_model.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `mlx_lm.convert` of `src` into `out` (quantized to `bits` when given), by py/mtp_model.py.
pub fn mlx_lm_convert(src: &Path, out: &Path, bits: Option<i32>) {
    let mut args = vec![
        "convert".to_string(),
        "--src".into(),
        src.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(b) = bits {
        args.extend(["--bits".into(), b.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    mtp_script(&args);
}

/// Two MLX folders' tensors compared (py/mtp_model.py `compare`): `only_mlx_lm`, `only_rmx`,
/// `differ` (names), `same_quantization`, `tensors`.
pub fn compare_mlx_folders(mlx_lm: &Path, rmx: &Path) -> serde_json::Value {
    let out = mtp_script(&[
        "compare",
        "--mlx-lm",
        mlx_lm.to_str().unwrap(),
        "--rmx",
        rmx.to_str().unwrap(),
    ]);
    serde_json::from_str(out.trim()).expect("mtp_model.py compare prints JSON")
}
