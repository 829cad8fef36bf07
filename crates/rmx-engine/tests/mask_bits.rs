//! The GPU's form of a constrained answer's mask — bits expanded on the device, the last
//! array reused while the grammar allows the same ids — gives the answers the CPU's row of
//! bools gives. Run here on the CPU backend with `RMX_MASK_ROW` choosing the form; one test in
//! this binary, since the setting is the process's environment.
#![allow(clippy::unwrap_used)] // tests panic on failure by design

use rmx_engine::{Constraint, Engine, Event, GenerateRequest};
use rmx_tests::models;

fn answer(e: &Engine, c: &Constraint, seed: u64) -> Vec<u32> {
    let mut req = GenerateRequest::new(e.raw_tokens("Reply with a JSON object:").unwrap(), 48);
    req.sampling.temperature = 1.0;
    req.sampling.seed = Some(seed);
    req.constraint = Some(e.constrain(c).unwrap());
    let mut rx = e.generate(req).unwrap();
    let mut ids = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => ids.push(id),
            Event::Done { .. } => return ids,
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

#[test]
fn bits_and_bools_give_the_same_constrained_answers() {
    let e = Engine::load(&models::model("qwen3", "bf16")).unwrap();
    let schema = serde_json::json!({"type": "object", "required": ["name", "tags"],
        "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
        "additionalProperties": false});
    let shapes = [Constraint::json_object(), Constraint::json_schema(schema)];
    let run = |form: &str| {
        std::env::set_var("RMX_MASK_ROW", form);
        let out: Vec<Vec<u32>> = shapes
            .iter()
            .zip([1, 0])
            .map(|(c, seed)| answer(&e, c, seed))
            .collect();
        std::env::remove_var("RMX_MASK_ROW");
        out
    };
    let bools = run("bools");
    let bits = run("bits");
    assert_eq!(bits, bools);
    // Long enough to have steps with the same mask in a row (inside strings).
    assert!(bools.iter().all(|ids| ids.len() > 8), "{bools:?}");
}
