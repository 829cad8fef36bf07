//! A prompt's images on the engine thread (issue #27): encoded by the model's vision tower when
//! the sequence is admitted, then each prefill chunk is given the feature rows of the image
//! placeholders it reads, in prompt order.
//!
//! A request with images neither reads nor fills the prefix cache and is prefilled alone: its
//! tokens (placeholders) say nothing of the pixels, so a cache keyed on them would answer
//! another image's prompt.

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache};
use rmx_vision::PixelValues;

use crate::error::{EngineError, Result};

pub(crate) struct ImageRows {
    /// `[images * per_image, hidden]`, in prompt order.
    features: Array,
    /// Rows handed out so far.
    used: i32,
    placeholder: u32,
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
