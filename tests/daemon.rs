//! The client/daemon split end to end: the real `rmx` binary starting and reusing the real
//! daemon in a throwaway home, with a tiny random Qwen3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use rmx_tests::home::{alive, TestHome};

/// Requests over TCP name the tiny model by its folder, which they may under the model roots
/// only (the CLI, on the socket, may name any folder).
fn home() -> TestHome {
    let model = rmx_tests::models::tiny_qwen3();
    let root = model.parent().expect("a parent").display().to_string();
    TestHome::new().with_env("RMX_MODEL_ROOTS", &root)
}

fn model() -> String {
    rmx_tests::models::tiny_qwen3().display().to_string()
}

#[test]
fn first_run_starts_the_daemon_and_the_next_command_reuses_it() {
    let (home, model) = (home(), model());
    assert!(home.daemon_pid().is_none());
    let answer = home.ok(&["run", &model, "Hello there", "--max-tokens", "8"]);
    assert!(!answer.trim().is_empty(), "empty answer");
    let pid = home.daemon_pid().expect("a daemon started");
    assert!(alive(pid));
    assert!(home.socket().exists());
    let ps = home.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(ps[0]["name"], model.as_str());
    assert!(ps[0]["size"].as_u64().unwrap() > 0);
    // The answer is whole: the engine holds no sequence.
    assert_eq!(ps[0]["running"], 0, "{ps:?}");
    assert_eq!(ps[0]["waiting"], 0, "{ps:?}");
    home.ok(&["run", &model, "Hello again", "--max-tokens", "4"]);
    assert_eq!(
        home.daemon_pid(),
        Some(pid),
        "the second command started another daemon"
    );
    let table = home.ok(&["ps"]);
    for col in [
        "NAME",
        "SIZE",
        "PROCESSOR",
        "UNTIL",
        "CONTEXT",
        "RUNNING",
        "WAITING",
    ] {
        assert!(table.contains(col), "{table}");
    }
    assert!(
        table.contains("minutes from now") || table.contains("seconds from now"),
        "{table}"
    );
    // Piped standard input is the prompt, and the answer equals the argument's (greedy).
    let mut child = home
        .cmd(&["run", &model, "--max-tokens", "8"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Hello there")
        .unwrap();
    let mut piped = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut piped)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(piped, answer);
}

#[test]
fn two_concurrent_clients_get_their_own_answers() {
    let (home, model) = (home(), model());
    let prompts = ["Tell me about cats", "List three prime numbers"];
    let solo: Vec<String> = prompts
        .iter()
        .map(|p| home.ok(&["run", &model, p, "--max-tokens", "24"]))
        .collect();
    assert_ne!(
        solo[0], solo[1],
        "the prompts should give different answers"
    );
    for _ in 0..2 {
        let children: Vec<_> = prompts
            .iter()
            .map(|p| {
                home.cmd(&["run", &model, p, "--max-tokens", "24"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (child, expected) in children.into_iter().zip(&solo) {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(&String::from_utf8_lossy(&out.stdout), expected);
        }
    }
}

#[test]
fn keep_alive_zero_unloads_right_after_the_reply() {
    let (home, model) = (home(), model());
    home.ok(&[
        "run",
        &model,
        "Hi",
        "--max-tokens",
        "4",
        "--keep-alive",
        "0",
    ]);
    assert_eq!(home.ps(), Vec::<serde_json::Value>::new());
    // Default keep-alive keeps it; `rmx stop` unloads it.
    home.ok(&["run", &model, "Hi", "--max-tokens", "4"]);
    assert_eq!(home.ps().len(), 1);
    home.ok(&["stop", &model]);
    assert_eq!(home.ps(), Vec::<serde_json::Value>::new());
}

#[test]
fn a_short_keep_alive_expires_by_itself() {
    let (home, model) = (home(), model());
    home.ok(&[
        "run",
        &model,
        "Hi",
        "--max-tokens",
        "4",
        "--keep-alive",
        "1s",
    ]);
    let ps = home.ps();
    assert_eq!(ps.len(), 1);
    assert!(
        ps[0]["until"].as_str().unwrap().contains("from now"),
        "{ps:?}"
    );
    home.wait_until("the model to expire", Duration::from_secs(15), || {
        home.ps().is_empty()
    });
    // RMX_KEEP_ALIVE is the default for requests that name none.
    let home2 = TestHome::new().with_env("RMX_KEEP_ALIVE", "1s");
    home2.ok(&["run", &model, "Hi", "--max-tokens", "4"]);
    home2.wait_until("the model to expire", Duration::from_secs(15), || {
        home2.ps().is_empty()
    });
    // Negative: forever.
    home.ok(&[
        "run",
        &model,
        "Hi",
        "--max-tokens",
        "4",
        "--keep-alive",
        "-1",
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    let ps = home.ps();
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0]["until"], "forever");
}

#[test]
fn a_killed_daemon_is_detected_and_replaced() {
    let (home, model) = (home(), model());
    home.ok(&["run", &model, "Hi", "--max-tokens", "4"]);
    let pid = home.daemon_pid().unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    home.wait_until("the daemon to die", Duration::from_secs(10), || !alive(pid));
    assert!(
        home.socket().exists(),
        "a killed daemon leaves its socket behind"
    );
    let out = home.run(&["run", &model, "Hi", "--max-tokens", "4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{}", home.log());
    assert!(
        stderr.contains("not running"),
        "the CLI should say the daemon was gone: {stderr}"
    );
    let new_pid = home.daemon_pid().unwrap();
    assert_ne!(new_pid, pid);
    assert!(alive(new_pid));
}

#[test]
fn a_model_over_the_memory_budget_is_refused_and_the_daemon_keeps_serving() {
    let home = home().with_env("RMX_MAX_MEMORY", "100KB");
    let model = model();
    let out = home.run(&["run", &model, "Hi", "--max-tokens", "4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("memory budget"), "{stderr}");
    assert!(
        stderr.contains("100.0 KB") || stderr.contains("100 KB") || stderr.contains("KB"),
        "{stderr}"
    );
    assert!(stderr.contains("RMX_MAX_MEMORY"), "{stderr}");
    let pid = home.daemon_pid().unwrap();
    assert!(home.ps().is_empty());
    assert!(alive(pid));
    // Still serving: the same request fails the same way, from the same daemon.
    let again = home.run(&["run", &model, "Hi", "--max-tokens", "4"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("memory budget"));
    assert_eq!(home.daemon_pid(), Some(pid));
}

#[test]
fn a_hub_model_that_is_not_downloaded_says_to_pull_it() {
    let home = home();
    let out = home.run(&["run", "nobody/not-here", "Hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("rmx pull nobody/not-here"), "{stderr}");
}

#[test]
fn serve_answers_on_tcp_and_sigterm_ends_streams_with_a_final_event() {
    let (home, model) = (home(), model());
    let mut serve = home.cmd(&["serve"]).stderr(Stdio::piped()).spawn().unwrap();
    home.wait_until("the daemon to listen", Duration::from_secs(30), || {
        home.socket().exists()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = rmx_api::Client::new(rmx_api::Endpoint::Tcp(format!("127.0.0.1:{}", home.port)));
        let mut ready = false;
        for _ in 0..300 {
            if tcp.version().await.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ready, "no answer on TCP");
        let req = rmx_api::ChatRequest {
            model: model.clone(),
            messages: vec![rmx_api::Message::new("user", "Write a long story")],
            options: Some(rmx_api::Options {
                num_predict: Some(100_000),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut stream = tcp.chat(&req).await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(!first.done);
        std::process::Command::new("kill")
            .args(["-TERM", &serve.id().to_string()])
            .status()
            .unwrap();
        let mut last = first;
        while let Some(chunk) = stream.next().await {
            last = chunk.unwrap();
        }
        assert!(
            last.done,
            "the stream ended without a final chunk: {last:?}"
        );
        assert_eq!(last.stats.unwrap().done_reason, "cancelled");
    });
    let status = serve.wait().unwrap();
    let mut log = String::new();
    serve
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(!home.socket().exists(), "socket left behind");
    assert!(!home.lock().exists(), "lock left behind");
}

/// POSTs `body` over HTTP/1.0 (no chunked encoding: the body is the SSE text as sent, up to
/// the close) and returns the connection, the request sent.
async fn post_http10(addr: &str, path: &str, body: &serde_json::Value) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let body = body.to_string();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.0\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Reads from `s` into `seen` until it holds `needle` (or the connection ends).
async fn read_until(s: &mut tokio::net::TcpStream, seen: &mut Vec<u8>, needle: &str) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(seen).contains(needle) {
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "ended before {needle:?}: {}",
            String::from_utf8_lossy(seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
}

/// The `(event name, data)` of each SSE event in a response (headers skipped).
fn sse_events(response: &[u8]) -> Vec<(String, serde_json::Value)> {
    let text = String::from_utf8_lossy(response);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    body.split("\n\n")
        .filter_map(|ev| {
            let name = ev
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("");
            let data = ev.lines().find_map(|l| l.strip_prefix("data: "))?;
            let data = serde_json::from_str(data).ok()?;
            Some((name.to_string(), data))
        })
        .collect()
}

/// Issue #20: SIGTERM mid-answer ended OpenAI streams with `finish_reason: "stop"`, passing a
/// cut-off answer off as whole. OpenAI's and Anthropic's streams end with an error in their own
/// shape instead (Ollama's says `done_reason: "cancelled"`, above).
#[test]
fn issue_20_sigterm_ends_openai_and_anthropic_streams_with_an_error() {
    use tokio::io::AsyncReadExt;
    let (home, model) = (home(), model());
    let mut serve = home.cmd(&["serve"]).stderr(Stdio::null()).spawn().unwrap();
    home.wait_until("the daemon to listen", Duration::from_secs(30), || {
        home.socket().exists()
    });
    let addr = format!("127.0.0.1:{}", home.port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut ready = false;
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(&addr).await.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ready, "no answer on TCP");
        let messages = serde_json::json!([{"role": "user", "content": "Write a long story"}]);
        let body = serde_json::json!({"model": model, "messages": messages,
                                      "max_tokens": 100_000, "stream": true});
        let mut openai = post_http10(&addr, "/v1/chat/completions", &body).await;
        let mut anthropic = post_http10(&addr, "/v1/messages", &body).await;
        // Both have begun: OpenAI's first content, Anthropic's message_start.
        let (mut o, mut a) = (Vec::new(), Vec::new());
        read_until(&mut openai, &mut o, "\"content\":\"").await;
        read_until(&mut anthropic, &mut a, "message_start").await;
        std::process::Command::new("kill")
            .args(["-TERM", &serve.id().to_string()])
            .status()
            .unwrap();
        openai.read_to_end(&mut o).await.unwrap();
        anthropic.read_to_end(&mut a).await.unwrap();

        let chunks = sse_events(&o);
        assert!(
            chunks
                .iter()
                .all(|(_, c)| c["choices"][0]["finish_reason"].is_null()),
            "a cut-off stream reported a finish: {}",
            String::from_utf8_lossy(&o)
        );
        let last = &chunks.last().expect("chunks").1;
        assert!(
            last["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shutting down")),
            "{}",
            String::from_utf8_lossy(&o)
        );

        let events = sse_events(&a);
        assert!(
            events
                .iter()
                .all(|(name, _)| name != "message_delta" && name != "message_stop"),
            "a cut-off stream reported a stop: {}",
            String::from_utf8_lossy(&a)
        );
        let (name, data) = events.last().expect("events");
        assert_eq!(name, "error", "{}", String::from_utf8_lossy(&a));
        assert!(
            data["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shutting down")),
            "{data}"
        );
    });
    assert!(serve.wait().unwrap().success());
}

/// Issue #20: `--api-key "   "` passed for a key, so `rmx serve` listened on the network with
/// no key a client could send. A blank key is no key: off loopback, that is refused.
#[test]
fn issue_20_serve_refuses_the_network_with_a_blank_key() {
    let home = home();
    let port = rmx_tests::home::free_port().to_string();
    let mut serve = home
        .cmd(&[
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            &port,
            "--api-key",
            "   ",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("rmx serve listens on 0.0.0.0 with a blank API key");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut log = String::new();
    serve
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!status.success(), "{log}");
    assert!(log.contains("refusing to listen on 0.0.0.0"), "{log}");
    assert!(home.daemon_pid().is_none(), "a daemon took the lock: {log}");
}

#[test]
fn a_second_daemon_for_the_same_home_is_refused() {
    let home = home();
    let mut first = home.cmd(&["serve"]).stderr(Stdio::null()).spawn().unwrap();
    home.wait_until("the daemon to listen", Duration::from_secs(30), || {
        home.socket().exists()
    });
    let second = home.run(&["serve", "--port", &rmx_tests::home::free_port().to_string()]);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(stderr.contains("already running"), "{stderr}");
    assert!(
        home.socket().exists(),
        "the refused daemon removed the running one's socket"
    );
    std::process::Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(first.wait().unwrap().success());
}

/// Issue #24: `rmx serve --speculative prompt-lookup` speculates for requests that name no
/// speculation: a plain `rmx run -v` prints the guesses its answer's stats count.
#[test]
fn serve_speculative_is_the_default_of_requests_that_do_not_say() {
    let (home, model) = (home(), model());
    let mut serve = home
        .cmd(&[
            "serve",
            "--speculative",
            "prompt-lookup",
            "--draft-tokens",
            "4",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    home.wait_until("the daemon to listen", Duration::from_secs(30), || {
        home.socket().exists()
    });
    let out = home.run(&[
        "run",
        &model,
        "a a a a a a a a",
        "--raw",
        "--max-tokens",
        "16",
        "-v",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    serve.wait().unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("guessed tokens accepted"), "{stderr}");
}

/// `rmx run` with `args`, then again speculating with `method` and -v: the same answer, the
/// guesses counted. The plain answer, and -v's report of the speculating one.
fn same_answer_speculating(home: &TestHome, args: &[&str], method: &str) -> (String, String) {
    let plain = home.run(args);
    assert!(plain.status.success(), "{plain:?}");
    let mut guessed = args.to_vec();
    guessed.extend(["--speculative", method, "-v"]);
    let out = home.run(&guessed);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(out.stdout, plain.stdout, "{method}: {stderr}");
    assert!(stderr.contains("guessed tokens accepted"), "{stderr}");
    (String::from_utf8_lossy(&plain.stdout).into_owned(), stderr)
}

/// Issue #24: `rmx run --speculative draft:MODEL` has the draft model guess (here the model
/// itself, so the guesses are taken): the answer of a plain run, the guesses counted by -v;
/// `draft:` without a name is refused by the flag's parser, saying what it needs.
#[test]
fn run_with_a_draft_model_answers_as_without() {
    let (home, model) = (home(), model());
    let args = [
        "run",
        &model,
        "one two three",
        "--raw",
        "--max-tokens",
        "12",
    ];
    same_answer_speculating(&home, &args, &format!("draft:{model}"));
    let bad = home.run(&["run", &model, "hi", "--speculative", "draft:"]);
    let stderr = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(!bad.status.success());
    assert!(stderr.contains("needs the draft model's name"), "{stderr}");
}

/// Issue #24: `rmx run --speculative mtp` on a Qwen3.5 checkpoint as the Hub ships it (here a
/// tiny one scripted to write a reply, with a head that guesses it): the answer of a plain run,
/// the guesses counted by -v and the head listed by `rmx info`; on a model without the head the
/// answer is refused, saying what to use instead.
#[test]
fn run_with_the_mtp_head_answers_as_without() {
    let dir =
        rmx_tests::models::mtp_scripted("scripted-cli", " Seven swans swim past quiet reeds.");
    let root = dir.parent().expect("a parent").display().to_string();
    let home = TestHome::new().with_env("RMX_MODEL_ROOTS", &root);
    let model = dir.display().to_string();
    let args = [
        "run",
        &model,
        "Say it.\nassistant",
        "--raw",
        "--max-tokens",
        "8",
    ];
    let (text, _) = same_answer_speculating(&home, &args, "mtp");
    assert!(
        text.trim().starts_with("Seven swans swim past quiet"),
        "{text}"
    );
    let info = home.ok(&["info", &model]);
    assert!(info.contains("MTP head"), "{info}");
    let other = self::model();
    let bad = home.run(&["run", &other, "hi", "--speculative", "mtp"]);
    let stderr = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(!bad.status.success());
    assert!(stderr.contains("multi-token-prediction head"), "{stderr}");
}

/// Issue #24: `rmx import FOLDER --quant 4bit` turns a Qwen3.5 checkpoint as the Hub ships it
/// into a 4-bit MLX model under a name, keeping its MTP head: `rmx run NAME --speculative mtp`
/// gives the plain answer; a GGUF-only quantization for a folder is refused, saying what works.
#[test]
fn import_of_a_hub_checkpoint_keeps_its_mtp_head() {
    let src =
        rmx_tests::models::mtp_scripted("scripted-import", " Seven swans swim past quiet reeds.");
    let home = TestHome::new();
    let src = src.display().to_string();
    let out = home.ok(&["import", &src, "--name", "swans", "--quant", "4bit"]);
    assert!(out.contains("with its MTP head"), "{out}");
    // From its files, before it loads.
    let info = home.ok(&["info", "swans"]);
    assert!(info.contains("its own MTP head"), "{info}");
    let args = [
        "run",
        "swans",
        "Say it.\nassistant",
        "--raw",
        "--max-tokens",
        "8",
    ];
    same_answer_speculating(&home, &args, "mtp");
    // Loaded now, so its layer kinds are listed.
    let info = home.ok(&["info", "swans"]);
    assert!(info.contains("× MTP head"), "{info}");
    let bad = home.run(&["import", &src, "--name", "x", "--quant", "f32"]);
    let stderr = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(
        !bad.status.success() && stderr.contains("4bit, 8bit or bf16"),
        "{stderr}"
    );
}

/// The daemon's environment as the kernel reports it (what it started with).
#[cfg(target_os = "linux")]
fn daemon_env(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// MLX's CUDA backend keeps the kernels it compiled in `MLX_PTX_CACHE_DIR`, by default under
/// the temporary folder a reboot empties; rmx points it into the home (rmx_mlx::
/// runtime_defaults), and a folder the user named wins.
#[cfg(target_os = "linux")]
#[test]
fn the_daemon_keeps_compiled_kernels_in_the_home_unless_told_otherwise() {
    let model = model();
    let ours = home();
    let out = ours
        .cmd(&["run", &model, "Hi", "--max-tokens", "2"])
        .env_remove("MLX_PTX_CACHE_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let pid = ours.daemon_pid().expect("a daemon started");
    let want = format!(
        "MLX_PTX_CACHE_DIR={}",
        ours.home().join("cache/cuda-kernels/mlx-").display()
    );
    let env = daemon_env(pid);
    assert!(
        env.iter().any(|v| v.starts_with(&want)),
        "{want} in {env:?}"
    );

    let theirs = home().with_env("MLX_PTX_CACHE_DIR", "/somewhere/else");
    theirs.ok(&["run", &model, "Hi", "--max-tokens", "2"]);
    let pid = theirs.daemon_pid().expect("a daemon started");
    let env = daemon_env(pid);
    assert!(
        env.iter().any(|v| v == "MLX_PTX_CACHE_DIR=/somewhere/else"),
        "{env:?}"
    );
}
