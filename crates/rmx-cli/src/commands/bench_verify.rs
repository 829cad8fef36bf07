//! `rmx bench --verify-cost K,..`: what one speculative verify step of K drafted tokens costs
//! against a plain decode step, on this machine and model, and what that makes of prompt
//! lookup at a few acceptance rates (rmx-engine verify_cost.rs).

use std::process::ExitCode;

use anyhow::{bail, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use rmx_engine::verify_cost::{tokens_per_step, VerifyCost};
use rmx_engine::Engine;
use serde_json::json;

use crate::cli::BenchArgs;

/// Acceptance rates the table reads the speedup at.
const RATES: [f64; 3] = [0.5, 0.7, 0.9];

pub fn run(engine: &Engine, args: &BenchArgs, split: bool) -> Result<ExitCode> {
    if split {
        bail!("--verify-cost times a model in one process; run it without rmx launch");
    }
    if args.submit || !args.streams.is_empty() || args.json_schema.is_some() {
        bail!("--verify-cost is a measurement of its own; leave out --submit, --streams and --json-schema");
    }
    if args.verify_cost.iter().any(|k| *k == 0 || *k > 64) {
        bail!("--verify-cost takes drafted-token counts from 1 to 64, e.g. 1,2,4,8");
    }
    let prompt = args.prompt_tokens.first().copied().unwrap_or(512);
    let costs = engine.verify_cost(prompt, &args.verify_cost, args.rounds)?;
    let plain = &costs[0];
    if args.json {
        let rows: Vec<_> = costs
            .iter()
            .map(|c| {
                json!({
                    "drafted": c.drafted,
                    "step_ms": c.step_ms,
                    "relative_to_plain": c.break_even_tokens(plain),
                })
            })
            .collect();
        let record = json!({
            "model": args.model.display().to_string(),
            "prompt_tokens": prompt,
            "rounds": args.rounds,
            "verify_cost": rows,
        });
        println!("{}", serde_json::to_string_pretty(&record)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", table(&costs));
    println!(
        "A step over a {prompt}-token cache, median of {} rounds. Speedup at acceptance a: \
         (1 + a + ... + a^k) tokens a step for step(k)/step(0) of the time.",
        args.rounds
    );
    Ok(ExitCode::SUCCESS)
}

fn table(costs: &[VerifyCost]) -> Table {
    let plain = &costs[0];
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec![
        "drafted k".to_string(),
        "step ms".to_string(),
        "× plain step".to_string(),
    ];
    header.extend(RATES.iter().map(|a| format!("speedup at a={a}")));
    t.set_header(header);
    for c in costs {
        let rel = c.break_even_tokens(plain);
        let mut row = vec![
            if c.drafted == 0 {
                "0 (plain decode)".to_string()
            } else {
                c.drafted.to_string()
            },
            format!("{:.3} ±{:.0}%", c.step_ms.median, c.step_ms.spread_pct()),
            format!("{rel:.2}"),
        ];
        row.extend(
            RATES
                .iter()
                .map(|a| format!("{:.2}×", tokens_per_step(c.drafted, *a) / rel)),
        );
        t.add_row(row);
    }
    t
}
