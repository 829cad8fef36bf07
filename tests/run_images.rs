//! Issue #27: images from the command line. `rmx run --image FILE` and the chat's `/image FILE`
//! send the files to the real daemon, which reads them into the tiny Gemma 3 vision-language
//! model (py/tiny_vlm.py); the daemon's refusals (a text-only model, a file that is no image)
//! reach the user as errors, and a file the CLI cannot read fails before anything is sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rexpect::session::spawn_command;
use rmx_tests::home::TestHome;

/// The image placeholders the tiny VLM puts in the prompt per image (tiny_vlm.py MM_TOKENS).
const PER_IMAGE: u64 = 16;

/// A small PNG written by the reference Python's Pillow: the test makes no image itself, so
/// nothing in it can agree with the daemon's decoder by sharing its code.
fn png(dir: &Path, name: &str, rgb: (u8, u8, u8)) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new(rmx_tests::python())
        .args([
            "-c",
            "import sys, PIL.Image; PIL.Image.new('RGB', (40, 30), \
             tuple(int(c) for c in sys.argv[2:5])).save(sys.argv[1])",
        ])
        .arg(&path)
        .args([rgb.0.to_string(), rgb.1.to_string(), rgb.2.to_string()])
        .status()
        .expect("run the reference Python");
    assert!(status.success(), "writing {name} with Pillow failed");
    path
}

fn vlm() -> String {
    rmx_tests::models::tiny_vlm("f32").display().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `rmx -v`'s prompt tokens: "prompt: N tokens, ...".
fn prompt_tokens(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("prompt: "))
        .unwrap_or_else(|| panic!("no stats in {stderr}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// The images reach the model: each adds its placeholders to the prompt, and the answer comes.
#[test]
fn run_with_images_answers() {
    let home = TestHome::new();
    let (model, dir) = (vlm(), home.home().to_path_buf());
    let red = png(&dir, "red.png", (200, 30, 30));
    let blue = png(&dir, "blue.png", (30, 30, 200));
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &model, "What is in this picture?"];
        args.extend_from_slice(&["--max-tokens", "4", "-v"]);
        args.extend_from_slice(extra);
        let out = home.run(&args);
        assert!(
            out.status.success(),
            "rmx run {extra:?} failed: {}\ndaemon log:\n{}",
            stderr(&out),
            home.log()
        );
        let answer = String::from_utf8_lossy(&out.stdout).into_owned();
        (answer, prompt_tokens(&stderr(&out)))
    };
    let (_, text_only) = run(&[]);
    let (answer, one) = run(&["--image", red.to_str().unwrap()]);
    assert!(!answer.trim().is_empty(), "no answer to the image");
    assert!(
        one >= text_only + PER_IMAGE,
        "one image: {one} prompt tokens, without: {text_only}"
    );
    let (_, two) = run(&[
        "--image",
        red.to_str().unwrap(),
        "--image",
        blue.to_str().unwrap(),
    ]);
    assert!(
        two >= one + PER_IMAGE,
        "two images: {two} prompt tokens, one: {one}"
    );

    // A file that is no image is the daemon's to refuse, and its words reach the user.
    let notes = dir.join("notes.png");
    std::fs::write(&notes, "not an image").unwrap();
    let out = home.run(&["run", &model, "Hi", "--image", notes.to_str().unwrap()]);
    assert!(!out.status.success(), "a text file was taken as an image");
    assert!(
        stderr(&out).contains("image 1 of the request"),
        "{}",
        stderr(&out)
    );
}

/// A text-only model refuses images with the daemon's message, naming the model.
#[test]
fn an_image_for_a_text_only_model_is_refused() {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let red = png(home.home(), "red.png", (200, 30, 30));
    let out = home.run(&["run", &model, "Hi", "--image", red.to_str().unwrap()]);
    assert!(!out.status.success(), "a text-only model took an image");
    let err = stderr(&out);
    assert!(
        err.contains("takes no images") && err.contains(&model),
        "{err}"
    );
}

/// What the CLI can tell by itself fails before a daemon starts: a missing file, a folder, too
/// many images, images with a raw prompt.
#[test]
fn bad_image_arguments_fail_before_anything_is_sent() {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let missing = home.home().join("missing.png");
    let missing = missing.to_str().unwrap();
    let folder = home.home().to_str().unwrap();
    let many: Vec<&str> = ["--image", missing].repeat(9);
    let raw = ["--raw", "--image", missing];
    for (extra, says) in [
        (&["--image", missing][..], "no image file"),
        (&["--image", folder][..], "is a folder"),
        (&many[..], "9 images, over the limit of 8"),
        (&raw[..], "cannot be used with"),
    ] {
        let mut args = vec!["run", &model, "Hi"];
        args.extend_from_slice(extra);
        let out = home.run(&args);
        assert!(!out.status.success(), "{extra:?} was accepted");
        assert!(stderr(&out).contains(says), "{extra:?}: {}", stderr(&out));
    }
    let out = home.run(&["run", &model, "Hi", "--image", missing]);
    assert!(stderr(&out).contains(missing), "{}", stderr(&out));
    assert!(home.daemon_pid().is_none(), "a daemon was started");
}

/// Types a line and waits for its echo (as chat_repl.rs does).
fn line(p: &mut rexpect::session::PtySession, text: &str) -> Result<(), rexpect::error::Error> {
    p.send_line(text)?;
    p.exp_string(text)?;
    Ok(())
}

/// `/image FILE` attaches to the next message only; `/image` lists; a bad path is said at once.
#[test]
fn chat_attaches_images_to_the_next_message() -> Result<(), rexpect::error::Error> {
    let home = TestHome::new();
    let red = png(home.home(), "red.png", (200, 30, 30));
    let mut cmd = home.cmd(&["chat", &vlm(), "--max-tokens", "4", "-v"]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string(">>> ")?;
    line(&mut p, "/image")?;
    p.exp_string("No images attached.")?;
    line(&mut p, "/image nowhere.png")?;
    p.exp_string("no image file nowhere.png")?;
    line(&mut p, &format!("/image {}", red.display()))?;
    p.exp_string("Attached to your next message:")?;
    p.exp_string("(1 image)")?;
    line(&mut p, "What is this?")?;
    let (_, stats) = p.exp_regex(r"prompt: \d+ tokens")?;
    let with_image: u64 = stats[8..].split(' ').next().unwrap().parse().unwrap();
    p.exp_string(">>> ")?;
    line(&mut p, "/image")?;
    p.exp_string("No images attached.")?;
    // The next turn resends the conversation, the image in its first message included.
    line(&mut p, "And now?")?;
    let (_, stats) = p.exp_regex(r"prompt: \d+ tokens")?;
    let next: u64 = stats[8..].split(' ').next().unwrap().parse().unwrap();
    assert!(next > with_image, "{next} <= {with_image}");
    p.exp_string(">>> ")?;
    line(&mut p, "/clear")?;
    p.exp_string("Conversation cleared.")?;
    line(&mut p, "What is this?")?;
    let (_, stats) = p.exp_regex(r"prompt: \d+ tokens")?;
    let without: u64 = stats[8..].split(' ').next().unwrap().parse().unwrap();
    assert!(
        with_image >= without + PER_IMAGE,
        "with the image {with_image} prompt tokens, without {without}"
    );
    p.exp_string(">>> ")?;
    // The daemon counts the images of the whole conversation: the ninth is refused here.
    for _ in 0..8 {
        line(&mut p, &format!("/image {}", red.display()))?;
        p.exp_string("Attached to your next message:")?;
    }
    line(&mut p, &format!("/image {}", red.display()))?;
    p.exp_string("the conversation holds 8 images")?;
    line(&mut p, "/image clear")?;
    p.exp_string("Dropped 8 images.")?;
    p.send_control('d')?;
    p.exp_eof()?;

    // `rmx run` without a prompt on a terminal: the chat's first message carries the images.
    let mut cmd = home.cmd(&["run", &vlm(), "--image", red.to_str().unwrap()]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string("Attached to your next message:")?;
    p.exp_string(">>> ")?;
    p.send_control('d')?;
    p.exp_eof()?;

    // A text-only model's refusal is said, and the message and its image are not kept.
    let qwen = rmx_tests::models::tiny_qwen3().display().to_string();
    let mut cmd = home.cmd(&["chat", &qwen, "--max-tokens", "4"]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string(">>> ")?;
    line(&mut p, &format!("/image {}", red.display()))?;
    p.exp_string("(1 image)")?;
    line(&mut p, "What is this?")?;
    p.exp_string("takes no images")?;
    p.exp_string("not kept")?;
    p.exp_string(">>> ")?;
    line(&mut p, "/image")?;
    p.exp_string("No images attached.")?;
    p.send_control('d')?;
    p.exp_eof()?;
    Ok(())
}

/// `rmx bench --image-cost`: one image's processor and vision-tower times, in the table's JSON;
/// a text-only model and a bad size are refused with what to do.
#[test]
fn bench_image_cost_times_the_processor_and_the_tower() {
    let home = TestHome::new();
    let model = vlm();
    let out = home.run(&[
        "bench",
        &model,
        "--image-cost",
        "96x64",
        "--rounds",
        "2",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["image_cost"];
    assert_eq!(
        (c["width"].as_u64(), c["height"].as_u64()),
        (Some(96), Some(64))
    );
    assert_eq!(c["placeholders"].as_u64(), Some(PER_IMAGE));
    for key in ["preprocess_ms", "encode_ms"] {
        let ms = c[key]["median"].as_f64().unwrap();
        assert!(ms > 0.0, "{key}: {c}");
    }
    let text = rmx_tests::models::tiny_qwen3().display().to_string();
    let out = home.run(&["bench", &text, "--image-cost"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("takes no images"), "{}", stderr(&out));
    let out = home.run(&["bench", &model, "--image-cost", "big"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("WxH"), "{}", stderr(&out));
}
