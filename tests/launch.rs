//! `rmx launch`: the real binary starts 2 ranks over loopback (MLX's ring), rank 0 runs `rmx
//! bench` on a model split over them, in both modes; rank 0's peak memory is about half the
//! whole model's, and its greedy tokens are the whole model's (the record's `tokens`); `--streams
//! 2` runs too. `rmx serve` as rank 0 answers as the single-process daemon does, and a worker
//! killed mid-answer fails the answer with the group's error, after which the group comes back
//! (issue #25). Commands that cannot run over ranks are refused with what to do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmx_tests::home::TestHome;
use rmx_tests::{models, rmx};

/// `rmx [launch ...] bench MODEL` (tiny sizes, one round); its JSON record.
fn bench(launch: &[&str], model: &Path) -> serde_json::Value {
    let mut args: Vec<&str> = launch.to_vec();
    if !launch.is_empty() {
        args.extend(["--", "rmx"]);
    }
    let model = model.to_str().unwrap();
    args.extend(["bench", model, "--prompt-tokens", "8", "--gen-tokens", "4"]);
    args.extend(["--rounds", "1", "--warmup", "0", "--streams", "2", "--json"]);
    let out = Command::new(rmx()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rmx {args:?}:\n{err}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("rmx {args:?} printed no JSON record ({e}):\n{err}"))
}

fn peak(record: &serde_json::Value) -> f64 {
    record["cases"][0]["peak_memory_bytes"].as_f64().unwrap()
}

#[test]
fn bench_runs_on_a_model_split_over_two_ranks_in_both_modes() {
    let model = models::model("llama", "f32");
    let whole_record = bench(&[], &model);
    let whole = peak(&whole_record);
    let tokens = &whole_record["cases"][0]["tokens"];
    assert_eq!(tokens.as_array().map(Vec::len), Some(4), "{whole_record}");
    for mode in ["tensor", "pipeline"] {
        let record = bench(&["launch", "-n", "2", "--mode", mode], &model);
        assert_eq!(record["parallel"]["ranks"], 2, "{record}");
        // f32: the split model's greedy tokens are the whole one's.
        assert_eq!(&record["cases"][0]["tokens"], tokens, "{mode}");
        let streams = &record["cases"][0]["concurrent"][0];
        assert_eq!(streams["streams"], 2, "{record}");
        assert!(streams["aggregate_tps"]["median"].as_f64().unwrap() > 0.0);
        let split = peak(&record);
        println!(
            "{mode}: rank 0's peak {:.1} MiB, the whole model's {:.1} MiB ({:.2})",
            split / 1048576.0,
            whole / 1048576.0,
            split / whole
        );
        // The weights (half of them a rank) are nearly all of the peak of this tiny model.
        assert!(split < 0.6 * whole, "{mode}: {split} of {whole} bytes");
    }
}

#[test]
fn launch_refuses_what_cannot_run_over_ranks_yet() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--hostfile", "ring.json", "--", "rmx", "run", "m", "hi"],
            "`rmx launch --hostfile F -- rmx run` is not supported",
        ),
        (
            &["-n", "2", "--", "rmx", "pull", "m"],
            "rmx launch runs bench, chat, doctor, run and serve so far, not `pull`",
        ),
        (
            &["-n", "1", "--", "rmx", "bench", "m"],
            "-n needs at least 2 ranks",
        ),
        (
            &["-n", "2", "--", "python", "x.py"],
            "rmx launch runs rmx commands",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(rmx())
            .arg("launch")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}:\n{err}");
    }
    let out = Command::new(rmx()).arg("worker").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("started by rmx launch"));
}

/// Issue #26: `--backend nccl` is refused before any rank starts where it cannot run: a
/// hostfile (nccl ranks are this machine's), and an MLX without the nccl backend (a CPU build,
/// as on CI), in either mode (a pipeline over nccl hands over by all_sum).
#[test]
fn launch_refuses_nccl_where_it_cannot_run() {
    let err = refused("nccl", &["--hostfile", "ring.json"]);
    assert!(err.contains("this machine's ranks only"), "{err}");
    if mlx_has("nccl") {
        println!("this MLX has nccl: the CPU-build refusal is not checked here");
        return;
    }
    for mode in ["tensor", "pipeline"] {
        let err = refused("nccl", &["-n", "2", "--mode", mode]);
        assert!(
            err.contains("this MLX has no nccl backend (CPU build"),
            "{err}"
        );
        assert!(err.contains("--backend ring"), "{err}");
    }
}

/// `rmx launch --backend BACKEND ARGS -- rmx bench m`, which must fail: its stderr.
fn refused(backend: &str, args: &[&str]) -> String {
    let out = Command::new(rmx())
        .args(["launch", "--backend", backend])
        .args(args)
        .args(["--", "rmx", "bench", "m"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{backend} {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether the libmlx the rmx binary links here (the reference Python's) has `backend`.
fn mlx_has(backend: &str) -> bool {
    let probe = Command::new(rmx_tests::python())
        .args([
            "-c",
            &format!("import mlx.core as mx; print(mx.distributed.is_available('{backend}'))"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&probe.stdout).trim() == "True"
}

/// `--backend jaccl` (RDMA between Macs) needs mlx.launch's jaccl hostfile, and an MLX with
/// jaccl: on this MLX each refusal says what to do instead.
#[test]
fn launch_refuses_jaccl_where_it_cannot_run() {
    let err = refused("jaccl", &["-n", "2"]);
    assert!(err.contains("give their hostfile"), "{err}");
    if mlx_has("jaccl") {
        println!("this MLX has jaccl: its refusal is not checked here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hostfile = dir.path().join("jaccl.json");
    std::fs::write(
        &hostfile,
        r#"{"backend": "jaccl", "hosts": [{"ips": ["10.0.0.1"], "rdma": [null, "rdma_en3"]},
            {"ips": ["10.0.0.2"], "rdma": ["rdma_en3", null]}]}"#,
    )
    .unwrap();
    let err = refused(
        "jaccl",
        &["--hostfile", hostfile.to_str().unwrap(), "--rank", "0"],
    );
    assert!(err.contains("this MLX has no jaccl backend"), "{err}");
    assert!(err.contains("--backend ring"), "{err}");
}

/// `rmx launch -n 2 -- rmx run`: rank 0 serves privately, the client runs against it and the
/// group ends with it; the f32 model's greedy answer is the one-process daemon's. A daemon
/// already running for the home is refused (the client would talk to it, unsplit).
#[test]
fn run_over_two_ranks_answers_as_one_process_does() {
    let model = models::model("llama", "f32");
    let model = model.to_str().unwrap();
    let args = ["run", model, "Hello there", "--max-tokens", "8"];
    let split_home = TestHome::new();
    let mut launched = vec!["launch", "-n", "2", "--", "rmx"];
    launched.extend(args);
    let split = split_home.ok(&launched);
    assert_eq!(
        split_home
            .daemon_pid()
            .filter(|p| rmx_tests::home::alive(*p)),
        None
    );
    assert!(
        split_home.log().contains("split over 2 ranks"),
        "{}",
        split_home.log()
    );
    let whole_home = TestHome::new();
    let whole = whole_home.ok(&args);
    assert_eq!(split, whole);
    // The one-process daemon of `whole_home` still runs: launch refuses to start beside it.
    let out = whole_home.run(&launched);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("an rmx daemon already runs for this rmx home"),
        "{err}"
    );
}

/// A home whose daemon may name the tiny Llama by its folder over TCP.
fn serving_home(model: &Path) -> TestHome {
    let root = model.parent().unwrap().display().to_string();
    TestHome::new().with_env("RMX_MODEL_ROOTS", &root)
}

/// A daemon started in the foreground (`rmx serve`, or `rmx launch ... -- rmx serve`), its
/// stderr in the home; stopped (and the launcher with it) when dropped.
struct Daemon<'a> {
    home: &'a TestHome,
    child: Child,
}

impl<'a> Daemon<'a> {
    fn start(home: &'a TestHome, args: &[&str]) -> Daemon<'a> {
        let log = std::fs::File::create(home.home().join("serve.err")).unwrap();
        let child = home
            .cmd(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let d = Daemon { home, child };
        d.wait_answering();
        d
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.home().join("serve.err")).unwrap_or_default()
    }

    /// Until `/health` answers 200 (a group that starts again included).
    fn wait_answering(&self) {
        let start = Instant::now();
        while !http(self.home.port, "GET", "/health", "").starts_with("HTTP/1.0 200")
            && !http(self.home.port, "GET", "/health", "").starts_with("HTTP/1.1 200")
        {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the daemon never answered:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The `rmx worker` this launcher started (its child whose command line says so).
    fn worker_pid(&self) -> u32 {
        let found = self.workers();
        assert_eq!(found.len(), 1, "workers of {}: {found:?}", self.child.id());
        found[0]
    }

    fn workers(&self) -> Vec<u32> {
        let parent = self.child.id();
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("worker") {
                found.push(pid);
            }
        }
        found
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        // A launcher's ranks end with it (rank 0's lifeline closes); a daemon just ends.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.0 exchange (no chunked encoding: the body comes as sent, up to the close); the
/// whole response, status line first ("" when nothing answers).
fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    send(&mut s, method, path, body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn send(s: &mut TcpStream, method: &str, path: &str, body: &str) {
    let req = format!(
        "{method} {path} HTTP/1.0\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
}

fn chat_body(model: &Path, stream: bool, max_tokens: usize) -> String {
    serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hello"}],
        "stream": stream,
        "max_tokens": max_tokens,
        "temperature": 0,
    })
    .to_string()
}

/// A streamed chat completion's text, its deltas joined.
fn streamed_text(port: u16, model: &Path, max_tokens: usize) -> String {
    let out = http(
        port,
        "POST",
        "/v1/chat/completions",
        &chat_body(model, true, max_tokens),
    );
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    assert!(head.contains(" 200 "), "{out}");
    let chat = rmx_tests::http::chat_stream(body);
    assert_eq!(chat.finish, "length", "{out}");
    chat.content
}

#[test]
fn serve_over_two_ranks_streams_what_one_process_does() {
    let model = models::model("llama", "f32");
    let whole = {
        let home = serving_home(&model);
        let _daemon = Daemon::start(&home, &["serve"]);
        streamed_text(home.port, &model, 16)
    };
    let home = serving_home(&model);
    let daemon = Daemon::start(&home, &["launch", "-n", "2", "--", "rmx", "serve"]);
    let split = streamed_text(home.port, &model, 16);
    assert_eq!(split, whole, "{}", daemon.stderr());
    assert!(!split.is_empty());
    // One model, shown spread over the group: /api/ps (here through `rmx ps`, on the socket).
    let ps = home.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(
        ps[0]["split"],
        serde_json::json!({"ranks": 2, "mode": "tensor", "backend": "ring"}),
        "{ps:?}"
    );
    let table = home.ok(&["ps"]);
    assert!(table.contains("2 ranks (tensor, ring)"), "{table}");
    let health = http(home.port, "GET", "/health", "");
    let health: serde_json::Value =
        serde_json::from_str(health.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(health["models"][0]["split"], ps[0]["split"], "{health}");

    // Idle, the worker blocks on rank 0's doorbell instead of polling MLX's ring (which took
    // 4-5 s of CPU in 5 s here).
    let worker = daemon.worker_pid();
    let before = cpu_seconds(worker);
    std::thread::sleep(Duration::from_secs(2));
    let idle = cpu_seconds(worker) - before;
    println!("the idle worker used {idle:.2} s of CPU in 2 s");
    assert!(
        idle < 0.5,
        "the idle worker spins: {idle:.2} s of CPU in 2 s"
    );
}

/// User and system CPU time of a process so far (`/proc/PID/stat`, in clock ticks of 1/100 s
/// on Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Issue #25: a worker SIGKILLed mid-stream fails the answer with the group's error within
/// 10 s (the time is printed), the daemon answers again, and the next request succeeds on a
/// group `rmx launch` started again, with nothing restarted by hand. Then a worker that stalls
/// without closing its sockets (SIGSTOP: MLX's collectives wait on it for ever) fails the
/// answer once a step has run over `RMX_GROUP_STALL_SECS`, and the group comes back again.
#[test]
fn a_killed_worker_fails_the_stream_and_the_group_starts_again() {
    let model = models::model("llama", "f32");
    let home = serving_home(&model).with_env("RMX_GROUP_STALL_SECS", "5");
    let daemon = Daemon::start(&home, &["launch", "-n", "2", "--", "rmx", "serve"]);
    // Loaded before the stream, so that the stream decodes when the worker dies.
    assert!(!streamed_text(home.port, &model, 2).is_empty());

    let (worker, took, tail) = signal_mid_stream(&daemon, &model, "-KILL");
    println!("the stream's error came {took:.2?} after the worker was killed");
    // Either rank 0's collective fails first (MLX's ring loses its peer) or the launcher's
    // lifeline closes first ("rmx launch saw a rank end"): a race both ways, and the same
    // group error to the client, which says the group comes back.
    assert!(
        tail.contains("lost each other") && tail.contains("rmx launch restarts the group"),
        "{tail}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    back_again(&daemon, &model, worker);
    assert!(
        daemon.stderr().contains("rank 1 ended"),
        "{}",
        daemon.stderr()
    );

    let (worker, took, tail) = signal_mid_stream(&daemon, &model, "-STOP");
    println!("the stream's error came {took:.2?} after the worker was stopped (limit 5 s)");
    assert!(tail.contains("a rank or a link stalls"), "{tail}");
    back_again(&daemon, &model, worker);
}

/// Sends `signal` to the worker while a long answer streams; the worker, how long after it
/// the stream ended, and the stream's last event, which must be the group's error.
fn signal_mid_stream(daemon: &Daemon, model: &Path, signal: &str) -> (u32, Duration, String) {
    let worker = daemon.worker_pid();
    let mut s = TcpStream::connect(("127.0.0.1", daemon.home.port)).unwrap();
    let body = chat_body(model, true, 4000);
    send(&mut s, "POST", "/v1/chat/completions", &body);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&seen)
        .matches("\"content\"")
        .count()
        < 3
    {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(!String::from_utf8_lossy(&seen).contains("finish_reason\":\"stop"));
    let status = Command::new("kill")
        .args([signal, &worker.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let signalled = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = s.read_to_end(&mut seen);
    let took = signalled.elapsed();
    let text = String::from_utf8_lossy(&seen).into_owned();
    let tail = text.rsplit("data: ").nth(1).unwrap_or("").to_string();
    assert!(
        tail.contains("lost each other") && tail.contains("retry in a few seconds"),
        "the stream did not end with the group's error:\n{}\n{}",
        &text[text.len().saturating_sub(800)..],
        daemon.stderr()
    );
    (worker, took, tail)
}

/// The launcher starts the group again (rank 0 ended before a new worker starts), and the next
/// request loads the model on it and is answered.
fn back_again(daemon: &Daemon, model: &Path, worker: u32) {
    daemon
        .home
        .wait_until("a new worker", Duration::from_secs(60), || {
            daemon.workers().iter().any(|&w| w != worker)
        });
    daemon.wait_answering();
    let back = Instant::now();
    let answer = streamed_text(daemon.home.port, model, 4);
    println!(
        "the next answer came {:.2?} after the daemon answered again",
        back.elapsed()
    );
    assert!(!answer.is_empty());
}
