//! A prompt's images on the engine thread (issue #27): encoded by the model's vision tower when
//! the sequence is admitted, then each prefill chunk is given the feature rows of the image
//! placeholders it reads, in prompt order.
//!
//! The prefix cache keys on tokens, and an image's placeholder tokens say nothing of its
//! pixels: a request with images is looked up and stored under its prompt with each image's
//! placeholders replaced by an id made from a hash of that image's pixel values
//! ([`cache_key`]), so the next turn of a chat about the same image reads it from the cache and
//! another image's prompt never does. It is prefilled alone.

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache};
use rmx_vision::PixelValues;
use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

pub(crate) struct ImageRows {
    /// `[images * per_image, hidden]`, in prompt order.
    features: Array,
    /// Rows handed out so far.
    used: i32,
    placeholder: u32,
}

/// `prompt` as the prefix cache knows it: each image's placeholders replaced by one id made
/// from its pixel values' SHA-256, past every vocabulary (2^31 and up); `None` for a model that
/// takes no images (the request fails at admission anyway).
pub(crate) fn cache_key(
    model: &dyn CausalLm,
    prompt: &[u32],
    images: &[PixelValues],
) -> Option<Vec<u32>> {
    let tokens = model.vision()?.tokens();
    let ids: Vec<u32> = images
        .iter()
        .map(|img| {
            let mut h = Sha256::new();
            h.update([img.width, img.height].map(u32::to_le_bytes).concat());
            // In pieces: the same digest without a copy of the whole tensor.
            for piece in img.data.chunks(16 * 1024) {
                let bytes: Vec<u8> = piece.iter().flat_map(|v| v.to_le_bytes()).collect();
                h.update(&bytes);
            }
            let d = h.finalize();
            0x8000_0000 | (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) & 0x7FFF_FFFF)
        })
        .collect();
    let mut seen = 0;
    Some(
        prompt
            .iter()
            .map(|&t| {
                if t != tokens.image_token {
                    return t;
                }
                let id = ids
                    .get(seen / tokens.per_image.max(1))
                    .copied()
                    .unwrap_or(t);
                seen += 1;
                id
            })
            .collect(),
    )
}

impl ImageRows {
    /// Encodes `images` for `prompt`, which must hold exactly their placeholders, none last
    /// (the last prompt token is read by the first decode step, which takes no images).
    pub fn encode(model: &dyn CausalLm, images: &[PixelValues], prompt: &[u32]) -> Result<Self> {
        let vision = model.vision().ok_or_else(|| {
            EngineError::Invalid(format!(
                "this model ({}) takes no images; send text only, or use a vision model whose \
                 files carry its vision tower",
                model.info().model_type
            ))
        })?;
        let tokens = vision.tokens();
        let side = vision.image_size();
        let placeholders = prompt.iter().filter(|&&t| t == tokens.image_token).count();
        if placeholders != images.len() * tokens.per_image {
            return Err(EngineError::Invalid(format!(
                "the prompt has {placeholders} image placeholder tokens; {} images take {} ({} each)",
                images.len(),
                images.len() * tokens.per_image,
                tokens.per_image
            )));
        }
        if prompt.last() == Some(&tokens.image_token) {
            return Err(EngineError::Invalid(
                "the prompt ends inside an image; put text or the generation prompt after it"
                    .into(),
            ));
        }
        let mut pixels = Vec::with_capacity(images.len() * 3 * (side * side) as usize);
        for (i, img) in images.iter().enumerate() {
            if (img.height, img.width) != (side, side)
                || img.data.len() != 3 * (side * side) as usize
            {
                return Err(EngineError::Invalid(format!(
                    "image {i} is {}x{} pixel values; this model's processor makes {side}x{side}",
                    img.width, img.height
                )));
            }
            pixels.extend_from_slice(&img.data);
        }
        let n = images.len() as i32;
        let side = side as i32;
        let pixels = Array::from_slice(&pixels, &[n, 3, side, side])?;
        let features = vision.encode(&pixels)?;
        let features = features.reshape(&[n * features.dim(1), features.dim(2)])?;
        Ok(ImageRows {
            features,
            used: 0,
            placeholder: tokens.image_token,
        })
    }

    /// Skips the rows of the placeholders in `read`, the prompt tokens a cached prefix holds.
    pub fn skip_read(&mut self, read: &[u32]) {
        self.used += read.iter().filter(|&&t| t == self.placeholder).count() as i32;
    }

    /// The model over one prefill chunk (`[1, L]`), with the rows of the placeholders in it.
    pub fn forward(
        &mut self,
        model: &dyn CausalLm,
        chunk: &[u32],
        tokens: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let k = chunk.iter().filter(|&&t| t == self.placeholder).count() as i32;
        if k == 0 {
            return Ok(model.forward_hidden(tokens, cache)?);
        }
        let rows = self.features.slice_axis(0, self.used, self.used + k)?;
        self.used += k;
        Ok(model.forward_hidden_with_images(tokens, &rows, cache)?)
    }
}
