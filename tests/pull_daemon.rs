//! `/api/pull` on the real daemon (`rmx serve` in a temporary home) against a local Hub:
//! Ollama's ndjson lines over TCP, the CLI's client over the Unix socket, a repo that does not
//! exist, and the `ollama` Python client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rmx_api::{Client, ClientError, PullEvent, PullResponse};
use rmx_tests::hub_env::Env;
use rmx_tests::tiny_repo::{tree, REPO, WEIGHTS};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `rmx serve` in the env's home, once it answers on its socket. The env's port was free when
/// it was picked, but another test's server can take it before the daemon binds it: a daemon
/// that exits before answering is started again on a new port (its stderr is shown when it
/// fails otherwise).
async fn serve(env: &mut Env) -> (Child, Client) {
    let client = Client::unix(env.home().join("rmx.sock"));
    for _ in 0..3 {
        let log = env.dir.path().join("serve.log");
        let mut cmd = env.rmx();
        cmd.arg("serve")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("serve.log"));
        let mut child = cmd.spawn().expect("spawn rmx serve");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if client.version().await.is_ok() {
                return (child, client);
            }
            if let Some(status) = child.try_wait().expect("the daemon's status") {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(
                    err.contains("in use"),
                    "the daemon exited ({status}) before answering:\n{err}"
                );
                env.port = rmx_tests::home::free_port();
                break;
            }
            assert!(Instant::now() < deadline, "the daemon did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("three ports in a row were taken before the daemon could bind them");
}

/// POSTs `body` to `path` over TCP as HTTP/1.0 (so the answer ends when the connection
/// does) and returns the status code and the body.
async fn post(port: u16, path: &str, body: &str) -> (u16, String) {
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let raw = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.write_all(request.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    })
    .await
    .expect("join");
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    (status, body.to_string())
}

/// Pulls `model` with the CLI's client to the end of its stream; the last line that was an
/// error, if any.
async fn failure(client: &Client, model: &str) -> Option<ClientError> {
    let mut stream = client.pull(model).await.expect("the stream starts");
    let mut outcome = None;
    while let Some(line) = stream.next().await {
        if let Err(e) = line {
            outcome = Some(e);
        }
    }
    outcome
}

fn lines(body: &str) -> Vec<Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_streams_ollama_progress_and_the_model_is_then_stored() {
    let mut env = Env::new().await;
    let (_daemon, client) = serve(&mut env).await;
    let (status, body) = post(env.port, "/api/pull", &format!(r#"{{"model":"{REPO}"}}"#)).await;
    assert_eq!(status, 200, "{body}");
    let lines = lines(&body);
    let statuses: Vec<&str> = lines
        .iter()
        .map(|l| l["status"].as_str().unwrap())
        .collect();

    // The phases in Ollama's order.
    let phase = |s: &str| match s {
        "pulling manifest" => 0,
        s if s.starts_with("pulling ") => 1,
        "verifying sha256 digest" => 2,
        "writing manifest" => 3,
        "success" => 4,
        other => panic!("unexpected status {other:?}\n{body}"),
    };
    let phases: Vec<u8> = statuses.iter().map(|s| phase(s)).collect();
    assert!(phases.windows(2).all(|w| w[0] <= w[1]), "{statuses:?}");
    assert_eq!((phases[0], phases.last()), (0, Some(&4)), "{statuses:?}");
    assert!(phases.contains(&1) && phases.contains(&2) && phases.contains(&3));

    // Per file: `pulling <first 12 hex>`, completed never above total nor going back, and
    // reaching it.
    let mut files: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for l in lines
        .iter()
        .filter(|l| phase(l["status"].as_str().unwrap()) == 1)
    {
        let digest = l["digest"].as_str().expect("digest").to_string();
        let hex = digest.split_once(':').expect("kind:hex").1;
        assert_eq!(
            l["status"],
            format!("pulling {}", &hex[..12.min(hex.len())])
        );
        let (total, completed) = (
            l["total"].as_u64().unwrap(),
            l["completed"].as_u64().unwrap(),
        );
        let seen = files.entry(digest.clone()).or_insert((total, 0));
        assert_eq!(seen.0, total, "{digest}: total changed");
        assert!(
            completed <= total && completed >= seen.1,
            "{digest}: {completed} after {}",
            seen.1
        );
        seen.1 = completed;
    }
    assert_eq!(files.len(), 4, "config, tokenizer x2, weights: {files:?}");
    assert!(
        files.values().all(|(total, done)| total == done),
        "{files:?}"
    );
    // The weights are named by the sha256 the pull verified.
    let weights = rmx_tests::tiny_repo::tiny_safetensors();
    let sha = format!("sha256:{}", hex::encode(Sha256::digest(&weights)));
    assert_eq!(
        files.get(&sha),
        Some(&(weights.len() as u64, weights.len() as u64))
    );

    // The store events ride along: the plan names each file with the same digests.
    let planned = lines
        .iter()
        .find_map(|l| {
            let line: PullResponse = serde_json::from_value(l.clone()).expect("a pull line");
            match line.detail {
                Some(PullEvent::Resolved { files, .. }) => {
                    assert_eq!(line.status, "pulling manifest");
                    Some(files)
                }
                _ => None,
            }
        })
        .expect("a line carries the plan");
    assert!(planned.iter().any(|f| f.file == WEIGHTS && f.digest == sha));
    assert_eq!(planned.len(), files.len());

    let ls = env.run(&["ls"]).await.ok();
    assert!(ls.stdout.contains(REPO), "{}", ls.stdout);

    // Again over the socket with the CLI's client: nothing to fetch, every file already here.
    let mut again = client.pull(REPO).await.expect("pull again");
    let mut cached = 0;
    let mut last = String::new();
    while let Some(line) = again.next().await {
        let line = line.expect("a progress line");
        if let Some(PullEvent::FileDone { cached: true, .. }) = line.detail {
            cached += 1;
        }
        last = line.status;
    }
    assert_eq!((cached, last.as_str()), (4, "success"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_repo_ends_in_an_error_line_and_leaves_nothing() {
    let mut env = Env::new().await;
    let (_daemon, client) = serve(&mut env).await;
    let (status, body) = post(env.port, "/api/pull", r#"{"name":"nobody/nothing"}"#).await;
    assert_eq!(status, 200, "{body}");
    let lines = lines(&body);
    assert_eq!(
        lines.first().map(|l| &l["status"]),
        Some(&"pulling manifest".into())
    );
    let error = lines
        .last()
        .and_then(|l| l["error"].as_str())
        .expect("an error line");
    assert!(
        error.contains("`nobody/nothing` was not found on") && error.contains("check the name"),
        "{error}"
    );
    assert!(
        !tree(&env.cache()).iter().any(|p| p.contains("nobody")),
        "{:?}",
        tree(&env.cache())
    );

    // The client turns the line into an error; without streaming it is a 404.
    let outcome = failure(&client, "nobody/nothing").await;
    assert!(
        matches!(&outcome, Some(ClientError::Api { message, .. }) if message.contains("was not found")),
        "{outcome:?}"
    );
    let (status, body) = post(
        env.port,
        "/api/pull",
        r#"{"model":"nobody/nothing","stream":false}"#,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    // A name that is no alias is refused before anything streams.
    let (status, body) = post(env.port, "/api/pull", r#"{"model":"smollm2"}"#).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("did you mean") && body.contains("rmx models"),
        "{body}"
    );
    let (status, body) = post(env.port, "/api/pull", "{}").await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmx_pull_sends_its_own_hf_token_to_a_daemon_started_without_one() {
    let mut env = Env::new().await;
    env.hub.make_private(REPO, "hf_secret");
    // The daemon starts with no token at all (Env::rmx clears HF_TOKEN and friends).
    let (_daemon, client) = serve(&mut env).await;
    let outcome = failure(&client, REPO).await;
    assert!(
        matches!(&outcome, Some(ClientError::Api { message, .. }) if message.contains("need HF_TOKEN")),
        "{outcome:?}"
    );

    // `export HF_TOKEN=...` after the daemon started: `rmx pull` in that shell succeeds.
    let mut cmd = env.rmx();
    cmd.args(["pull", REPO]).env("HF_TOKEN", "hf_secret");
    let run = env.run_cmd(cmd).await;
    assert_eq!(
        run.code,
        Some(0),
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        env.daemon_log()
    );
    let ls = env.run(&["ls"]).await.ok();
    assert!(ls.stdout.contains(REPO), "{}", ls.stdout);
    // The token is not written to the daemon's log.
    assert!(!env.daemon_log().contains("hf_secret"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ollama_python_client_pulls() {
    let Ok(python) = std::env::var("RMX_TEST_PYTHON") else {
        panic!("RMX_TEST_PYTHON is not set: run `. scripts/test-env.sh` first");
    };
    let mut env = Env::new().await;
    let (_daemon, _client) = serve(&mut env).await;
    let script = r#"
import sys, ollama
client = ollama.Client(host=sys.argv[1])
parts = list(client.pull(sys.argv[2], stream=True))
assert parts[0].status == "pulling manifest" and parts[-1].status == "success", parts
done = {p.digest: (p.completed, p.total) for p in parts if p.digest}
assert done and all(c == t for c, t in done.values()), done
assert client.pull(sys.argv[2]).status == "success"
try:
    client.pull("nobody/nothing", stream=False)
    raise AssertionError("a missing repo was pulled")
except ollama.ResponseError as e:
    assert e.status_code == 404 and "was not found" in e.error, e
print("ok", len(done))
"#;
    let base = format!("http://127.0.0.1:{}", env.port);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args(["-c", script, &base, REPO])
            .output()
            .expect("run python")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "ok 4");
}

/// Waits until the weights' `.incomplete` blob holds at least `bytes`.
async fn partial_reaches(env: &Env, bytes: u64) {
    let blobs = env.cache().join("models--test-org--tiny-llama-4bit/blobs");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let partial = std::fs::read_dir(&blobs).ok().and_then(|entries| {
            entries.flatten().find(|e| {
                e.file_name().to_string_lossy().ends_with(".incomplete")
                    && e.metadata().is_ok_and(|m| m.len() >= bytes)
            })
        });
        if partial.is_some() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the stalled download never reached {bytes} bytes: {:?}",
            tree(env.dir.path())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_stops_the_download_and_the_next_pull_resumes_it() {
    let mut env = Env::new().await;
    env.hub.stall_after(WEIGHTS, 100_000);
    let (_daemon, client) = serve(&mut env).await;
    let mut first = client.pull(REPO).await.expect("pull");
    let reader = tokio::spawn(async move { while first.next().await.is_some() {} });
    partial_reaches(&env, 100_000).await;
    reader.abort();
    let _ = reader.await;

    env.hub.reset_counters();
    // A download still running would hold the repo's turn (and its stalled transfer never
    // ends): this pull would never start.
    let resumed = tokio::time::timeout(Duration::from_secs(120), async {
        let mut lines = client.pull(REPO).await.expect("pull again");
        let mut offset = None;
        let mut last = String::new();
        while let Some(line) = lines.next().await {
            let line = line.expect("a progress line");
            if let Some(PullEvent::FileStarted {
                file, offset: o, ..
            }) = &line.detail
            {
                if file == WEIGHTS {
                    offset = Some(*o);
                }
            }
            last = line.status;
        }
        (offset, last)
    })
    .await
    .expect("the first download still holds the repo");
    assert_eq!(resumed, (Some(100_000), "success".to_string()));
    let weights = rmx_tests::tiny_repo::tiny_safetensors().len() as u64;
    assert_eq!(env.hub.served(WEIGHTS), weights - 100_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_shutting_down_ends_a_pull_with_an_error_line() {
    let mut env = Env::new().await;
    env.hub.stall_after(WEIGHTS, 100_000);
    let (mut daemon, _client) = serve(&mut env).await;
    let port = env.port;
    let answer = tokio::spawn(post(
        port,
        "/api/pull",
        r#"{"model":"test-org/tiny-llama-4bit"}"#,
    ));
    partial_reaches(&env, 100_000).await;
    let pid = daemon.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(killed.expect("kill -TERM").success());
    let (status, body) = tokio::time::timeout(Duration::from_secs(60), answer)
        .await
        .expect("the pull's answer ended")
        .expect("join");
    assert_eq!(status, 200);
    let last = lines(&body).pop().expect("lines");
    let error = last["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("shutting down") && error.contains("rmx pull"),
        "{body}"
    );
    let exited = tokio::task::spawn_blocking(move || daemon.wait())
        .await
        .expect("join");
    assert!(exited.expect("wait").success());
    assert!(tree(&env.cache())
        .iter()
        .any(|p| p.ends_with(".incomplete")));
}

/// On a terminal `rmx pull` draws bars from the daemon's lines and says when the model is
/// ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmx_pull_on_a_terminal_draws_bars_from_the_daemon() {
    let env = Env::new().await;
    let mut cmd = env.rmx();
    cmd.args(["pull", REPO]).env("TERM", "xterm");
    let drawn = tokio::task::spawn_blocking(move || -> Result<String, rexpect::error::Error> {
        let mut p = rexpect::session::spawn_command(cmd, Some(60_000))?;
        p.exp_string("pulling test-org/tiny-llama-4bit (0123456): 4 files, 354.1 KB")?;
        let (before, _) = p.exp_regex(r"is ready \(354\.1 KB\)")?;
        p.exp_eof()?;
        Ok(before)
    })
    .await
    .expect("join")
    .expect("rmx pull on a terminal");
    assert!(drawn.contains("model.safetensors"), "{drawn}");
    assert!(env.daemon_pid().is_some(), "the pull ran in a daemon");
}

/// Ctrl-C on the terminal reaches `rmx pull` (not the daemon, in its own process group): it
/// stops with the resume hint, the daemon lives on, and the next pull resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_a_terminal_stops_the_pull_and_leaves_the_daemon() {
    let env = Env::new().await;
    env.hub.stall_after(WEIGHTS, 100_000);
    let mut cmd = env.rmx();
    cmd.args(["pull", REPO]).env("TERM", "xterm");
    let mut p = rexpect::session::spawn_command(cmd, Some(60_000)).expect("spawn");
    partial_reaches(&env, 100_000).await;
    let said = tokio::task::spawn_blocking(move || -> Result<String, rexpect::error::Error> {
        p.send_control('c')?;
        let (_, hint) = p.exp_regex(r"interrupted: [^\r\n]+ to resume")?;
        p.exp_eof()?;
        Ok(hint)
    })
    .await
    .expect("join")
    .expect("rmx pull stops on Ctrl-C");
    assert!(
        said.contains("run `rmx pull test-org/tiny-llama-4bit`"),
        "{said}"
    );
    let pid = env.daemon_pid().expect("a daemon");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let again = env.run(&["pull", REPO]).await.ok();
    assert!(
        again
            .stdout
            .contains(&format!("  {WEIGHTS}: resuming at 100.0 KB")),
        "{}",
        again.stdout
    );
}
