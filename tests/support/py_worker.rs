//! Long-lived `tiny_models.py serve` processes: one test process keeps its reference workers,
//! so python's start, mlx-lm's import and each tokenizer's load (3-10 s together, more than
//! most commands take on the 2-core CI machine) are paid once per worker, not once per command.
//!
//! A command takes an idle worker, or starts one when all are busy (so the tests' threads never
//! wait for each other here), and gives it back once answered. A worker whose command was not
//! read to its end (a test panicked meanwhile) is killed rather than reused.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use crate::python;

struct Worker {
    script: PathBuf,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The worker's stderr (what escapes python's own capture: crashes, C++ messages).
    log: PathBuf,
}

static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

fn start(script: &Path) -> Worker {
    let log = crate::target_tmp(&format!(
        "py-worker-{}-{}.log",
        std::process::id(),
        next_id()
    ));
    let err = std::fs::File::create(&log).expect("create the worker's log");
    let mut child = Command::new(python())
        .arg(script)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .expect("run the reference python");
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    Worker {
        script: script.to_path_buf(),
        child,
        stdin,
        stdout,
        log,
    }
}

fn next_id() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// One command in flight on a worker of `script` (a `tests/py` script with a `serve` command).
pub struct Call {
    worker: Option<Worker>,
    args: Vec<String>,
}

/// How a command ended.
pub struct Reply {
    pub ok: bool,
    pub stdout: String,
    pub error: String,
}

impl Call {
    pub fn start(script: &Path, args: &[String]) -> Call {
        let idle = {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            let at = idle.iter().position(|w| w.script == script);
            at.map(|i| idle.swap_remove(i))
        };
        let mut worker = idle.unwrap_or_else(|| start(script));
        let line = serde_json::to_string(args).unwrap();
        // A worker that died while idle shows here or at the first read; both say where its
        // log is.
        let _ = writeln!(worker.stdin, "{line}").and_then(|_| worker.stdin.flush());
        Call {
            worker: Some(worker),
            args: args.to_vec(),
        }
    }

    /// The next line the command prints on its own (`ready`), or its reply if it ends first.
    pub fn next_signal(&mut self) -> Result<String, Reply> {
        let line = self.read_line();
        match line.strip_prefix("done ") {
            Some(done) => Err(self.finish_with(done.to_string())),
            None => Ok(line),
        }
    }

    /// Waits for the command's end; the worker goes back to the pool.
    pub fn finish(mut self) -> Reply {
        loop {
            let line = self.read_line();
            if let Some(done) = line.strip_prefix("done ") {
                return self.finish_with(done.to_string());
            }
        }
    }

    /// [`Call::finish`], panicking with the worker's error if the command failed.
    pub fn expect_ok(self) -> String {
        let args = self.args.clone();
        let reply = self.finish();
        assert!(reply.ok, "tiny_models.py {args:?} failed:\n{}", reply.error);
        reply.stdout
    }

    fn read_line(&mut self) -> String {
        let w = self.worker.as_mut().unwrap();
        let mut line = String::new();
        let n = w.stdout.read_line(&mut line).unwrap_or(0);
        if n == 0 {
            let log = std::fs::read_to_string(&w.log).unwrap_or_default();
            let args = self.args.clone();
            self.worker = None;
            panic!("the reference worker died during {args:?}; its stderr:\n{log}");
        }
        line.trim_end().to_string()
    }

    fn finish_with(&mut self, done: String) -> Reply {
        let v: serde_json::Value = serde_json::from_str(&done).expect("the worker's reply");
        let w = self.worker.take().unwrap();
        IDLE.lock().unwrap_or_else(|p| p.into_inner()).push(w);
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Reply {
            ok: v["ok"].as_bool() == Some(true),
            stdout: text("stdout"),
            error: text("error"),
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Not read to its end: its remaining output would answer the next command.
        if let Some(mut w) = self.worker.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }
}
