//! Models (`/v1/models`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Model {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub owned_by: String,
    /// rmx's: what the model answers ("chat", "embedding"), where the daemon knows: while it
    /// is loaded. OpenAI's SDKs keep unknown fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<Model>,
}
