//! Integration tests of rmx-store against a local Hub (`fake_hub.rs`): real HTTP, real files.

mod aliases;
mod fake_hub;
mod fixtures;
mod pull;
mod python_interop;
mod views;
