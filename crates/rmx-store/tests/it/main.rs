//! Integration tests of rmx-store against a local Hub (`rmx_tests::fake_hub`, the shared test
//! support in the top-level tests/): real HTTP, real files.

mod aliases;
mod fixtures;
mod pull;
mod python_interop;
mod views;
