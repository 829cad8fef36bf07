//! What one image costs before an answer's first token (`rmx bench --image-cost`, issue #27):
//! the model's processor on the host (decode, resize, rescale, normalize) and its vision tower
//! on the model's device, each timed alone, per image, on a photo-sized test image.

use std::io::Cursor;
use std::time::Instant;

use rmx_mlx::Array;
use rmx_models::CausalLm;
use serde::Serialize;

use crate::bench::Stat;
use crate::engine::Engine;
use crate::error::{EngineError, Result};

/// One image's costs.
#[derive(Debug, Clone, Serialize)]
pub struct ImageCost {
    /// The test image's size, as sent.
    pub width: u32,
    pub height: u32,
    /// The pixel values' size the processor makes of it.
    pub pixels_width: u32,
    pub pixels_height: u32,
    /// Placeholder tokens the image takes in the prompt.
    pub placeholders: usize,
    /// Decoding and preprocessing on the host.
    pub preprocess_ms: Stat,
    /// The vision tower (and projector) on the model's device, evaluated.
    pub encode_ms: Stat,
}

/// A `width` x `height` PNG of smooth gradients under noise: what a photo costs to decode and
/// resize, where a flat image would compress to nothing.
pub fn test_image(width: u32, height: u32) -> Vec<u8> {
    let mut state = 0x9E37_79B9u32;
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = (state >> 24) as u8 / 8;
        let g = |v: u32, m: u32| (v * 255 / m.max(1)) as u8;
        image::Rgb([
            g(x, width).wrapping_add(n),
            g(y, height).wrapping_add(n),
            g(x + y, width + height).wrapping_add(n),
        ])
    });
    let mut out = Cursor::new(Vec::new());
    // A PNG of a few MB at photo sizes: writing it cannot fail in memory.
    let _ = image::DynamicImage::ImageRgb8(img).write_to(&mut out, image::ImageFormat::Png);
    out.into_inner()
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl Engine {
    /// Times `image` through this model's processor and vision tower, `warmup` rounds discarded
    /// and `rounds` kept; the tower on the engine thread, which runs nothing else meanwhile.
    pub fn image_cost(&self, image: &[u8], warmup: usize, rounds: usize) -> Result<ImageCost> {
        let no_images = || {
            EngineError::Invalid(
                "this model takes no images (a vision model's files carry a vision_config and \
                 a preprocessor_config.json)"
                    .into(),
            )
        };
        let input = self.image_input()?.ok_or_else(no_images)?;
        // Its size from the header: the processor below decodes it, timed.
        let (width, height) = image::ImageReader::new(std::io::Cursor::new(image))
            .with_guessed_format()
            .map_err(|e| EngineError::Invalid(format!("the test image: {e}")))?
            .into_dimensions()
            .map_err(|e| EngineError::Invalid(format!("the test image: {e}")))?;
        let mut preprocess = Vec::with_capacity(rounds);
        let mut pixels = None;
        for r in 0..warmup + rounds.max(1) {
            let t = Instant::now();
            let p = input
                .prepare(image)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
            if r >= warmup {
                preprocess.push(ms(t));
            }
            pixels = Some(p);
        }
        let pixels = pixels.expect("at least one round ran");
        let (pixels_width, pixels_height) = (pixels.width, pixels.height);
        let (reply, rx) = std::sync::mpsc::channel();
        let run = move |model: Option<&dyn CausalLm>| {
            let result = (|| -> Result<(Vec<f64>, usize)> {
                let vision = model.and_then(|m| m.vision()).ok_or_else(no_images)?;
                let (h, w) = (pixels.height, pixels.width);
                let x = Array::from_slice(&pixels.data, &[3, h as i32, w as i32])?;
                let mut times = Vec::with_capacity(rounds);
                for r in 0..warmup + rounds.max(1) {
                    let t = Instant::now();
                    vision.encode(std::slice::from_ref(&x))?.eval()?;
                    if r >= warmup {
                        times.push(ms(t));
                    }
                }
                Ok((times, vision.placeholders(h, w)))
            })();
            let _ = reply.send(result);
        };
        self.probe(Box::new(run))?;
        let (encode, placeholders) = rx.recv().map_err(|_| EngineError::Stopped)??;
        Ok(ImageCost {
            width,
            height,
            pixels_width,
            pixels_height,
            placeholders,
            preprocess_ms: Stat::of(preprocess),
            encode_ms: Stat::of(encode),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_image_is_a_png_of_its_size_that_does_not_compress_to_nothing() {
        let png = test_image(64, 48);
        let img = image::load_from_memory(&png).unwrap();
        assert_eq!((img.width(), img.height()), (64, 48));
        assert!(png.len() > 64 * 48, "{} bytes", png.len());
    }
}
