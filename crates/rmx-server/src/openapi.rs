//! `GET /openapi.json`: an OpenAPI 3.1 description of every route the daemon serves, written
//! by hand (the wire types are the SDKs', documented by OpenAI, Anthropic and Ollama; this
//! says which of them are here and what the request bodies take).
//!
//! A test checks that every route the router serves is described and that every described
//! route is served, so the two cannot drift.

use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use crate::service::Service;

pub fn routes() -> Router<Arc<Service>> {
    Router::new().route("/openapi.json", get(|| async { Json(spec()) }))
}

/// One described route: method, path, tag, summary, request schema, whether it streams.
type RouteDoc = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    bool,
);

const ROUTES: &[RouteDoc] = &[
    (
        "post",
        "/v1/chat/completions",
        "openai",
        "Chat completion (OpenAI)",
        Some("ChatCompletionRequest"),
        true,
    ),
    (
        "post",
        "/v1/completions",
        "openai",
        "Text completion (OpenAI, legacy)",
        Some("CompletionRequest"),
        true,
    ),
    (
        "post",
        "/v1/responses",
        "openai",
        "Response (OpenAI Responses API, stateless)",
        Some("ResponsesRequest"),
        true,
    ),
    (
        "post",
        "/v1/embeddings",
        "openai",
        "Embeddings (OpenAI)",
        Some("EmbeddingRequest"),
        false,
    ),
    (
        "post",
        "/v1/rerank",
        "rerank",
        "Rerank documents against a query (Jina's and Cohere's shape)",
        Some("RerankRequest"),
        false,
    ),
    (
        "post",
        "/rerank",
        "rerank",
        "Rerank (the same, without /v1)",
        Some("RerankRequest"),
        false,
    ),
    (
        "post",
        "/v2/rerank",
        "rerank",
        "Rerank (Cohere v2's path)",
        Some("RerankRequest"),
        false,
    ),
    (
        "get",
        "/v1/models",
        "openai",
        "List models (OpenAI)",
        None,
        false,
    ),
    (
        "get",
        "/v1/models/{id}",
        "openai",
        "One model (OpenAI)",
        None,
        false,
    ),
    (
        "post",
        "/v1/messages",
        "anthropic",
        "Message (Anthropic)",
        Some("MessagesRequest"),
        true,
    ),
    (
        "post",
        "/messages",
        "anthropic",
        "Message (Anthropic, base URL without /v1)",
        Some("MessagesRequest"),
        true,
    ),
    (
        "post",
        "/v1/messages/count_tokens",
        "anthropic",
        "Count prompt tokens (Anthropic)",
        Some("CountTokensRequest"),
        false,
    ),
    (
        "post",
        "/messages/count_tokens",
        "anthropic",
        "Count prompt tokens (Anthropic, without /v1)",
        Some("CountTokensRequest"),
        false,
    ),
    (
        "post",
        "/api/generate",
        "native",
        "Generate from a raw prompt (Ollama-shaped)",
        Some("NativeRequest"),
        true,
    ),
    (
        "post",
        "/api/chat",
        "native",
        "Chat (Ollama-shaped)",
        Some("NativeRequest"),
        true,
    ),
    (
        "post",
        "/api/embed",
        "native",
        "Embeddings (Ollama-shaped), unit length",
        Some("EmbedRequest"),
        false,
    ),
    (
        "post",
        "/api/embeddings",
        "native",
        "One embedding (Ollama's older route)",
        Some("EmbeddingsRequest"),
        false,
    ),
    ("get", "/api/ps", "native", "Loaded models", None, false),
    ("get", "/api/tags", "native", "Stored models", None, false),
    (
        "post",
        "/api/show",
        "native",
        "Model details",
        Some("NativeRequest"),
        false,
    ),
    (
        "delete",
        "/api/delete",
        "native",
        "Remove a model",
        Some("NativeRequest"),
        false,
    ),
    (
        "post",
        "/api/pull",
        "native",
        "Download a model into the daemon's store, progress as Ollama's ndjson lines",
        Some("PullRequest"),
        true,
    ),
    (
        "get",
        "/api/version",
        "native",
        "Daemon version",
        None,
        false,
    ),
    (
        "get",
        "/health",
        "meta",
        "Liveness: status, version and the models held",
        None,
        false,
    ),
    (
        "get",
        "/metrics",
        "meta",
        "Counters for Prometheus (OpenMetrics text): requests, tokens, time to first token, decode time, queue, loaded models, memory",
        None,
        false,
    ),
    (
        "get",
        "/openapi.json",
        "meta",
        "This description",
        None,
        false,
    ),
];

/// Every (method, path) described, for the test that compares them with the router.
pub fn described_routes() -> Vec<(&'static str, &'static str)> {
    ROUTES.iter().map(|r| (r.0, r.1)).collect()
}

pub fn spec() -> Value {
    let mut paths = Map::new();
    for &(method, path, tag, summary, body, streams) in ROUTES {
        let error_ref = match tag {
            "anthropic" => "#/components/schemas/AnthropicError",
            "native" => "#/components/schemas/NativeError",
            _ => "#/components/schemas/OpenAIError",
        };
        let mut ok_content = Map::new();
        let (media, schema) = match path {
            "/metrics" => (
                "application/openmetrics-text",
                json!({"schema": {"type": "string"}}),
            ),
            _ => ("application/json", json!({"schema": {"type": "object"}})),
        };
        ok_content.insert(media.into(), schema);
        if streams {
            let media = if tag == "native" {
                "application/x-ndjson"
            } else {
                "text/event-stream"
            };
            ok_content.insert(media.into(), json!({"schema": {"type": "string"}}));
        }
        let mut op = json!({
            "tags": [tag],
            "summary": summary,
            "operationId": operation_id(method, path),
            "responses": {
                "200": {"description": "Success", "content": ok_content},
                "400": {"description": "Malformed JSON, a wrong type or a sampling value out of range (the field is named), a prompt longer than the context, a model of a family this rmx does not load (the family is named), a model whose files do not load (the model and the reason are named), a model asked for work it does not do (text from an embedding model, embeddings from a language model; the message says what it does), or an embedding input longer than the model takes where it may not be cut (its index, its tokens and the limit are named)",
                        "content": {"application/json": {"schema": {"$ref": error_ref}}}},
                "401": {"description": "Missing or wrong API key (when one is set)",
                        "content": {"application/json": {"schema": {"$ref": error_ref}}}},
                "404": {"description": "Unknown model; the message lists the models there are",
                        "content": {"application/json": {"schema": {"$ref": error_ref}}}},
                "413": {"description": "Request body too large",
                        "content": {"application/json": {"schema": {"$ref": error_ref}}}},
                "429": {"description": "Rate limit reached (when one is set)",
                        "content": {"application/json": {"schema": {"$ref": error_ref}}}}
            }
        });
        if let Some(schema) = body {
            op["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
            });
        }
        if path.contains("{id}") {
            op["parameters"] = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "rmx",
            "version": rmx_api::VERSION,
            "description": "A local LLM runner on MLX. Speaks the OpenAI, Anthropic and Ollama wire formats.",
            "license": {"name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0"}
        },
        "servers": [{"url": "http://localhost:8000"}],
        "tags": [
            {"name": "openai", "description": "OpenAI-compatible"},
            {"name": "anthropic", "description": "Anthropic-compatible"},
            {"name": "native", "description": "Native, Ollama-shaped"},
            {"name": "rerank", "description": "Reranking, in Jina's and Cohere's shape (OpenAI-shaped errors)"},
            {"name": "meta"}
        ],
        "security": [{}, {"bearer": []}, {"apiKey": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}
            },
            "schemas": schemas()
        }
    })
}

fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        id.push('_');
        id.push_str(&part.replace(['{', '}'], "").replace('.', "_"));
    }
    id
}

fn schemas() -> Value {
    let sampling = json!({
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "top_k": {"type": "integer", "minimum": 0},
        "min_p": {"type": "number", "minimum": 0, "maximum": 1},
        "repetition_penalty": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
        "seed": {"type": "integer"},
        "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "stop": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "speculative": {"oneOf": [{"enum": ["prompt-lookup", "mtp", "off"]}, {"type": "string", "pattern": "^draft:.+"}],
            "description": "rmx's extension: guess tokens by copying them from the prompt and the answer so far (\"prompt-lookup\") or with a smaller draft model of the same tokenizer (\"draft:MODEL\", MODEL named as `model` is) or the model's own multi-token-prediction head (\"mtp\": checkpoints that keep `mtp.*`), and let the model check them in one forward pass; \"off\" turns the alias's or the daemon's default off for this request. The answer is the one it would be without; `usage.completion_tokens_details` counts the guesses as `accepted_prediction_tokens` and `rejected_prediction_tokens` (chat and completions). Default: the model alias's, else the daemon's (`rmx serve --speculative`)."},
        "draft_tokens": {"type": "integer", "minimum": 1, "maximum": 16,
            "description": "rmx's extension: the most tokens guessed a step with `speculative` (default 6)."},
        "kv_bits": {"enum": [4, 8],
            "description": "rmx's extension: store this answer's keys and values 4- or 8-bit (mlx-lm's `kv_bits`). Default: the model alias's, else the daemon's (`rmx serve --kv-bits`), else unquantized."},
        "kv_group_size": {"enum": [32, 64, 128],
            "description": "rmx's extension: elements per quantization group of the KV cache with `kv_bits` (default 64)."},
        "kv_quant_start": {"type": "integer", "minimum": 0,
            "description": "rmx's extension: quantize the KV cache with `kv_bits` only once it holds this many positions (default 0)."}
    });
    let with = |extra: Value| -> Value {
        let mut props = sampling.as_object().cloned().unwrap_or_default();
        if let Value::Object(e) = extra {
            props.extend(e);
        }
        Value::Object(props)
    };
    json!({
        "OpenAIError": {
            "type": "object", "required": ["error"],
            "properties": {"error": {"type": "object", "required": ["message", "type"], "properties": {
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}}
        },
        "AnthropicError": {
            "type": "object", "required": ["type", "error"],
            "properties": {"type": {"const": "error"}, "error": {"type": "object", "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}
        },
        "NativeError": {"type": "object", "properties": {"error": {"type": "string"}}},
        "ChatMessage": {
            "type": "object", "required": ["role"],
            "properties": {
                "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
                "content": {"oneOf": [{"type": "string"}, {"type": "null"},
                    {"type": "array", "items": {"type": "object", "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}]},
                "reasoning_content": {"type": "string"},
                "tool_calls": {"type": "array", "items": {"type": "object"}},
                "tool_call_id": {"type": "string"}
            }
        },
        "ChatCompletionRequest": {
            "type": "object", "required": ["model", "messages"],
            "properties": with(json!({
                "model": {"type": "string"},
                "messages": {"type": "array", "items": {"$ref": "#/components/schemas/ChatMessage"}},
                "max_tokens": {"type": "integer", "minimum": 1},
                "max_completion_tokens": {"type": "integer", "minimum": 1},
                "tools": {"type": "array", "items": {"type": "object"}},
                "tool_choice": {"oneOf": [{"enum": ["auto", "none", "required"]}, {"type": "object"}],
                    "description": "`required` or a named function is enforced by constrained decoding: the reply is one call of an allowed tool with arguments valid against its `parameters` schema, finish_reason `tool_calls`. Enforced for models whose tool-call format is Hermes (Qwen) or Llama 3 JSON; other formats answer 400. With `auto`, the calls of tools marked `strict` are enforced the same way where the format is Hermes (the answer may still be text)."},
                "response_format": {"type": "object", "properties": {"type": {"enum": ["text", "json_object", "json_schema"]}},
                    "description": "`json_object` is enforced by constrained decoding as one JSON object; `json_schema` as one JSON value valid against the schema (JSON Schema as llguidance enforces it: anyOf, $ref to local $defs, items, prefixItems, additionalProperties, enum, const, pattern, format, lengths, ranges). A schema with a keyword that cannot be enforced answers 400 (docs/api.md)."},
                "structured_outputs": {"type": "object", "properties": {"json": {}, "regex": {"type": "string"}, "choice": {"type": "array", "items": {"type": "string"}}, "grammar": {"type": "string"}, "json_object": {"type": "boolean"}},
                    "description": "vLLM's extension, enforced by constrained decoding: exactly one of a JSON schema (`json`, an object or JSON text), a regular expression the whole answer matches (`regex`), one of a list of strings (`choice`), a Lark grammar in llguidance's dialect (`grammar`), or `json_object`. An invalid one answers 400 naming what is wrong; it wins over `response_format`."},
                "logprobs": {"type": "boolean"},
                "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
                "chat_template_kwargs": {"type": "object"},
                "reasoning_effort": {"type": "string",
                    "description": "Goes to the chat template; `none`/`minimal` turn thinking off, and `low`, `medium`, `high` cap the thought at 1,024, 4,096 and 16,384 tokens (docs/api.md, Thinking budgets)."},
                "thinking_token_budget": {"type": "integer", "minimum": 0,
                    "description": "vLLM's extension: the thought is closed for the model after this many tokens, and the answer follows."},
                "n": {"const": 1}
            }))
        },
        "CompletionRequest": {
            "type": "object", "required": ["model", "prompt"],
            "properties": with(json!({
                "model": {"type": "string"},
                "prompt": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": 1}]},
                "max_tokens": {"type": "integer", "minimum": 1},
                "logprobs": {"type": "integer", "minimum": 0, "maximum": 5},
                "structured_outputs": {"type": "object", "description": "As for chat completions: a JSON schema, a regex, a choice of strings, a Lark grammar or JSON mode, enforced."},
                "echo": {"type": "boolean"}
            }))
        },
        "ResponsesRequest": {
            "type": "object", "required": ["model", "input"],
            "properties": {
                "model": {"type": "string"},
                "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                "instructions": {"type": "string"},
                "tools": {"type": "array", "items": {"type": "object"}},
                "tool_choice": {"description": "`required` or a named function is enforced (one constrained call), as for chat completions."},
                "text": {"type": "object", "description": "`format.type` `json_object` is enforced as one JSON object, `json_schema` as one JSON value valid against the schema (as for chat completions)."},
                "stream": {"type": "boolean"},
                "max_output_tokens": {"type": "integer", "minimum": 1},
                "temperature": {"type": "number"},
                "top_p": {"type": "number"},
                "reasoning": {"type": "object", "properties": {"effort": {"type": "string"}}},
                "store": {"type": "boolean", "description": "Accepted and ignored: the server keeps no state."},
                "previous_response_id": {"type": "null", "description": "Refused: the server keeps no state."},
                "speculative": sampling["speculative"],
                "draft_tokens": sampling["draft_tokens"]
            }
        },
        "AnthropicMessage": {
            "type": "object", "required": ["role", "content"],
            "properties": {
                "role": {"enum": ["user", "assistant"]},
                "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object", "required": ["type"],
                    "properties": {"type": {"enum": ["text", "thinking", "redacted_thinking", "tool_use", "tool_result"]}}}}]}
            }
        },
        "MessagesRequest": {
            "type": "object", "required": ["model", "messages", "max_tokens"],
            "properties": {
                "model": {"type": "string"},
                "messages": {"type": "array", "items": {"$ref": "#/components/schemas/AnthropicMessage"}},
                "max_tokens": {"type": "integer", "minimum": 1},
                "system": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                "stop_sequences": {"type": "array", "items": {"type": "string"}},
                "stream": {"type": "boolean"},
                "temperature": {"type": "number", "minimum": 0, "maximum": 1},
                "top_p": {"type": "number"},
                "top_k": {"type": "integer"},
                "tools": {"type": "array", "items": {"type": "object"}},
                "tool_choice": {"type": "object", "description": "`any` or a named `tool` is enforced by constrained decoding: the reply is one `tool_use` block whose input is valid against the tool's `input_schema` (Hermes and Llama 3 JSON tool-call formats; others answer 400)."},
                "thinking": {"type": "object"},
                "speculative": sampling["speculative"],
                "draft_tokens": sampling["draft_tokens"]
            }
        },
        "CountTokensRequest": {
            "type": "object", "required": ["model", "messages"],
            "properties": {
                "model": {"type": "string"},
                "messages": {"type": "array", "items": {"$ref": "#/components/schemas/AnthropicMessage"}},
                "system": {},
                "tools": {"type": "array", "items": {"type": "object"}}
            }
        },
        "RerankRequest": {
            "type": "object", "required": ["model", "query", "documents"],
            "properties": {
                "model": {"type": "string", "description": "A reranker (Qwen3-Reranker); another kind of model answers 400."},
                "query": {"type": "string"},
                "documents": {"type": "array", "minItems": 1, "items": {"oneOf": [
                    {"type": "string"},
                    {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}]}},
                "top_n": {"type": "integer", "minimum": 1, "description": "Only the best N results (default all)."},
                "return_documents": {"type": "boolean", "description": "Echo each document's text (default true)."},
                "instruction": {"type": "string", "description": "rmx: the task the reranker judges under (default: web search)."},
                "truncate": {"type": "boolean", "description": "Cut a document that does not fit the model's prompt (default true); false answers 400."}
            }
        },
        "EmbeddingRequest": {
            "type": "object", "required": ["model", "input"],
            "properties": {
                "model": {"type": "string", "description": "An embedding model; a language model answers 400."},
                "input": {"oneOf": [{"type": "string", "minLength": 1},
                    {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                    {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
                    {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}}],
                    "description": "Text is tokenized with the model's special tokens; token ids are read as they are. An input longer than the model takes is a 400 naming it (never cut)."},
                "encoding_format": {"enum": ["float", "base64"], "description": "`base64`: each vector's little-endian float32 bytes, as the OpenAI SDKs decode them."},
                "dimensions": {"type": "integer", "minimum": 1, "description": "Keep each vector's first N values, renormalized when the model's vectors are unit length (Matryoshka-trained models such as Qwen3-Embedding)."},
                "user": {"type": "string", "description": "Accepted and ignored."}
            }
        },
        "EmbedRequest": {
            "type": "object", "required": ["model"],
            "description": "No `input` (or `\"\"`, `[]`): the model is loaded and `embeddings` is empty.",
            "properties": {
                "model": {"type": "string"},
                "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string", "minLength": 1}}]},
                "truncate": {"type": "boolean", "default": true, "description": "Cut inputs longer than the model takes; false answers 400 instead."},
                "dimensions": {"type": "integer", "minimum": 1},
                "keep_alive": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                "options": {"type": "object", "description": "Accepted and not read."}
            }
        },
        "EmbeddingsRequest": {
            "type": "object", "required": ["model"],
            "description": "An empty `prompt` loads the model and answers an empty vector. The vector is the model's own (not normalized again); a long prompt is cut.",
            "properties": {
                "model": {"type": "string"},
                "prompt": {"type": "string"},
                "keep_alive": {"oneOf": [{"type": "string"}, {"type": "number"}]},
                "options": {"type": "object"}
            }
        },
        "PullRequest": {
            "type": "object",
            "description": "`model` (or `name`): an alias or a Hugging Face repo id. Streams by default.",
            "properties": {
                "model": {"type": "string"},
                "name": {"type": "string"},
                "insecure": {"type": "boolean", "description": "Accepted and ignored."},
                "stream": {"type": "boolean"},
                "hf_token": {"type": "string", "description": "rmx: the Hugging Face token to pull with, instead of the daemon's own (`rmx pull` sends its environment's)."}
            }
        },
        "PullProgress": {
            "type": "object", "required": ["status"],
            "description": "One ndjson line of a pull; the last is `success` or an `error` line.",
            "properties": {
                "status": {"type": "string"},
                "digest": {"type": "string"},
                "total": {"type": "integer", "minimum": 0},
                "completed": {"type": "integer", "minimum": 0},
                "detail": {"type": "object", "description": "rmx's store event behind the line"},
                "error": {"type": "string"}
            }
        },
        "NativeRequest": {
            "type": "object", "description": "Ollama's request body for this route.",
            "properties": {
                "model": {"type": "string"},
                "format": {"description": "`chat` and `generate`: `\"json\"` is enforced as one JSON object, a JSON schema as one JSON value valid against it (as for chat completions; a schema that cannot be enforced answers 400)."}
            }
        }
    })
}
