//! `rmx embed <model> [text]...`: vectors from an embedding model, one JSON array per input per
//! line, through the daemon's `/v1/embeddings`. Without texts, standard input's lines are the
//! inputs.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_api::openai::{EmbeddingInput, EmbeddingRequest};

use crate::cli::EmbedArgs;
use crate::daemon;

pub fn run(args: EmbedArgs) -> Result<ExitCode> {
    let texts = if args.texts.is_empty() {
        if std::io::stdin().is_terminal() {
            bail!("nothing to embed: pass texts as arguments, or pipe them in one per line");
        }
        read_lines(std::io::stdin().lock())?
    } else {
        args.texts
    };
    if texts.is_empty() {
        bail!("nothing to embed: standard input had no non-empty line");
    }
    let req = EmbeddingRequest {
        model: args.model,
        input: EmbeddingInput::Texts(texts),
        encoding_format: None,
        dimensions: args.dimensions.map(|d| d as usize),
        prompt_name: args.prompt_name,
        input_type: args.query.then(|| "query".to_string()),
        user: None,
    };
    let answer = daemon::runtime()?.block_on(async {
        let client = daemon::connect().await?;
        client.embeddings(&req).await.map_err(daemon::broken_off)
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&answer)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    for item in &answer.data {
        let values = item
            .embedding
            .values()
            .context("the daemon sent a vector rmx cannot read")?;
        writeln!(out, "{}", serde_json::to_string(&values)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Each non-empty line is one input (a blank line would be an empty input, which no model
/// embeds); a trailing `\r` goes too.
fn read_lines(input: impl BufRead) -> Result<Vec<String>> {
    let mut texts = Vec::new();
    for line in input.lines() {
        let line = line.context("reading the texts from standard input")?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if !line.trim().is_empty() {
            texts.push(line.to_string());
        }
    }
    Ok(texts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_non_empty_line_is_an_input() {
        let lines = read_lines("first\r\n\n  \nsecond one\n".as_bytes()).expect("lines");
        assert_eq!(lines, vec!["first", "second one"]);
    }
}
