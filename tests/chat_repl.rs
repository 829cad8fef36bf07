//! `rmx chat` through a pseudo-terminal: slash commands, multi-line input, Ctrl-C stopping an
//! answer without leaving, history kept across sessions, Ctrl-D leaving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rexpect::session::spawn_command;
use rmx_tests::home::TestHome;

/// Types a line and waits for its echo: what is expected next is then what the line caused
/// (a prompt printed before it cannot be mistaken for the one after the answer).
fn line(p: &mut rexpect::session::PtySession, text: &str) -> Result<(), rexpect::error::Error> {
    p.send_line(text)?;
    p.exp_string(text)?;
    Ok(())
}

#[test]
fn chat_repl_commands_cancel_and_history() -> Result<(), rexpect::error::Error> {
    let home = TestHome::new();
    let model = rmx_tests::models::tiny_qwen3().display().to_string();
    let saved = home.home().join("chat.json");
    let mut cmd = home.cmd(&["chat", &model, "--max-tokens", "8"]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string(">>> ")?;
    line(&mut p, "/help")?;
    p.exp_string("/system <text>")?;
    p.exp_string(">>> ")?;
    line(&mut p, "/set temperature 0")?;
    p.exp_string("Set temperature to 0.")?;
    line(&mut p, "/set bogus 1")?;
    p.exp_string("unknown parameter")?;
    line(&mut p, "/think off")?;
    p.exp_string("Thinking off.")?;
    line(&mut p, "/system You are terse.")?;
    p.exp_string("System message set.")?;
    line(&mut p, "/nope")?;
    p.exp_string("unknown command /nope")?;
    line(&mut p, "Hello")?;
    p.exp_string(">>> ")?;
    // A """ block is one message.
    line(&mut p, "\"\"\"first line")?;
    p.exp_string("... ")?;
    line(&mut p, "second line\"\"\"")?;
    p.exp_string(">>> ")?;
    // So are lines joined by a trailing backslash.
    line(&mut p, "one \\")?;
    p.exp_string("... ")?;
    line(&mut p, "two")?;
    p.exp_string(">>> ")?;
    line(&mut p, &format!("/save {}", saved.display()))?;
    p.exp_string("Saved 6 messages")?;
    line(&mut p, "/clear")?;
    p.exp_string("Conversation cleared.")?;
    line(&mut p, &format!("/load {}", saved.display()))?;
    p.exp_string("Loaded 6 messages")?;
    line(&mut p, "/show")?;
    p.exp_string("capabilities")?;
    p.exp_string(">>> ")?;
    // Ctrl-C at the prompt drops the line and stays.
    p.send("half a line")?;
    p.flush()?;
    p.send_control('c')?;
    p.exp_string(">>> ")?;
    // Ctrl-C during an answer stops it and stays in the chat.
    line(&mut p, "/set max_tokens 1000000")?;
    p.exp_string("Set max_tokens")?;
    line(&mut p, "Tell me a very long story")?;
    std::thread::sleep(Duration::from_millis(1500));
    p.send_control('c')?;
    p.exp_string("(stopped)")?;
    p.exp_string(">>> ")?;
    line(&mut p, "/set max_tokens 4")?;
    p.exp_string("Set max_tokens")?;
    line(&mut p, "Still there?")?;
    p.exp_string(">>> ")?;
    line(&mut p, "/exit")?;
    p.exp_eof()?;

    let session: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let messages = session["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[0]["content"], "Hello");
    assert_eq!(messages[2]["content"], "first line\nsecond line");
    assert_eq!(messages[4]["content"], "one \ntwo");
    assert_eq!(session["system"], "You are terse.");
    let history = std::fs::read_to_string(home.home().join("history")).unwrap();
    assert!(
        history.contains("/think off") && history.contains("Hello"),
        "{history}"
    );

    // A new session has the history: Up recalls the last line (/exit), which leaves.
    let mut cmd = home.cmd(&["chat", &model]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string(">>> ")?;
    p.send("\x1b[A")?;
    p.flush()?;
    p.exp_string("/exit")?;
    p.send("\r")?;
    p.flush()?;
    p.exp_eof()?;

    // Ctrl-D leaves.
    let mut cmd = home.cmd(&["chat", &model]);
    cmd.env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(60_000))?;
    p.exp_string(">>> ")?;
    p.send_control('d')?;
    p.exp_eof()?;
    Ok(())
}
