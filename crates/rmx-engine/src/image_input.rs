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
        let image = decode(bytes, &self.limits)?;
        self.processor.check(image.height, image.width)?;
        Ok(self.processor.pixel_values(&image))
    }
}

impl Engine {
    /// How this model takes images; `None` when it takes none. Read from its files: Gemma 3
    /// (`gemma3`), Gemma 4 (`gemma4`), Mistral 3 (`mistral3`: Mistral Small 3.1/3.2) and
    /// Qwen3.5 / 3.6 (`qwen3_5`, `qwen3_5_moe`) with a `vision_config` and an image processor
    /// config (`preprocessor_config.json`, or `processor_config.json`'s `image_processor`). Whether the
    /// files carry the tower's weights shows when a request with images starts (images.rs).
    pub fn image_input(&self) -> Result<Option<ImageInput>> {
        let config: Value = read_json(&self.dir.join("config.json"))?;
        let family = config.get("model_type").and_then(Value::as_str);
        if !matches!(
            family,
            Some("gemma3" | "gemma4" | "mistral3" | "qwen3_5" | "qwen3_5_moe")
        ) || config.get("vision_config").is_none()
        {
            return Ok(None);
        }
        let Some(processor) =
            ImageProcessor::from_dir(&self.dir).map_err(|e| EngineError::Invalid(e.to_string()))?
        else {
            return Ok(None);
        };
        let int = |key: &str, default: u64| {
            config
                .get(key)
                .or_else(|| config.get("text_config").and_then(|t| t.get(key)))
                .and_then(Value::as_u64)
                .unwrap_or(default)
        };
        let token = |key: &str, default: u64| -> Result<String> {
            let id = int(key, default) as u32;
            self.tokenizer.id_to_token(id).ok_or_else(|| {
                EngineError::Invalid(format!(
                    "config.json's {key} ({id}) is not in the tokenizer"
                ))
            })
        };
        // vision_config's `key`, or the family's default.
        let of = |key: &str, default: u64| {
            config
                .get("vision_config")
                .and_then(|v| v.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(default)
        };
        let (prompt, processor) = if matches!(family, Some("qwen3_5" | "qwen3_5_moe")) {
            // Qwen3VLProcessor's: a pad per merged patch of the smart-resized image.
            let unit = (of("patch_size", 16) * of("spatial_merge_size", 2)) as u32;
            let prompt = ImagePrompt::Qwen {
                pad: token("image_token_id", 248056)?,
                unit,
            };
            (prompt, processor)
        } else if family == Some("gemma4") {
            // Gemma4Processor's: a soft token per pooled patch; mlx-vlm's ids where the config
            // names none.
            let prompt = ImagePrompt::Gemma4 {
                begin: token("boi_token_id", 255999)?,
                image: token("image_token_id", 258880)?,
                end: token("eoi_token_id", 258882)?,
                unit: (of("patch_size", 16) * of("pooling_kernel_size", 3)) as u32,
            };
            (prompt, processor)
        } else if family == Some("mistral3") {
            // Mistral3Processor's: the processor rounds sides to whole merged patches.
            let unit = (of("patch_size", 14) * int("spatial_merge_size", 2)) as u32;
            let named = |name: &str| -> Result<String> {
                self.tokenizer
                    .token_to_id(name)
                    .map(|_| name.to_string())
                    .ok_or_else(|| {
                        EngineError::Invalid(format!("the tokenizer has no {name} token"))
                    })
            };
            let image = match config.get("image_token_index") {
                Some(_) => token("image_token_index", 10)?,
                None => named("[IMG]")?,
            };
            let prompt = ImagePrompt::Pixtral {
                image,
                brk: named("[IMG_BREAK]")?,
                end: named("[IMG_END]")?,
                unit,
            };
            (prompt, processor.with_patch_multiple(unit))
        } else {
            // mlx-vlm's Gemma 3 defaults where the config names none.
            let prompt = ImagePrompt::Gemma3 {
                begin: token("boi_token_index", 255999)?,
                placeholder: token("image_token_index", 262144)?,
                end: token("eoi_token_index", 256000)?,
                per_image: int("mm_tokens_per_image", 256) as usize,
            };
            (prompt, processor)
        };
        Ok(Some(ImageInput {
            prompt,
            processor,
            limits: Limits::default(),
        }))
    }

    /// Prompt tokens for a chat whose messages hold image parts (`{"type": "image"}`, in
    /// order; `images`: their pixel values), each widened into the model's placeholders.
    pub fn chat_tokens_with_images(
        &self,
        chat: &ChatPrompt,
        input: &ImageInput,
        images: &[PixelValues],
    ) -> Result<Vec<u32>> {
        let text = self.render_chat(chat)?;
        let sizes: Vec<(u32, u32)> = images.iter().map(|p| (p.height, p.width)).collect();
        let text = input
            .prompt
            .expand(&text, &sizes)
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
