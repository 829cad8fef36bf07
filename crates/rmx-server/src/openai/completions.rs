//! `POST /v1/completions`: the legacy text completion, a raw prompt with no chat template.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use rmx_api::openai::{
    Completion, CompletionChoice, CompletionLogprobs, CompletionPrompt, CompletionRequest,
    ErrorResponse,
};
use serde_json::{Map, Value};

use super::chat::finish_reason;
use super::error::OpenAiError;
use super::{new_id, structured, unix_time, usage, Knobs};
use crate::service::{InternalRequest, PromptInput, Service, ServiceEvent, TokenLogprob};
use crate::wire::body::{parse, BodyError};
use crate::wire::sse::{self, data_event, Translator};

/// OpenAI's default for this endpoint.
const DEFAULT_MAX_TOKENS: usize = 16;

pub async fn handler(
    State(service): State<Arc<Service>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(service, body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(
    service: Arc<Service>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OpenAiError> {
    let body = body.map_err(BodyError::from)?;
    let req: CompletionRequest = parse(&body)?;
    let (internal, prompt) = to_internal(&req)?;
    let answer = service.generate(internal).await?;
    let id = new_id("cmpl");
    let created = unix_time(answer.created);
    let echo = req.echo.unwrap_or(false).then_some(prompt);
    let mut translator = TextStream {
        id,
        created,
        model: req.model.clone(),
        include_usage: req.stream_options.as_ref().is_some_and(|o| o.include_usage),
        logprobs: req.logprobs.is_some(),
        pending: Vec::new(),
        offset: 0,
        echo,
    };
    if req.stream.unwrap_or(false) {
        return Ok(sse::response(answer, translator));
    }
    // One code path for both: fold the chunks the stream would send (with the usage chunk).
    translator.include_usage = true;
    let mut answer = answer;
    let mut text = String::new();
    let mut lp = CompletionLogprobs::default();
    let mut finish = None;
    let mut total = None;
    for c in translator.start_chunks() {
        text.push_str(&c.choices[0].text);
    }
    while let Some(ev) = answer.next_event().await {
        let last = matches!(ev, ServiceEvent::Done(_) | ServiceEvent::Error(_));
        for c in translator
            .chunks(ev)
            .map_err(|e| OpenAiError::Service(crate::ServiceError::failed(e.error.message)))?
        {
            total = c.usage.or(total);
            if let Some(choice) = c.choices.into_iter().next() {
                text.push_str(&choice.text);
                if let Some(l) = choice.logprobs {
                    lp.tokens.extend(l.tokens);
                    lp.token_logprobs.extend(l.token_logprobs);
                    lp.top_logprobs.extend(l.top_logprobs);
                    lp.text_offset.extend(l.text_offset);
                }
                finish = choice.finish_reason.or(finish);
            }
        }
        if last {
            break;
        }
    }
    Ok(Json(Completion {
        id: translator.id,
        object: "text_completion".into(),
        created,
        model: req.model,
        choices: vec![CompletionChoice {
            index: 0,
            text,
            logprobs: translator.logprobs.then_some(lp),
            finish_reason: finish,
        }],
        usage: total,
    })
    .into_response())
}

pub fn to_internal(req: &CompletionRequest) -> Result<(InternalRequest, String), OpenAiError> {
    if req.n.is_some_and(|n| n != 1) {
        return Err(OpenAiError::invalid("n", "only `n: 1` is supported"));
    }
    if req.suffix.as_ref().is_some_and(|s| !s.is_empty()) {
        return Err(OpenAiError::invalid(
            "suffix",
            "`suffix` (fill in the middle) is not supported",
        ));
    }
    if let Some(n) = req.logprobs.filter(|&n| n > 5) {
        return Err(OpenAiError::invalid(
            "logprobs",
            format!("`logprobs` must be at most 5, got {n}"),
        ));
    }
    if req.max_tokens == Some(0) {
        return Err(OpenAiError::invalid(
            "max_tokens",
            "`max_tokens` must be at least 1",
        ));
    }
    let prompt = match &req.prompt {
        CompletionPrompt::Text(t) => t.clone(),
        CompletionPrompt::Texts(v) if v.len() == 1 => v[0].clone(),
        CompletionPrompt::Texts(_) => {
            return Err(OpenAiError::invalid(
                "prompt",
                "only one prompt per request is supported",
            ))
        }
        CompletionPrompt::Tokens(_) => {
            return Err(OpenAiError::invalid(
                "prompt",
                "token-id prompts are not supported; send text",
            ))
        }
    };
    let sampling = Knobs {
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        min_p: req.min_p,
        repetition_penalty: req.repetition_penalty,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        seed: req.seed,
    }
    .sampling()?;
    Ok((
        InternalRequest {
            model: req.model.clone(),
            prompt: PromptInput::Raw(prompt.clone()),
            sampling,
            max_tokens: Some(req.max_tokens.map_or(DEFAULT_MAX_TOKENS, |n| n as usize)),
            stop: req.stop.clone().map(|s| s.into_vec()).unwrap_or_default(),
            logprobs: req.logprobs.map(|n| n as usize),
            keep_alive: None,
            // A raw prompt has no thought to close.
            thinking_budget: None,
            think: None,
            shape: req
                .structured_outputs
                .as_ref()
                .map(structured::shape)
                .transpose()?,
            kv_quant: super::kv_quant(&req.rmx)?,
            speculative: super::speculative(&req.rmx)?,
        },
        prompt,
    ))
}

/// Service events → `text_completion` chunks (also folded into the whole answer).
struct TextStream {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    logprobs: bool,
    pending: Vec<TokenLogprob>,
    offset: usize,
    echo: Option<String>,
}

impl TextStream {
    fn chunk(
        &self,
        text: String,
        logprobs: Option<CompletionLogprobs>,
        finish: Option<String>,
    ) -> Completion {
        Completion {
            id: self.id.clone(),
            object: "text_completion".into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![CompletionChoice {
                index: 0,
                text,
                logprobs,
                finish_reason: finish,
            }],
            usage: None,
        }
    }

    fn start_chunks(&mut self) -> Vec<Completion> {
        match self.echo.take() {
            Some(prompt) => {
                self.offset += prompt.len();
                vec![self.chunk(prompt, None, None)]
            }
            None => Vec::new(),
        }
    }

    fn take_logprobs(&mut self) -> Option<CompletionLogprobs> {
        if !self.logprobs || self.pending.is_empty() {
            return None;
        }
        let mut lp = CompletionLogprobs::default();
        for l in std::mem::take(&mut self.pending) {
            lp.text_offset.push(self.offset);
            self.offset += l.token.len();
            lp.tokens.push(l.token.clone());
            lp.token_logprobs.push(l.logprob);
            let mut top = Map::new();
            for (_, tok, p) in &l.top {
                top.insert(tok.clone(), Value::from(*p as f64));
            }
            lp.top_logprobs.push(top);
        }
        Some(lp)
    }

    fn chunks(&mut self, event: ServiceEvent) -> Result<Vec<Completion>, ErrorResponse> {
        Ok(match event {
            ServiceEvent::Content(t) | ServiceEvent::Reasoning(t) => {
                let lp = self.take_logprobs();
                vec![self.chunk(t, lp, None)]
            }
            ServiceEvent::Logprob(l) => {
                self.pending.push(l);
                Vec::new()
            }
            ServiceEvent::ToolCallStart { .. }
            | ServiceEvent::ToolCallArgs { .. }
            | ServiceEvent::ToolCallEnd { .. } => Vec::new(),
            ServiceEvent::Done(f) => {
                let lp = self.take_logprobs();
                let last = self.chunk(String::new(), lp, Some(finish_reason(f.finish).into()));
                let mut out = vec![last];
                if self.include_usage {
                    let mut u = self.chunk(String::new(), None, None);
                    u.choices.clear();
                    u.usage = Some(usage(&f.usage, f.reasoning_tokens));
                    out.push(u);
                }
                out
            }
            ServiceEvent::Error(message) => {
                return Err(OpenAiError::Service(crate::ServiceError::Internal(message)).into_body())
            }
        })
    }
}

impl Translator for TextStream {
    fn start(&mut self) -> Vec<Event> {
        self.start_chunks().iter().map(data_event).collect()
    }

    fn event(&mut self, event: ServiceEvent) -> Vec<Event> {
        let last = matches!(event, ServiceEvent::Done(_) | ServiceEvent::Error(_));
        let mut out: Vec<Event> = match self.chunks(event) {
            Ok(chunks) => chunks.iter().map(data_event).collect(),
            Err(e) => vec![data_event(&e)],
        };
        if last {
            out.push(Event::default().data("[DONE]"));
        }
        out
    }

    fn idle(&mut self) -> Vec<Event> {
        vec![Event::default().comment("keep-alive")]
    }
}
