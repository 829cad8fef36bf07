//! The image side of vision-language models: each family's vision tower and projector, from
//! pixel values to the rows that replace a prompt's image tokens. Preprocessing (decode,
//! resize, normalise) is rmx-vision's; the splice into the text embeddings is the language
//! model's (see `CausalLm::forward_hidden_with_images`).

pub mod siglip;

use rmx_mlx::Array;

use crate::error::Result;

/// How a model's prompt carries an image, and how many tokens each becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageTokens {
    /// The placeholder token each image feature replaces (`image_token_index`).
    pub image_token: u32,
    /// Image features (and so placeholder tokens) per image.
    pub per_image: usize,
    /// Tokens around each image's run of placeholders (Gemma 3: `<start_of_image>`,
    /// `<end_of_image>`), when the model has them.
    pub begin: Option<u32>,
    pub end: Option<u32>,
}

/// A loaded vision tower with its projector.
pub trait ImageEncoder {
    fn tokens(&self) -> &ImageTokens;

    /// The side of the square images the tower takes (the processor resizes to it).
    fn image_size(&self) -> u32;

    /// `[N, 3, size, size]` pixel values, as the processor makes them, to
    /// `[N, per_image, text_hidden]` features in the model's dtype.
    fn encode(&self, pixel_values: &Array) -> Result<Array>;
}
