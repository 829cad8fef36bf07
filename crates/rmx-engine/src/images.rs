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
    let vision = model.vision()?;
    let image_token = vision.image_token();
    // Each image's id, once for each of its placeholders, in prompt order.
    let mut ids = images.iter().flat_map(|img| {
        let mut h = Sha256::new();
        h.update([img.width, img.height].map(u32::to_le_bytes).concat());
        // In pieces: the same digest without a copy of the whole tensor.
        for piece in img.data.chunks(16 * 1024) {
            let bytes: Vec<u8> = piece.iter().flat_map(|v| v.to_le_bytes()).collect();
            h.update(&bytes);
        }
        let d = h.finalize();
        let id = 0x8000_0000 | (u32::from_le_bytes([d[0], d[1], d[2], d[3]]) & 0x7FFF_FFFF);
        std::iter::repeat_n(id, vision.placeholders(img.height, img.width))
    });
    Some(
        prompt
            .iter()
            .map(|&t| match t == image_token {
                true => ids.next().unwrap_or(t),
                false => t,
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
        let image_token = vision.image_token();
        let placeholders = prompt.iter().filter(|&&t| t == image_token).count();
        let mut want = 0;
        for (i, img) in images.iter().enumerate() {
            vision
                .check_size(img.height, img.width)
                .map_err(|e| EngineError::Invalid(format!("image {i} is {e}")))?;
            if img.data.len() != 3 * (img.height * img.width) as usize {
                return Err(EngineError::Invalid(format!(
                    "image {i} has {} pixel values, not 3 x {} x {}",
                    img.data.len(),
                    img.height,
                    img.width
                )));
            }
            want += vision.placeholders(img.height, img.width);
        }
        if placeholders != want {
            return Err(EngineError::Invalid(format!(
                "the prompt has {placeholders} image placeholder tokens; its {} images take {want}",
                images.len(),
            )));
        }
        if prompt.last() == Some(&image_token) {
            return Err(EngineError::Invalid(
                "the prompt ends inside an image; put text or the generation prompt after it"
                    .into(),
            ));
        }
        let pixels = images
            .iter()
            .map(|img| {
                let (h, w) = (img.height as i32, img.width as i32);
                Ok(Array::from_slice(&img.data, &[3, h, w])?)
            })
            .collect::<Result<Vec<_>>>()?;
        let features = vision.encode(&pixels)?;
        Ok(ImageRows {
            features,
            used: 0,
            placeholder: image_token,
        })
    }

    /// Skips the rows of the placeholders in `read`, the prompt tokens a cached prefix holds.
    pub fn skip_read(&mut self, read: &[u32]) {
        self.used += read.iter().filter(|&&t| t == self.placeholder).count() as i32;
    }

    /// Where a prefill chunk of `prompt` from `start` ends, at `end` or near it: never inside an
    /// image's run of placeholders (Gemma 4's see one another both ways, so a run is read in one
    /// forward), backed off to the run's start, or, where the run began at `start`, carried to
    /// its end.
    pub fn chunk_end(&self, prompt: &[u32], start: usize, end: usize) -> usize {
        chunk_end(prompt, self.placeholder, start, end)
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

/// [`ImageRows::chunk_end`] for the placeholder `ph`.
fn chunk_end(prompt: &[u32], ph: u32, start: usize, end: usize) -> usize {
    let inside = |i: usize| i > start && i < prompt.len() && prompt[i - 1] == ph && prompt[i] == ph;
    if !inside(end) {
        return end;
    }
    let mut back = end;
    while back > start && prompt[back - 1] == ph {
        back -= 1;
    }
    if back > start {
        return back;
    }
    let mut forward = end;
    while forward < prompt.len() && prompt[forward] == ph {
        forward += 1;
    }
    forward
}

#[cfg(test)]
mod tests {
    use super::chunk_end;

    #[test]
    fn a_chunk_never_ends_inside_an_image() {
        // Text 1, 2; an image of four 9s; text 3.
        let p = [1, 2, 9, 9, 9, 9, 3];
        // Ends outside a run stay.
        assert_eq!(chunk_end(&p, 9, 0, 2), 2);
        assert_eq!(chunk_end(&p, 9, 0, 6), 6);
        // Inside: back to the run's start.
        assert_eq!(chunk_end(&p, 9, 0, 4), 2);
        // A chunk that starts at the run carries it whole.
        assert_eq!(chunk_end(&p, 9, 2, 3), 6);
    }
}
