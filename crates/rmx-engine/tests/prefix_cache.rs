//! The prefix cache on real tiny models (f32): an agent's next turn — the last prompt, the
//! answer, and a new message — reuses what the engine read before, reports it as cached
//! tokens, and gives the tokens a cold read of the whole prompt gives. A dense model's cache is
//! cut back to the common prefix; a hybrid's (DeltaNet state) is restored from the copy taken
//! where the first prompt's prefill ended.
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use rmx_engine::{Engine, Event, GenerateRequest, Usage};

const TURN: &str = "In the beginning of the long winter the villagers gathered wood, salted fish \
    and mended the nets, while the children counted the geese that flew south.";
const NEXT: &str = " Then the snow came and stayed until the spring.";

fn run(engine: &Engine, prompt: Vec<u32>, cold: bool) -> (Vec<u32>, Usage) {
    let mut req = GenerateRequest::new(prompt, 12);
    req.ignore_eos = true;
    req.no_prefix_cache = cold;
    let mut rx = engine.generate(req).unwrap();
    let mut tokens = vec![];
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => tokens.push(id),
            Event::Done { usage, .. } => return (tokens, usage),
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

/// Two turns; returns the second turn's cached tokens, after checking its tokens against a
/// cold read, and the first turn's prompt length.
fn agent_turns(family: &str) -> (usize, usize) {
    let engine = Engine::load(&models::model(family, "f32")).unwrap();
    let first = engine.raw_tokens(TURN).unwrap();
    let (answer, usage) = run(&engine, first.clone(), false);
    assert_eq!(usage.cached_tokens, 0, "{family}: nothing was cached yet");
    let mut second = first.clone();
    second.extend(&answer);
    second.extend(engine.tokenizer().encode(NEXT, false).unwrap());
    let (warm, usage) = run(&engine, second.clone(), false);
    let (cold, cold_usage) = run(&engine, second.clone(), true);
    assert_eq!(
        cold_usage.cached_tokens, 0,
        "{family}: no_prefix_cache reads it all"
    );
    assert_eq!(warm, cold, "{family}: the cached prefix changed the answer");
    assert_eq!(usage.prompt_tokens, second.len());
    (usage.cached_tokens, first.len())
}

#[test]
fn a_dense_models_next_turn_reuses_the_last_prompt_and_answer() {
    let (cached, first) = agent_turns("qwen3");
    // The first turn's cache read its prompt and all but the last answer token (read only
    // when the next step is queued): at least the whole prompt is reused.
    assert!(
        cached >= first,
        "cached {cached} of a first prompt of {first}"
    );
}

#[test]
fn a_hybrid_models_next_turn_restores_the_state_where_the_last_prompt_ended() {
    let (cached, first) = agent_turns("qwen3_5");
    // The DeltaNet state cannot be cut back: the copy at the first prompt's end (all but its
    // last token, which the first decode step reads) serves, or the end of the whole turn.
    assert!(
        cached >= first - 1,
        "cached {cached} of a first prompt of {first}"
    );
}

/// A long system prompt that a second request reuses (so it is hot), then a new engine on the
/// same prefix folder (a restarted daemon). `agent`: the second request carries the first
/// answer as an agent's next turn does, so its own cache extends, and replaces, the hot one.
fn restart_turns(family: &str, corrupt: bool, agent: bool) -> (usize, usize, bool) {
    let dir = tempfile::tempdir().unwrap();
    let options = || rmx_engine::EngineOptions {
        prefix_dir: Some(dir.path().to_path_buf()),
        ..rmx_engine::EngineOptions::from_env()
    };
    let model = models::model(family, "f32");
    let system = TURN.repeat(4);
    let (first, second) = {
        let engine = Engine::load_with(&model, options()).unwrap();
        let first = engine.raw_tokens(&system).unwrap();
        let (answer, _) = run(&engine, first.clone(), false);
        let mut again = first.clone();
        if agent {
            again.extend(&answer);
        }
        again.extend(engine.tokenizer().encode(NEXT, false).unwrap());
        let (_, usage) = run(&engine, again.clone(), false);
        assert!(usage.cached_tokens > 0, "{family}: the second request hit");
        (first, again)
    };
    let files: Vec<_> = walk(dir.path());
    assert!(!files.is_empty(), "{family}: the hot prefix was written");
    // Each file under its final name, renamed into the model's folder: nothing left half-way.
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert!(!name.contains(".tmp"), "{family}: {f:?} was never renamed");
        assert_ne!(f.parent().unwrap().file_name().unwrap(), "writing", "{f:?}");
    }
    if corrupt {
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            std::fs::write(f, &bytes[..bytes.len() / 2]).unwrap();
        }
    }
    let engine = Engine::load_with(&model, options()).unwrap();
    // The next turn goes on from the last prompt (an agent's) or from the system prompt.
    let mut next = if agent { second } else { first.clone() };
    next.extend(engine.tokenizer().encode(" And then?", false).unwrap());
    let (warm, usage) = run(&engine, next.clone(), false);
    let (cold, _) = run(&engine, next, true);
    (usage.cached_tokens, first.len(), warm == cold)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else if e.path().extension().is_some_and(|x| x == "safetensors") {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_restarted_engine_reads_a_hot_prefix_from_disk() {
    for family in ["qwen3", "qwen3_5"] {
        for agent in [false, true] {
            let (cached, first, same) = restart_turns(family, false, agent);
            assert!(
                cached + 1 >= first,
                "{family} (agent {agent}): cached {cached} of a {first}-token prefix after the \
                 restart"
            );
            assert!(same, "{family}: the prefix from disk changed the answer");
        }
    }
}

#[test]
fn a_cut_short_prefix_file_is_ignored_and_the_prompt_read_again() {
    let (cached, _, same) = restart_turns("qwen3", true, false);
    assert_eq!(cached, 0);
    assert!(same);
}
