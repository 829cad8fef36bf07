//! `rmx bench MODEL --image-cost [WxH]`: what one image costs a vision model before an answer's
//! first token, its processor on the host and its vision tower on the device
//! (rmx-engine image_cost.rs).

use std::process::ExitCode;

use anyhow::{bail, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use rmx_engine::Engine;
use serde_json::json;

use crate::cli::BenchArgs;

/// `rmx bench MODEL --image-cost [WxH]`.
pub fn run(engine: &Engine, args: &BenchArgs, size: &str) -> Result<ExitCode> {
    if args.submit || !args.streams.is_empty() || args.json_schema.is_some() {
        bail!("--image-cost is a measurement of its own; leave out --submit, --streams and --json-schema");
    }
    let Some((w, h)) = size
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .filter(|&(w, h)| (1..=8192).contains(&w) && (1..=8192).contains(&h))
    else {
        bail!("--image-cost takes the test image's size as WxH, 1 to 8192 a side (e.g. 1024x768)");
    };
    let image = rmx_engine::image_cost::test_image(w, h);
    let c = engine.image_cost(&image, args.warmup, args.rounds)?;
    if args.json {
        let record = json!({
            "model": args.model.display().to_string(),
            "rounds": args.rounds,
            "image_cost": c,
        });
        println!("{}", serde_json::to_string_pretty(&record)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "image",
        "processor (host) ms",
        "vision tower (device) ms",
        "placeholders",
    ]);
    t.add_row([
        format!(
            "{}x{} PNG -> {}x{}",
            c.width, c.height, c.pixels_width, c.pixels_height
        ),
        format!(
            "{:.2} ±{:.0}%",
            c.preprocess_ms.median,
            c.preprocess_ms.spread_pct()
        ),
        format!(
            "{:.2} ±{:.0}%",
            c.encode_ms.median,
            c.encode_ms.spread_pct()
        ),
        c.placeholders.to_string(),
    ]);
    println!("{t}");
    println!(
        "One image, median of {} rounds after {} warm-up: what each image adds before an \
         answer's first token, besides its {} placeholder tokens' prefill.",
        args.rounds, args.warmup, c.placeholders
    );
    Ok(ExitCode::SUCCESS)
}
