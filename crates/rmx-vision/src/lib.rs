//! Image input for the vision-language models: bytes from a request become the pixel tensor a
//! model's vision tower takes, exactly as the model's Python processor would make it.
//!
//! - [`decode`]: PNG, JPEG, WebP or GIF bytes to 8-bit RGB. The header's dimensions are checked
//!   against [`Limits`] before any pixel is decoded, so a decompression bomb (huge dimensions in
//!   a small file) costs nothing.
//! - [`resize`]: Pillow's resampling filters, bit for bit (the Hugging Face processors resize
//!   through Pillow on 8-bit images, so one level off would move a pixel by 2/255).
//! - [`preprocess`]: a processor config (`preprocessor_config.json`) and an image to the
//!   normalised channels-first tensor.
//!
//! No MLX here: the HTTP layer uses this crate to refuse bad images before the engine sees them.

pub mod decode;
pub mod preprocess;
pub mod resize;

pub use decode::{decode, Limits, RgbImage};
pub use preprocess::{ImageProcessor, PixelValues};

/// What can go wrong with an image a client sent. Each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum VisionError {
    #[error("the image is not PNG, JPEG, WebP or GIF (its first bytes match none of them)")]
    UnknownFormat,
    #[error("the image could not be decoded ({0}); send a complete PNG, JPEG, WebP or GIF file")]
    Undecodable(String),
    #[error(
        "the image is {width}x{height} pixels, over the limit of {max_side} per side and \
         {max_pixels} in all; send a smaller image"
    )]
    TooLarge {
        width: u32,
        height: u32,
        max_side: u32,
        max_pixels: u64,
    },
    #[error(
        "the image is {width}x{height}: its aspect ratio is over 200, more than the model's \
         processor takes; crop it"
    )]
    AspectRatio { width: u32, height: u32 },
    #[error("the image has no pixels ({width}x{height})")]
    Empty { width: u32, height: u32 },
    #[error("bad image processor config: {0}")]
    Config(String),
}
