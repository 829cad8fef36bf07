//! `rmx share` end to end: the real binary in front of the real daemon with a tiny Qwen3, and
//! plain HTTP over real sockets, as someone on the LAN would call it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use rmx_tests::home::{alive, free_port, TestHome};

struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// One HTTP/1.1 request on a fresh connection, with the key as a bearer token.
fn http(port: u16, method: &str, path: &str, key: Option<&str>, body: Option<&str>) -> Reply {
    let auth = key.map(|k| format!("Bearer {k}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    request(port, method, path, &headers, body)
}

fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    req.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    Reply {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

/// Starts `rmx share` and returns it with its `--json` line.
fn share(home: &TestHome, args: &[&str], path: Option<&str>) -> (Child, serde_json::Value) {
    try_share(home, args, path).unwrap_or_else(|err| {
        panic!(
            "rmx share printed no JSON line\nstderr: {err}\ndaemon log:\n{}",
            home.log()
        )
    })
}

/// [`share`] on a free port of 127.0.0.1 (`--host 127.0.0.1 --port P` after `args`), and the
/// port. A port free when picked can be taken before the share binds it (another test's
/// listener): that try is dropped and another port picked.
fn share_on_a_free_port(
    home: &TestHome,
    args: &[&str],
    path: Option<&str>,
) -> (Child, serde_json::Value, u16) {
    for _ in 0..5 {
        let port = free_port();
        let p = port.to_string();
        let with_port = [args, &["--host", "127.0.0.1", "--port", &p]].concat();
        match try_share(home, &with_port, path) {
            Ok((child, ready)) => return (child, ready, port),
            Err(err) if err.contains("Address already in use") => continue,
            Err(err) => panic!(
                "rmx share printed no JSON line\nstderr: {err}\ndaemon log:\n{}",
                home.log()
            ),
        }
    }
    panic!("five free ports were taken before rmx share could bind them");
}

/// `rmx share ARGS --json`, and its JSON line; its stderr when it printed none.
fn try_share(
    home: &TestHome,
    args: &[&str],
    path: Option<&str>,
) -> Result<(Child, serde_json::Value), String> {
    let mut cmd = home.cmd(&[&["share"], args, &["--json"]].concat());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.trim().is_empty() {
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let _ = child.wait();
        return Err(err);
    }
    Ok((child, serde_json::from_str(&line).unwrap()))
}

/// Ctrl-C, then the process must exit cleanly and the port refuse connections.
fn interrupt(home: &TestHome, mut child: Child, port: u16) {
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success(),
        "{status}: {err}\ndaemon log:\n{}",
        home.log()
    );
    let refused = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

/// A stand-in cloudflared: prints a quick-tunnel banner the way the real one does, records
/// its arguments and pid, and stays up until killed.
fn fake_cloudflared(dir: &Path) {
    let script = format!(
        "#!/bin/sh\necho \"$@\" > {d}/cloudflared.args\necho $$ > {d}/cloudflared.pid\n\
         echo 'INF Requesting new quick Tunnel on trycloudflare.com...' >&2\n\
         echo 'INF |  https://some-random-words.trycloudflare.com  |' >&2\nexec sleep 600\n",
        d = dir.display()
    );
    let path = dir.join("cloudflared");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn share_needs_its_key_limits_the_rate_and_ctrl_c_closes_port_and_tunnel() {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let bin = tempfile::tempdir().unwrap();
    fake_cloudflared(bin.path());
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let args = [model.as_str(), "--rate-limit", "3"];
    let (child, ready, port) = share_on_a_free_port(&home, &args, Some(&path));
    // No --tunnel: cloudflared on PATH is used, pointed at the share's own port.
    assert_eq!(
        ready["public_url"],
        "https://some-random-words.trycloudflare.com/v1"
    );
    let tunnel_args = std::fs::read_to_string(bin.path().join("cloudflared.args")).unwrap();
    assert!(
        tunnel_args.contains(&format!("--url http://127.0.0.1:{port}")),
        "{tunnel_args}"
    );
    let tunnel_pid: u32 = std::fs::read_to_string(bin.path().join("cloudflared.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(tunnel_pid));
    assert_eq!(ready["url"], format!("http://127.0.0.1:{port}/v1"));
    let key = ready["key"].as_str().unwrap().to_string();
    // The model was loaded and pinned before the URL was printed.
    let ps = home.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(ps[0]["until"], "forever", "{ps:?}");
    // Another model in the daemon, which the share must not list.
    let other = bin.path().join("other-model");
    std::fs::create_dir(&other).unwrap();
    for f in std::fs::read_dir(&model).unwrap() {
        let f = f.unwrap().path();
        std::os::unix::fs::symlink(&f, other.join(f.file_name().unwrap())).unwrap();
    }
    let other = other.display().to_string();
    home.ok(&["run", &other, "Hi", "--max-tokens", "1"]);
    assert_eq!(home.ps().len(), 2);

    assert_eq!(http(port, "GET", "/v1/models", None, None).status, 401);
    assert_eq!(
        http(port, "GET", "/v1/models", Some("rmx-wrong"), None).status,
        401
    );
    for _ in 0..3 {
        let ok = http(port, "GET", "/v1/models", Some(&key), None);
        assert_eq!(ok.status, 200, "{}", ok.body);
        // Only the shared model is listed, whatever else this machine has.
        let list: serde_json::Value = serde_json::from_str(&ok.body).unwrap();
        assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
        assert_eq!(list["data"][0]["id"], model.as_str(), "{list}");
    }
    let limited = http(port, "GET", "/v1/models", Some(&key), None);
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.head.contains("retry-after:"), "{}", limited.head);

    interrupt(&home, child, port);
    home.wait_until("the tunnel to be killed", Duration::from_secs(10), || {
        !alive(tunnel_pid)
    });
    // The daemon itself keeps running; the model is back on the usual keep-alive.
    let ps: Vec<_> = home
        .ps()
        .into_iter()
        .filter(|m| m["name"] == model.as_str())
        .collect();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_ne!(ps[0]["until"], "forever", "{ps:?}");
}

#[test]
fn a_share_serves_only_its_model_and_generation_routes() {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let (child, ready, port) = share_on_a_free_port(
        &home,
        &[
            &model,
            "--tunnel",
            "none",
            "--cors-origin",
            "http://app.example",
        ],
        None,
    );
    let p = port.to_string();
    assert_eq!(ready["public_url"], serde_json::Value::Null);
    assert_eq!(ready["rate_limit"], 120);
    let key = ready["key"].as_str().unwrap().to_string();
    let chat = |m: &str, stream: bool| {
        let body = serde_json::json!({
            "model": m,
            "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 4,
            "stream": stream,
        })
        .to_string();
        http(
            port,
            "POST",
            "/v1/chat/completions",
            Some(&key),
            Some(&body),
        )
    };
    let answer = chat(&model, false);
    assert_eq!(answer.status, 200, "{}", answer.body);
    let v: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(v["object"], "chat.completion", "{v}");
    let streamed = chat(&model, true);
    assert_eq!(streamed.status, 200, "{}", streamed.body);
    assert!(
        streamed.head.contains("text/event-stream"),
        "{}",
        streamed.head
    );
    assert!(streamed.body.contains("data: [DONE]"), "{}", streamed.body);

    let other = chat("someone/else", false);
    assert_eq!(other.status, 404, "{}", other.body);
    assert!(other.body.contains("not shared"), "{}", other.body);
    let delete = http(
        port,
        "DELETE",
        "/api/delete",
        Some(&key),
        Some(&serde_json::json!({ "model": model }).to_string()),
    );
    assert_eq!(delete.status, 403, "{}", delete.body);

    // Browsers: the allowed origin gets its preflight and CORS headers, x-api-key works as
    // the key, and other origins are refused.
    let preflight = |origin: &str| {
        let h = [
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
        ];
        request(port, "OPTIONS", "/v1/chat/completions", &h, None)
    };
    let allowed = preflight("http://app.example");
    assert_eq!(allowed.status, 204, "{}", allowed.head);
    assert!(
        allowed
            .head
            .contains("access-control-allow-origin: http://app.example"),
        "{}",
        allowed.head
    );
    assert_eq!(preflight("http://evil.example").status, 403);
    let h = [
        ("Origin", "http://app.example"),
        ("x-api-key", key.as_str()),
    ];
    let listed = request(port, "GET", "/v1/models", &h, None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(
        listed.head.contains("access-control-allow-origin"),
        "{}",
        listed.head
    );

    let other_id = http(port, "GET", "/v1/models/someone/else", Some(&key), None);
    assert_eq!(other_id.status, 404, "{}", other_id.body);
    assert_eq!(http(port, "GET", "/api/ps", Some(&key), None).status, 403);

    interrupt(&home, child, port);
    // A new share has a new key; the old one is worth nothing. This one tunnels over ssh
    // (a stand-in that records its arguments, says the forward is up as `ssh -v` does, and
    // stays up).
    let bin = tempfile::tempdir().unwrap();
    let ssh = bin.path().join("ssh");
    let script = format!(
        "#!/bin/sh\necho \"$@\" > {d}/ssh.args\necho $$ > {d}/ssh.pid\n\
         echo 'debug1: Authentication succeeded (publickey).' >&2\n\
         echo 'debug1: remote forward success for: listen 9000, connect 127.0.0.1:{port}' >&2\n\
         exec sleep 600\n",
        d = bin.path().display(),
    );
    std::fs::write(&ssh, script).unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let tunnel = "ssh:me@box.example:9000";
    let args = [
        model.as_str(),
        "--host",
        "127.0.0.1",
        "--port",
        &p,
        "--tunnel",
        tunnel,
    ];
    let (child, again) = share(&home, &args, Some(&path));
    assert_ne!(again["key"], ready["key"]);
    assert_eq!(again["public_url"], "http://box.example:9000/v1");
    assert_eq!(
        http(port, "GET", "/v1/models", Some(&key), None).status,
        401
    );
    let ssh_args = std::fs::read_to_string(bin.path().join("ssh.args")).unwrap();
    assert!(
        ssh_args.contains(&format!("-R 9000:127.0.0.1:{port} me@box.example")),
        "{ssh_args}"
    );
    let ssh_pid: u32 = std::fs::read_to_string(bin.path().join("ssh.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    interrupt(&home, child, port);
    home.wait_until("ssh to be killed", Duration::from_secs(10), || {
        !alive(ssh_pid)
    });
}
