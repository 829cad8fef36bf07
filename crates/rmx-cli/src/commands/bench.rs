//! `rmx bench <model>`: the standardized single-user benchmark, as a table or a JSON record
//! with the hardware and versions, so numbers from different machines can be compared;
//! `--submit` offers that record to the community repository (see `bench_submit`). An embedding
//! model gets the embedding benchmark instead: inputs/s and tokens/s at batch 1 and 32.
//! `--json-schema FILE` adds constrained decoding's tok/s beside the free run's; `--streams N,..`
//! adds each case run as N sequences at once (aggregate tok/s, TTFT across the streams).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use rmx_engine::bench::{self, BenchCase, BenchConfig, EmbedCase, Stat};
use rmx_engine::{Constraint, Engine, EngineOptions, ModelKind};
use serde_json::json;

use crate::bench_submit::{self, Submission};
use crate::cli::BenchArgs;

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let mut cfg = BenchConfig {
        rounds: args.rounds,
        warmup: args.warmup,
        streams: args.streams.clone(),
        kv_quant: match args.kv.settings() {
            Some((bits, group, start)) => Some(rmx_engine::KvQuant::new(bits, group, start)?),
            None => None,
        },
        speculative: args.spec.speculation()?,
        ..BenchConfig::default()
    };
    if !args.prompt_tokens.is_empty() || !args.gen_tokens.is_empty() {
        let prompts = if args.prompt_tokens.is_empty() {
            vec![128, 512]
        } else {
            args.prompt_tokens.clone()
        };
        let gens = if args.gen_tokens.is_empty() {
            vec![128, 512]
        } else {
            args.gen_tokens.clone()
        };
        cfg.cases = prompts
            .iter()
            .flat_map(|&p| gens.iter().map(move |&g| (p, g)))
            .collect();
    }
    if cfg.rounds == 0
        || cfg.cases.iter().any(|&(p, g)| p == 0 || g == 0)
        || cfg.streams.contains(&0)
    {
        bail!("--rounds, --prompt-tokens, --gen-tokens and --streams must be at least 1");
    }
    if cfg.speculative.is_some() && args.submit {
        bail!("--submit takes the standard benchmark only; leave out --speculative");
    }
    if cfg.kv_quant.is_some() && args.submit {
        bail!("--submit takes the standard benchmark only; leave out --kv-bits");
    }
    if !cfg.streams.is_empty() && args.json_schema.is_some() {
        bail!("--streams measures free decoding only; leave out --json-schema");
    }
    if let Some(path) = &args.json_schema {
        if args.submit {
            bail!("--submit takes the standard benchmark only; leave out --json-schema");
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the JSON schema {}", path.display()))?;
        let schema = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        cfg.constraint = Some(Constraint::json_schema(schema));
    }
    // Under `rmx launch`, rank 0 of a group: the model is split over the ranks.
    let group = crate::commands::launch::lead()?;
    let engine = match &group {
        Some((lead, mode)) => lead.load(&args.model, *mode, EngineOptions::from_env()),
        None => Engine::load(&args.model),
    }
    .with_context(|| format!("loading {}", args.model.display()))?;
    let quiet = args.json || !std::io::stderr().is_terminal();
    match engine.kind() {
        ModelKind::Chat => {}
        ModelKind::Embedding => return run_embed(&engine, &args, quiet),
        ModelKind::Rerank => bail!(
            "{} is a reranker; rmx bench measures chat and embedding models",
            args.model.display()
        ),
    }
    if let Some(draft) = cfg.speculative.as_ref().and_then(|s| s.draft_model()) {
        engine
            .use_draft(draft)
            .with_context(|| format!("the draft model {}", draft.display()))?;
    }
    if !args.verify_cost.is_empty() {
        return super::bench_verify::run(&engine, &args, group.is_some());
    }
    if let Some(size) = &args.image_cost {
        return super::bench_image::run(&engine, &args, size);
    }
    let cases = bench::run(&engine, &cfg, |line| {
        if !quiet {
            eprintln!("  {line}");
        }
    })?;
    let ranks = group
        .as_ref()
        .map(|(lead, mode)| (lead.size(), mode.name(), lead.backend().name()));
    let record = record(&engine, &args, &cfg, &cases, ranks);
    if args.submit {
        // The record is shown once, as the exact text that would be sent.
        if !args.json {
            print_table(&engine, &cases, ranks);
        }
        let model = record["model"]["name"].as_str().unwrap_or("model");
        let sub = Submission::new(&record, &device_name(), model)?;
        return bench_submit::submit(&sub, args.yes, &crate::daemon::paths()?.home);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        print_table(&engine, &cases, ranks);
    }
    Ok(ExitCode::SUCCESS)
}

/// Batch sizes of the embedding benchmark: one input per request (a search query) and 32 (an
/// indexing job's chunk).
const EMBED_BATCHES: [usize; 2] = [1, 32];

fn run_embed(engine: &Engine, args: &BenchArgs, quiet: bool) -> Result<ExitCode> {
    if !args.streams.is_empty() {
        bail!(
            "--streams measures chat models; an embedding model's batch sizes are fixed (1 and 32)"
        );
    }
    if args.submit {
        bail!("--submit takes chat-model benchmarks only");
    }
    // Input lengths: --prompt-tokens, else 128 and 512 (cut to what the model takes).
    let limit = engine.embed_limit().unwrap_or(usize::MAX);
    let lens: Vec<usize> = if args.prompt_tokens.is_empty() {
        vec![128, 512]
    } else {
        args.prompt_tokens.clone()
    }
    .into_iter()
    .map(|n| n.min(limit))
    .collect();
    let cases = bench::run_embed(
        engine,
        &lens,
        &EMBED_BATCHES,
        args.rounds,
        args.warmup,
        |line| {
            if !quiet {
                eprintln!("  {line}");
            }
        },
    )?;
    if args.json {
        let info = engine.info();
        let record = json!({
            "rmx_version": env!("CARGO_PKG_VERSION"),
            "mlx_version": rmx_mlx::mlx_version(),
            "backend": rmx_mlx::backend().name(),
            "hardware": {"device": device_name(), "os": std::env::consts::OS, "arch": std::env::consts::ARCH},
            "model": {
                "name": args.model.file_name().map(|n| n.to_string_lossy().to_string()),
                "kind": "embedding",
                "model_type": info.model_type,
                "quant_bits": info.quant_bits,
                "layers": info.num_layers,
                "hidden_size": info.hidden_size,
            },
            "rounds": args.rounds,
            "warmup": args.warmup,
            "embedding_cases": cases,
        });
        println!("{}", serde_json::to_string_pretty(&record)?);
    } else {
        print_embed_table(engine, &cases);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_embed_table(engine: &Engine, cases: &[EmbedCase]) {
    let info = engine.info();
    println!(
        "{} ({} embedding, {}) on {} [{}], MLX {}",
        engine.dir().display(),
        info.model_type,
        info.quant_bits
            .map_or("unquantized".to_string(), |b| format!("{b}-bit")),
        device_name(),
        rmx_mlx::backend().name(),
        rmx_mlx::mlx_version()
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "BATCH",
        "TOKENS",
        "INPUTS/s",
        "TOKENS/s",
        "LATENCY ms",
        "PEAK MEM",
    ]);
    for c in cases {
        t.add_row([
            c.batch.to_string(),
            c.input_tokens.to_string(),
            spread(&c.inputs_per_s),
            format!("{:.0}", c.tokens_per_s.median),
            format!("{:.1}", c.latency_ms.median),
            format!("{:.1} MB", c.peak_memory_bytes as f64 / 1e6),
        ]);
    }
    println!("{t}");
}

/// A measure's median and half its range: "412.2 ±3%".
fn spread(s: &Stat) -> String {
    format!("{:.1} ±{:.0}%", s.median, s.spread_pct())
}

fn device_name() -> String {
    let ty = if rmx_mlx::gpu_available() {
        rmx_mlx::DeviceType::Gpu
    } else {
        rmx_mlx::DeviceType::Cpu
    };
    rmx_mlx::device_info_json(ty)
        .ok()
        .and_then(|j| serde_json::from_str::<serde_json::Value>(&j).ok())
        .and_then(|v| {
            v.get("device_name")
                .and_then(|n| n.as_str())
                .map(String::from)
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn record(
    engine: &Engine,
    args: &crate::cli::BenchArgs,
    cfg: &BenchConfig,
    cases: &[BenchCase],
    ranks: Option<(i32, &str, &str)>,
) -> serde_json::Value {
    let info = engine.info();
    json!({
        "rmx_version": env!("CARGO_PKG_VERSION"),
        "mlx_version": rmx_mlx::mlx_version(),
        "backend": rmx_mlx::backend().name(),
        "hardware": {
            "device": device_name(),
            "memory_bytes": super::info::memory().map(|(total, _)| total),
            "os": std::env::consts::OS,
            "arch": std::env::consts::ARCH,
        },
        "model": {
            "name": args.model.file_name().map(|n| n.to_string_lossy().to_string()),
            "model_type": info.model_type,
            "quant_bits": info.quant_bits,
            "layers": info.num_layers,
            "hidden_size": info.hidden_size,
        },
        // Under `rmx launch`: the model split over this many ranks, and how.
        "parallel": ranks.map(|(n, mode, backend)| json!({
            "ranks": n,
            "mode": mode,
            "backend": backend,
        })),
        "rounds": cfg.rounds,
        "warmup": cfg.warmup,
        "json_schema": args.json_schema.as_ref().map(|p| p.display().to_string()),
        // `--kv-bits`: the KV cache stored quantized (numbers not comparable with a plain one).
        "kv_cache": cfg.kv_quant.map(|q| json!({
            "bits": q.bits,
            "group_size": q.group_size,
            "start": q.start,
        })),
        "speculative": cfg.speculative,
        "cases": cases,
    })
}

fn print_table(engine: &Engine, cases: &[BenchCase], ranks: Option<(i32, &str, &str)>) {
    let info = engine.info();
    println!(
        "{} ({}, {}) on {} [{}], MLX {}{}",
        engine.dir().display(),
        info.model_type,
        info.quant_bits
            .map_or("unquantized".to_string(), |b| format!("{b}-bit")),
        device_name(),
        rmx_mlx::backend().name(),
        rmx_mlx::mlx_version(),
        ranks.map_or(String::new(), |(n, mode, _)| format!(
            ", split over {n} ranks ({mode})"
        ))
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let constrained = cases.iter().any(|c| c.constrained.is_some());
    let mut header = vec![
        "PROMPT",
        "GEN",
        "PREFILL tok/s",
        "DECODE tok/s",
        "TTFT ms",
        "PEAK MEM",
    ];
    if constrained {
        header.extend(["DECODE w/ SCHEMA", "RATIO"]);
    }
    let speculative = cases.iter().any(|c| c.speculative.is_some());
    if speculative {
        header.push("GUESSES ACCEPTED");
    }
    t.set_header(header);
    for c in cases {
        let mut row = vec![
            c.prompt_tokens.to_string(),
            c.gen_tokens.to_string(),
            spread(&c.prefill_tps),
            spread(&c.decode_tps),
            format!("{:.1}", c.ttft_ms.median),
            format!("{:.1} MB", c.peak_memory_bytes as f64 / 1e6),
        ];
        if let Some(s) = &c.constrained {
            row.push(format!(
                "{} ({:.0} tok)",
                spread(&s.decode_tps),
                s.gen_tokens.median
            ));
            row.push(format!("{:.3}", s.decode_ratio));
        }
        if let Some(d) = &c.speculative {
            let rate = 100.0 * d.accepted as f64 / d.drafted.max(1) as f64;
            row.push(format!("{} of {} ({rate:.0}%)", d.accepted, d.drafted));
        }
        t.add_row(row);
    }
    println!("{t}");
    if cases.iter().any(|c| !c.concurrent.is_empty()) {
        print_streams_table(cases);
    }
}

fn print_streams_table(cases: &[BenchCase]) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "PROMPT",
        "GEN",
        "STREAMS",
        "AGGREGATE tok/s",
        "AGG. DECODE tok/s",
        "TTFT ms median / p95",
        "PER STREAM tok/s",
    ]);
    for c in cases {
        for s in &c.concurrent {
            t.add_row([
                c.prompt_tokens.to_string(),
                c.gen_tokens.to_string(),
                s.streams.to_string(),
                spread(&s.aggregate_tps),
                format!("{:.1}", s.aggregate_decode_tps.median),
                format!(
                    "{:.0} / {:.0}",
                    s.ttft_median_ms.median, s.ttft_p95_ms.median
                ),
                format!("{:.1}", s.per_stream_decode_tps.median),
            ]);
        }
    }
    println!("{t}");
}
