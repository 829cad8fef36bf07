//! Bounds on what one render of a chat template may cost (issue #20, "Hostile chat templates").
//!
//! A template comes with whatever model repo was pulled, so it is untrusted code. minijinja
//! bounds instructions (fuel) and nesting (recursion limit), and the output is written through
//! a counting writer. What neither bounds is a string or list built in memory and never
//! printed: `{% set s = s ~ s %}` forty times is one instruction each and a terabyte. minijinja
//! has no hook on `~`, so before compiling, every `{% set %}` (and `{% endset %}`) is followed
//! by a guard that measures what was just assigned; growth is caught one assignment past the
//! cap.
//!
//! The limits are far above any real template: the largest case in the tests (Qwen3 with 30
//! tool schemas and a 15K-token agent session, `tests/template_limits.rs`) takes about 13K
//! steps of fuel and 90 KB of output, hundreds of times less than the bounds below.

use std::io;

use minijinja::machinery::{ast, parse};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Rest, StringInput, Value};
use minijinja::{Error, ErrorKind};

/// VM instructions per render (a loop iteration is a few). A 15K-token agent prompt with 30
/// tools costs about 13K; 10M is a few seconds at most, even in a debug build.
pub const FUEL: u64 = 10_000_000;
/// minijinja's nesting counter (a macro call counts about 10, an `if` or `for` 1); its own
/// ceiling without the `stacker` feature is 500. Real templates nest a handful of levels.
pub const RECURSION: usize = 200;
/// Bytes of rendered prompt: about 4M tokens, past every model's context.
pub const OUTPUT_BYTES: usize = 16 << 20;
/// Bytes of one string a template assigns, or items of one list or map.
pub const VALUE_SIZE: usize = 16 << 20;

/// Which limit a render ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Fuel,
    Recursion,
    Output,
    ValueSize,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Fuel => write!(f, "{FUEL} steps"),
            Limit::Recursion => write!(f, "a nesting depth of {RECURSION}"),
            Limit::Output => write!(f, "{} MiB of output", OUTPUT_BYTES >> 20),
            Limit::ValueSize => write!(f, "{} MiB in one variable", VALUE_SIZE >> 20),
        }
    }
}

/// The guard's name in the rewritten source; no real template uses it.
pub(super) const GUARD: &str = "__rmx_limit_guard";
const GUARD_ERROR: &str = "rmx-limit: value size";

/// The function the guards call: fails when any value passed is over [`VALUE_SIZE`].
pub(super) fn guard(values: Rest<Value>) -> Result<bool, Error> {
    for value in values.iter() {
        let size = match value.as_str() {
            Some(s) => s.len(),
            None => value.len().unwrap_or(0),
        };
        if size > VALUE_SIZE {
            return Err(Error::new(ErrorKind::InvalidOperation, GUARD_ERROR));
        }
    }
    Ok(false)
}

/// minijinja's `indent`, with a width over [`VALUE_SIZE`] refused: the filter builds its
/// `" ".repeat(width)` before anything else, so `'x'|indent(10**10)` would ask for 10 GB in one
/// step, past what any guard after an assignment sees.
pub(super) fn indent(
    value: StringInput<'_>,
    width: Option<usize>,
    first: Option<bool>,
    blank: Option<bool>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let asked = match width {
        Some(w) => Some(w),
        None => kwargs.peek::<Option<usize>>("width")?,
    };
    if asked.is_some_and(|w| w > VALUE_SIZE) {
        return Err(Error::new(ErrorKind::InvalidOperation, GUARD_ERROR));
    }
    minijinja::filters::indent(value, width, first, blank, kwargs)
}

/// Which limit, if any, a render error is.
pub(super) fn limit_of(err: &Error) -> Option<Limit> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = current {
        if let Some(jinja) = err.downcast_ref::<Error>() {
            match (jinja.kind(), jinja.detail()) {
                (ErrorKind::OutOfFuel, _) => return Some(Limit::Fuel),
                (_, Some("recursion limit exceeded")) => return Some(Limit::Recursion),
                (_, Some(GUARD_ERROR)) => return Some(Limit::ValueSize),
                _ => {}
            }
        }
        current = err.source();
    }
    None
}

/// `source` with a guard after each assignment. A source that does not parse is returned as
/// it is: compiling it reports the error with the template's own positions.
///
/// The guard is a block tag, `{% if guard(x) %}{% endif %}`, right after the assignment's
/// `%}`, so `trim_blocks` eats the newline after it as it did after the `{% set %}`, and a
/// `-%}` or `+%}` is carried over to the guard's end.
pub(super) fn guard_assignments(source: &str, syntax: SyntaxConfig) -> String {
    let Ok(tree) = parse(source, "chat_template", syntax) else {
        return source.to_string();
    };
    let mut inserts: Vec<(usize, String)> = Vec::new();
    collect(&tree, &mut inserts);
    inserts.sort_by_key(|(at, _)| *at);
    let mut out = String::with_capacity(source.len() + inserts.len() * 64);
    let mut done = 0;
    for (end, names) in inserts {
        // The statement's span ends at its expression (`set`) or at `endset`; the tag's
        // `%}` follows, maybe after a `-` or `+`.
        let Some(rest) = source.get(end..) else {
            continue;
        };
        let tail = rest.trim_start();
        let (trim, tail) = match tail.strip_prefix(['-', '+']) {
            Some(after) => (&tail[..1], after.trim_start()),
            None => ("", tail),
        };
        if end < done || !tail.starts_with("%}") {
            continue;
        }
        let at = source.len() - tail.len() + 2;
        out.push_str(&source[done..at]);
        out.push_str(&format!("{{% if {GUARD}({names}) %}}{{% endif {trim}%}}"));
        done = at;
    }
    out.push_str(&source[done..]);
    out
}

fn collect(stmt: &ast::Stmt<'_>, out: &mut Vec<(usize, String)>) {
    let all = |body: &[ast::Stmt<'_>], out: &mut Vec<(usize, String)>| {
        for s in body {
            collect(s, out);
        }
    };
    match stmt {
        ast::Stmt::Template(t) => all(&t.children, out),
        ast::Stmt::ForLoop(f) => {
            all(&f.body, out);
            all(&f.else_body, out);
        }
        ast::Stmt::IfCond(i) => {
            all(&i.true_body, out);
            all(&i.false_body, out);
        }
        ast::Stmt::WithBlock(w) => all(&w.body, out),
        ast::Stmt::Set(s) => push(s.span().end_offset, &s.target, out),
        ast::Stmt::SetBlock(s) => {
            all(&s.body, out);
            push(s.span().end_offset, &s.target, out);
        }
        ast::Stmt::AutoEscape(a) => all(&a.body, out),
        ast::Stmt::FilterBlock(f) => all(&f.body, out),
        ast::Stmt::Block(b) => all(&b.body, out),
        ast::Stmt::Macro(m) => all(&m.body, out),
        ast::Stmt::CallBlock(c) => all(&c.macro_decl.body, out),
        _ => {}
    }
}

fn push(end: u32, target: &ast::Expr<'_>, out: &mut Vec<(usize, String)>) {
    let mut names = Vec::new();
    target_names(target, &mut names);
    if !names.is_empty() {
        out.push((end as usize, names.join(", ")));
    }
}

fn target_names(target: &ast::Expr<'_>, names: &mut Vec<String>) {
    match target {
        ast::Expr::Var(v) => names.push(v.id.to_string()),
        ast::Expr::GetAttr(g) => {
            if let ast::Expr::Var(v) = &g.expr {
                names.push(format!("{}.{}", v.id, g.name));
            }
        }
        ast::Expr::List(l) => l.items.iter().for_each(|i| target_names(i, names)),
        ast::Expr::Tuple(t) => t.items.iter().for_each(|i| target_names(i, names)),
        _ => {}
    }
}

/// Collects the rendered prompt and stops the render once it passes [`OUTPUT_BYTES`].
pub(super) struct CappedOutput {
    pub bytes: Vec<u8>,
    pub over: bool,
}

impl io::Write for &mut CappedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > OUTPUT_BYTES {
            self.over = true;
            return Err(io::Error::other("the rendered prompt is over the limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
