//! Models (`/v1/models`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Model {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub owned_by: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<Model>,
}
