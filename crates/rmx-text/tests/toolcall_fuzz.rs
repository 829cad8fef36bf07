//! Random outputs stitched from markers, JSON and text pieces: whatever the model writes, the
//! parser must not panic, streaming must agree with whole-text parsing, and an output in which
//! no call was found must come back as content unchanged.

mod toolcall_support;

use rmx_text::toolcall::{collect_events, ToolCallFormat};
use toolcall_support::run_pieces;

const PIECES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<tool_",
    "call>",
    "<function=f>",
    "<parameter=p>",
    "</parameter>",
    "</function>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "```tool_code\n",
    "<|tool_call>",
    "<tool_call|>",
    "call:f",
    "<|\"|>",
    "```",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "\"",
    "'",
    "\\",
    ":",
    ",",
    ";",
    "=",
    "\n",
    " ",
    "\t",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
    "\"name\"",
    "\"parameters\"",
    "name",
    "get_weather",
    "f(a=1)",
    "True",
    "null",
    "12",
    "-3.5e2",
    "é",
    "😀",
    "Paris",
    "ok.",
];

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

fn random_text(rng: &mut Lcg) -> String {
    let len = 1 + rng.next(14);
    (0..len).map(|_| PIECES[rng.next(PIECES.len())]).collect()
}

fn random_pieces<'t>(rng: &mut Lcg, text: &'t str) -> Vec<&'t str> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let mut cuts = vec![0];
    let mut i = 0;
    while i + 1 < bounds.len() {
        i = (i + 1 + rng.next(6)).min(bounds.len() - 1);
        cuts.push(bounds[i]);
    }
    cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

#[test]
fn random_outputs_stream_consistently_and_lose_nothing() {
    let mut rng = Lcg(0x5eed);
    for round in 0..4000 {
        let text = random_text(&mut rng);
        for format in ToolCallFormat::ALL {
            let whole = collect_events(&run_pieces(format, &[], &[&text]));
            let chars: Vec<&str> = text
                .char_indices()
                .map(|(i, c)| &text[i..i + c.len_utf8()])
                .collect();
            let by_char = collect_events(&run_pieces(format, &[], &chars));
            assert_eq!(
                by_char, whole,
                "round {round} {format:?} char by char: {text:?}"
            );
            let pieces = random_pieces(&mut rng, &text);
            let split = collect_events(&run_pieces(format, &[], &pieces));
            assert_eq!(split, whole, "round {round} {format:?} {pieces:?}");
            if whole.1.is_empty() {
                assert_eq!(whole.0, text, "round {round} {format:?}: text lost");
            }
            for call in &whole.1 {
                assert!(
                    !call.name.is_empty(),
                    "round {round} {format:?}: empty name from {text:?}"
                );
            }
        }
    }
}

/// A file written through a tool call is tens of kilobytes; each delta must cost time for
/// itself only, not for the call so far (a rescan per delta took seconds here).
#[test]
fn long_calls_stream_in_linear_time() {
    let file: String = (0..4000)
        .map(|i| format!("line {i}: {{\"k\": [{i}]}}\n"))
        .collect();
    let quoted = serde_json::to_string(&file).expect("string to JSON");
    let cases = [
        (
            ToolCallFormat::Qwen3Coder,
            format!("<tool_call>\n<function=write_file>\n<parameter=content>\n{file}</parameter>\n</function>\n</tool_call>"),
        ),
        (
            ToolCallFormat::Hermes,
            format!("<tool_call>\n{{\"name\": \"write_file\", \"arguments\": {{\"content\": {quoted}}}}}\n</tool_call>"),
        ),
        (ToolCallFormat::Mistral, format!("[TOOL_CALLS]write_file[ARGS]{{\"content\": {quoted}}}")),
        (ToolCallFormat::Llama3Json, format!("{{\"name\": \"write_file\", \"parameters\": {{\"content\": {quoted}}}}}")),
    ];
    for (format, text) in cases {
        let pieces: Vec<&str> = text
            .char_indices()
            .step_by(4)
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| &text[w[0]..w[1]])
            .collect();
        let started = std::time::Instant::now();
        let (content, calls) = collect_events(&run_pieces(format, &[], &pieces));
        let took = started.elapsed();
        assert_eq!(content, "", "{format:?}");
        let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).expect("JSON");
        // Qwen3-Coder's value sits on lines of its own; the last newline is the layout's.
        let want = match format {
            ToolCallFormat::Qwen3Coder => file.strip_suffix('\n').expect("ends with a newline"),
            _ => file.as_str(),
        };
        assert_eq!(args["content"].as_str(), Some(want), "{format:?}");
        assert!(
            took.as_secs_f64() < 5.0,
            "{format:?}: {} pieces took {took:?}",
            pieces.len()
        );
    }
}
