//! Constrained decoding: which token ids may come next so the output keeps a shape. The
//! shapes are JSON Schema (`response_format`, Ollama's `format`), JSON mode, regular
//! expressions, Lark grammars, a choice of strings, and tool calls in the model's markup with
//! each tool's parameters schema; llguidance enforces them all.
//!
//! A [`Constraint`] is what a request asks for (plain data). A [`Compiler`], built once per
//! model from its [`Vocabulary`], turns it into a [`Compiled`] grammar, which is where a bad
//! schema or grammar is refused ([`ConstraintError::Invalid`], the API's 400). Each sequence
//! then drives a [`ConstraintState`]: the mask of ids allowed next, the id chosen, until the
//! shape is whole ([`ConstraintState::is_complete`]) and the generation ends.
//!
//! The output is also kept finishable: when the tokens left come close to what the shortest
//! completion needs (`finish`), that completion is forced, so an answer under `max_tokens`
//! ends as a whole JSON value rather than cut mid-string.

mod finish;
mod grammar;
mod state;
mod vocabulary;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use llguidance::api::ParserLimits;
use llguidance::{ParserFactory, TokenParser};
use serde_json::Value;

use crate::toolcall::ToolCallFormat;
pub use state::ConstraintState;
pub use vocabulary::Vocabulary;

/// What shape the output must take.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// One JSON object (JSON mode).
    JsonObject,
    /// One JSON value valid against this JSON Schema (draft 2020-12; local `$ref`s).
    JsonSchema(Value),
    /// Text matched whole by this regular expression (Rust `regex` syntax).
    Regex(String),
    /// Text in this grammar, in llguidance's Lark dialect (`%json {...}` embeds a schema).
    Lark(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// Tool calls in the model's markup, each naming one of `tools` with arguments that
    /// follow its parameters schema.
    ToolCall {
        format: ToolCallFormat,
        tools: Vec<Tool>,
        mode: ToolMode,
    },
}

/// A tool a call may name.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    /// The JSON schema of its arguments; None: any JSON object.
    pub parameters: Option<Value>,
}

/// How tool calls are constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMode {
    /// The output is one call and nothing else (`tool_choice` `required` or a named tool).
    Forced,
    /// The output is text, and any call the text opens must be a whole call of an allowed
    /// tool with valid arguments (`tool_choice` `auto` with strict tools).
    Auto,
}

/// Whether the model may think (in `<think>...</think>`, unconstrained) before the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Think {
    /// The output starts at once.
    #[default]
    No,
    /// The prompt ends inside `<think>`: free text until `</think>`, then the output.
    Inside,
    /// The model may open `<think>` with its first token.
    MayOpen,
}

/// A request's constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub output: Output,
    pub think: Think,
}

/// A constraint that cannot be built or followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// The schema or grammar is not one llguidance can enforce: the caller's to fix.
    #[error("{0}")]
    Invalid(String),
    #[error("forcing a tool call is not supported for the `{}` tool-call format (supported: hermes, llama3_json)", .0.name())]
    UnsupportedFormat(ToolCallFormat),
    #[error("a tool call needs at least one tool")]
    NoTools,
    /// No token of the vocabulary can continue the output (or llguidance failed).
    #[error("the constrained output cannot go on: {0}")]
    Stuck(String),
}

impl ConstraintError {
    /// Whether the request is at fault (a 400), rather than the generation.
    pub fn is_invalid_request(&self) -> bool {
        !matches!(self, ConstraintError::Stuck(_))
    }
}

impl Constraint {
    fn new(output: Output) -> Constraint {
        Constraint {
            output,
            think: Think::No,
        }
    }

    pub fn json_object() -> Constraint {
        Constraint::new(Output::JsonObject)
    }

    pub fn json_schema(schema: Value) -> Constraint {
        Constraint::new(Output::JsonSchema(schema))
    }

    pub fn regex(regex: impl Into<String>) -> Constraint {
        Constraint::new(Output::Regex(regex.into()))
    }

    pub fn lark(grammar: impl Into<String>) -> Constraint {
        Constraint::new(Output::Lark(grammar.into()))
    }

    pub fn choice(choices: Vec<String>) -> Constraint {
        Constraint::new(Output::Choice(choices))
    }

    /// Exactly one call of one of `tools`.
    pub fn tool_call(format: ToolCallFormat, tools: Vec<Tool>) -> Constraint {
        Constraint::new(Output::ToolCall {
            format,
            tools,
            mode: ToolMode::Forced,
        })
    }

    /// Free text in which every call is a valid call of one of `tools`.
    pub fn tool_calls_in_text(format: ToolCallFormat, tools: Vec<Tool>) -> Constraint {
        Constraint::new(Output::ToolCall {
            format,
            tools,
            mode: ToolMode::Auto,
        })
    }

    pub fn with_think(mut self, think: Think) -> Constraint {
        self.think = think;
        self
    }
}

impl Tool {
    pub fn new(name: impl Into<String>, parameters: Option<Value>) -> Tool {
        Tool {
            name: name.into(),
            parameters,
        }
    }
}

/// Compiles constraints against one model's vocabulary. Building it indexes the vocabulary
/// (a fraction of a second for 150K tokens), so an engine builds one, on the first request
/// that needs it, and shares it across threads.
pub struct Compiler {
    factory: ParserFactory,
    tables: Arc<finish::Tables>,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("width", &self.width())
            .finish_non_exhaustive()
    }
}

impl Compiler {
    pub fn new(vocab: Vocabulary) -> Result<Compiler, ConstraintError> {
        let env = vocab.into_env();
        let mut factory = ParserFactory::new_simple(&env).map_err(invalid)?;
        factory.quiet();
        // Errors go back to API callers: the message, not llguidance's dump of its state.
        *factory.limits_mut() = ParserLimits {
            verbose_errors: false,
            ..ParserLimits::default()
        };
        let tables = Arc::new(finish::Tables::new(factory.tok_env().tok_trie()));
        Ok(Compiler { factory, tables })
    }

    /// How many ids a mask covers.
    pub fn width(&self) -> usize {
        self.factory.tok_env().tok_trie().vocab_size()
    }

    /// The grammar for `c`, or why it cannot be enforced.
    pub fn compile(&self, c: &Constraint) -> Result<Compiled, ConstraintError> {
        let trie = self.factory.tok_env().tok_trie();
        let top = grammar::build(c, trie)?;
        let parser = guarded(|| {
            let mut p = self.factory.create_parser(top)?;
            p.start_without_prompt();
            Ok(p)
        })
        .map_err(|e| match &c.output {
            Output::ToolCall { tools, .. } if tools.len() > 1 => self.which_tool(c, tools, e),
            _ => invalid(e),
        })?;
        // Where the model may open a thought, the search for a completion must not go into
        // one (a thought is any text: a depth-first walk there never ends), so it walks the
        // shape alone while the output can still be the shape alone.
        let shape_only = match c.think {
            Think::MayOpen => Some(
                self.compile(&Constraint {
                    output: c.output.clone(),
                    think: Think::No,
                })?
                .parser,
            ),
            _ => None,
        };
        Ok(Compiled {
            parser,
            shape_only,
            tables: self.tables.clone(),
            think: c.think,
        })
    }

    /// An error in a grammar of several tools, with the tool whose schema causes it named.
    fn which_tool(&self, c: &Constraint, tools: &[Tool], e: anyhow::Error) -> ConstraintError {
        let Output::ToolCall { format, mode, .. } = &c.output else {
            return invalid(e);
        };
        for tool in tools {
            let one = Constraint {
                output: Output::ToolCall {
                    format: *format,
                    tools: vec![tool.clone()],
                    mode: *mode,
                },
                think: c.think,
            };
            if let Err(ConstraintError::Invalid(why)) = self.compile(&one) {
                return ConstraintError::Invalid(format!(
                    "the parameters of tool `{}`: {why}",
                    tool.name
                ));
            }
        }
        invalid(e)
    }
}

/// A compiled constraint: each sequence that follows it starts from a copy.
#[derive(Clone)]
pub struct Compiled {
    parser: TokenParser,
    tables: Arc<finish::Tables>,
    /// For [`Think::MayOpen`]: the grammar of the shape with no thought before it.
    shape_only: Option<TokenParser>,
    think: Think,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("think", &self.think)
            .finish_non_exhaustive()
    }
}

fn invalid(e: anyhow::Error) -> ConstraintError {
    ConstraintError::Invalid(e.to_string())
}

/// Runs llguidance code with its panics turned into errors: a bug there must fail one
/// request, not the engine thread every other request runs on.
fn guarded<R>(f: impl FnOnce() -> anyhow::Result<R>) -> anyhow::Result<R> {
    llguidance::panic_utils::catch_unwind(AssertUnwindSafe(f))
}

#[cfg(test)]
mod tests;
