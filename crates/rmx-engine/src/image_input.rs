//! What an API surface needs to turn a chat with images into a [`GenerateRequest`] (issue #27):
//! whether the model takes images and how ([`Engine::image_input`], from its files, on any
//! thread), the image bytes checked and preprocessed ([`ImageInput::prepare`]), and the prompt
//! with each image's marker widened into its placeholders ([`Engine::chat_tokens_with_images`]).
//!
//! [`GenerateRequest`]: crate::GenerateRequest

use rmx_text::image_prompt::ImagePrompt;
use rmx_vision::{decode, ImageProcessor, Limits, PixelValues, VisionError};
use serde_json::Value;

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::prompt::ChatPrompt;

/// How one model takes images.
#[derive(Debug, Clone)]
pub struct ImageInput {
    pub prompt: ImagePrompt,
    pub processor: ImageProcessor,
    /// The largest image accepted (checked from the header, before decoding).
    pub limits: Limits,
}

impl ImageInput {
    /// One image's bytes (PNG, JPEG, WebP, GIF) to the tensor the model's tower takes.
    pub fn prepare(&self, bytes: &[u8]) -> std::result::Result<PixelValues, VisionError> {
        Ok(self.processor.pixel_values(&decode(bytes, &self.limits)?))
    }
}

impl Engine {
    /// How this model takes images; `None` when it takes none. Read from its files: Gemma 3
    /// (`gemma3` with a `vision_config` and a `preprocessor_config.json`) for now. Whether the
    /// files carry the tower's weights shows when a request with images starts (images.rs).
    pub fn image_input(&self) -> Result<Option<ImageInput>> {
        let config: Value = read_json(&self.dir.join("config.json"))?;
        if config.get("model_type").and_then(Value::as_str) != Some("gemma3")
            || config.get("vision_config").is_none()
        {
            return Ok(None);
        }
        let pre = self.dir.join("preprocessor_config.json");
        if !pre.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&pre)
            .map_err(|e| EngineError::Invalid(format!("{}: {e}", pre.display())))?;
        let processor = ImageProcessor::from_json(&text)
            .map_err(|e| EngineError::Invalid(format!("{}: {e}", pre.display())))?;
        let int = |key: &str, default: u64| {
            config
                .get(key)
                .or_else(|| config.get("text_config").and_then(|t| t.get(key)))
                .and_then(Value::as_u64)
                .unwrap_or(default)
        };
        // mlx-vlm's Gemma 3 defaults where the config names none.
        let token = |key: &str, default: u64| -> Result<String> {
            let id = int(key, default) as u32;
            self.tokenizer.id_to_token(id).ok_or_else(|| {
                EngineError::Invalid(format!(
                    "config.json's {key} ({id}) is not in the tokenizer"
                ))
            })
        };
        Ok(Some(ImageInput {
            prompt: ImagePrompt::Gemma3 {
                begin: token("boi_token_index", 255999)?,
                placeholder: token("image_token_index", 262144)?,
                end: token("eoi_token_index", 256000)?,
                per_image: int("mm_tokens_per_image", 256) as usize,
            },
            processor,
            limits: Limits::default(),
        }))
    }

    /// Prompt tokens for a chat whose messages hold `images` image parts
    /// (`{"type": "image"}`, in order), each widened into the model's placeholders.
    pub fn chat_tokens_with_images(
        &self,
        chat: &ChatPrompt,
        input: &ImageInput,
        images: usize,
    ) -> Result<Vec<u32>> {
        let text = self.render_chat(chat)?;
        let text = input
            .prompt
            .expand(&text, images)
            .map_err(|e| EngineError::Invalid(e.to_string()))?;
        self.tokenizer
            .encode(&text, false)
            .map_err(EngineError::Encode)
    }
}

fn read_json(path: &std::path::Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EngineError::Invalid(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| EngineError::Invalid(format!("{}: {e}", path.display())))
}
