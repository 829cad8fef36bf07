//! `RMX_TRACE_STEPS=1`: a stderr line per batch step and per prefill unit, with where its time
//! went on the host (queueing a step is host work; reading its tokens waits for the device), to
//! see on a GPU machine what a batch's step costs.

use std::sync::OnceLock;

pub fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| rmx_settings::is_one(rmx_settings::EnvVars::RMX_TRACE_STEPS))
}
