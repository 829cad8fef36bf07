//! The image side of vision-language models: each family's vision tower and projector, from
//! pixel values to the rows that replace a prompt's image tokens. Preprocessing (decode,
//! resize, normalise) is rmx-vision's; the splice into the text embeddings is the language
//! model's (see `CausalLm::forward_hidden_with_images`).

pub mod gemma4;
pub mod pixtral;
pub mod qwen_vl;
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
    /// The placeholder token each feature row replaces (`image_token_index`).
    fn image_token(&self) -> u32;

    /// Placeholder tokens (feature rows) an image of `height` x `width` pixel values takes.
    fn placeholders(&self, height: u32, width: u32) -> usize;

    /// Whether the tower takes pixel values of this size, as its processor makes them; the
    /// refusal says what it takes.
    fn check_size(&self, height: u32, width: u32) -> std::result::Result<(), String>;

    /// Each image's `[3, height, width]` pixel values, as the processor makes them, to
    /// `[rows, text_hidden]` features in the model's dtype: each image's
    /// [`ImageEncoder::placeholders`] rows, image after image.
    fn encode(&self, images: &[Array]) -> Result<Array>;
}

/// A model's loaded tower, or the refusal of one loaded without it (a conversion whose files
/// carry none): `model` names it in the message.
pub(crate) fn loaded<'a, V>(vision: &'a Option<V>, model: &str) -> Result<&'a V> {
    vision.as_ref().ok_or_else(|| {
        crate::error::ModelError::Images(format!(
            "this {model} was loaded without its vision tower (the files carry none)"
        ))
    })
}

/// The ids of one sequence's tokens (`[1, L]`), which a splice of image features walks; a
/// batch is refused (images go with one sequence at a time).
pub(crate) fn sequence_ids(tokens: &Array) -> Result<Vec<i32>> {
    if tokens.ndim() != 2 || tokens.dim(0) != 1 {
        return Err(crate::error::ModelError::Images(format!(
            "images go with one sequence at a time, not tokens of shape {:?}",
            tokens.shape()
        )));
    }
    Ok(tokens.astype(rmx_mlx::Dtype::I32)?.to_vec::<i32>()?)
}

/// `embeds` (`[L, hidden]`, the tokens' own) with the rows of `features` (`[n, hidden]`) in the
/// places of the `n` tokens of `ids` that are `image_token`, in order (one gather over
/// `[embeds; features]`, as mlx-vlm's `merge_input_ids_with_image_features` scatters them):
/// `[1, L, hidden]`.
pub(crate) fn splice(
    embeds: &Array,
    ids: &[i32],
    image_token: u32,
    features: &Array,
) -> Result<Array> {
    let image_token = image_token as i32;
    let l = ids.len() as i32;
    let mut next = 0;
    let index: Vec<i32> = (0..l)
        .map(|i| match ids[i as usize] == image_token {
            true => {
                next += 1;
                l + next - 1
            }
            false => i,
        })
        .collect();
    if next != features.dim(0) {
        return Err(crate::error::ModelError::Images(format!(
            "{next} image tokens in the prompt but {} image features",
            features.dim(0)
        )));
    }
    let rows = rmx_mlx::concatenate(&[embeds, &features.astype(embeds.dtype())?], 0)?;
    Ok(rows
        .take(&Array::from_slice(&index, &[l])?, 0)?
        .expand_dims(&[0])?)
}

/// A vision-language checkpoint's `vision_config`, read as `T`; a refusal names the file.
pub(crate) fn vision_config<T: serde::de::DeserializeOwned>(
    raw: &crate::config::RawConfig,
) -> Result<T> {
    let bad = |message: String| crate::error::ModelError::Config {
        path: raw.path.clone(),
        message,
    };
    let v = raw
        .raw
        .get("vision_config")
        .cloned()
        .ok_or_else(|| bad("vision weights but no vision_config".into()))?;
    serde_json::from_value(v).map_err(|e| bad(format!("invalid vision_config: {e}")))
}

/// Placeholders of an image of `height` x `width` pixel values on a tower that makes one row
/// per `unit` x `unit`-pixel cell (a merged or pooled patch): Pixtral, Qwen3.5, Gemma 4.
pub(crate) fn cells(unit: u32, height: u32, width: u32) -> usize {
    (height / unit.max(1)) as usize * (width / unit.max(1)) as usize
}

/// Whether such a tower takes pixel values of this size: whole cells, as its processor makes.
pub(crate) fn check_cells(unit: u32, height: u32, width: u32) -> std::result::Result<(), String> {
    if height > 0 && width > 0 && height.is_multiple_of(unit) && width.is_multiple_of(unit) {
        Ok(())
    } else {
        Err(format!(
            "{width}x{height} pixel values; this model's processor makes sides that are \
             multiples of {unit}"
        ))
    }
}

/// The head sizes MLX's fused attention takes.
const FUSED_HEAD_DIMS: [i32; 3] = [64, 80, 128];

/// mlx-vlm's `ensure_fused_sdpa`, unmasked: a head smaller than a fused size is padded with
/// zeros up to it (Qwen3.5's 72 to 80), attended, and cut back, so the attention runs the
/// kernel mlx-vlm's does.
pub(crate) fn fused_sdpa(q: &Array, k: &Array, v: &Array, scale: f32) -> Result<Array> {
    use rmx_mlx::fast::{scaled_dot_product_attention as sdpa, Mask};
    let d = q.dim(-1);
    let target = FUSED_HEAD_DIMS.into_iter().find(|t| d <= *t).unwrap_or(d);
    if target == d {
        return Ok(sdpa(q, k, v, scale, Mask::None, None)?);
    }
    let zero = Array::scalar_as(0.0, q.dtype())?;
    let pad = |x: &Array| x.pad(&[3], &[0], &[target - d], &zero);
    let o = sdpa(&pad(q)?, &pad(k)?, &pad(v)?, scale, Mask::None, None)?;
    Ok(o.slice_axis(-1, 0, d)?)
}

/// A tower whose images are all `side` x `side` and take `per_image` placeholders each
/// (Gemma 3's SigLIP).
pub(crate) fn check_square(side: u32, height: u32, width: u32) -> std::result::Result<(), String> {
    if (height, width) == (side, side) {
        Ok(())
    } else {
        Err(format!(
            "{width}x{height} pixel values; this model's processor makes {side}x{side}"
        ))
    }
}
