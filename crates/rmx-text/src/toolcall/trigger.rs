//! Where a tool call starts and ends in a model's output: the one vocabulary every format's
//! module declares its calls in (format.rs picks the module, the parser follows the triggers).

/// How a call's text ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Close {
    /// At this closing tag.
    Tag(&'static str),
    /// Where its own syntax ends (balanced JSON): the format's `body_end` says.
    SelfDelimited,
}

/// Text that opens a call in the middle of the output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trigger {
    pub open: &'static str,
    pub close: Close,
}
