//! A model's `preprocessor_config.json` and what it does to an image: resize, rescale to
//! [0, 1], normalise per channel, channels first. Two resizes:
//! - to a fixed size: Gemma 3's `Gemma3ImageProcessor` (without pan-and-scan, which its configs
//!   leave off); SigLIP-style processors of other models read the same keys;
//! - within a longest edge, each side rounded up to a multiple of the patch: Pixtral's
//!   (`PixtralImageProcessor`, Mistral Small 3.1/3.2), as mlx-vlm's copy of it runs, so an
//!   image keeps its aspect ratio and its own number of patches;
//! - to the nearest multiple of the patch times the merge within a pixel budget: Qwen's
//!   `smart_resize` (`Qwen2VLImageProcessor[Fast]`, Qwen3-VL and Qwen3.5/3.6), as mlx-vlm's
//!   numpy port of it runs (bicubic through Pillow, float32 rescale);
//! - within a patch budget, aspect kept, each side a multiple of the patch times the pooling:
//!   Gemma 4's (`Gemma4ImageProcessor`, mlx-vlm's `get_aspect_ratio_preserving_size`; no
//!   normalisation unless the config asks, float32 rescale).
//!
//! The arithmetic follows the Python processors exactly: transformers' numpy path rescales as
//! `float32(float64(u8) * factor)`, mlx-vlm's Pixtral processor as a float32 product; then
//! `(x - mean) / std` in float32.

use serde::Deserialize;

use crate::resize::{resize, Filter};
use crate::{RgbImage, VisionError};

/// The keys of `preprocessor_config.json` this processor reads; the rest are ignored.
#[derive(Clone, Debug, Deserialize)]
struct Config {
    #[serde(default)]
    image_processor_type: Option<String>,
    #[serde(default = "yes")]
    do_resize: bool,
    #[serde(default = "yes")]
    do_rescale: bool,
    #[serde(default)]
    do_normalize: Option<bool>,
    #[serde(default)]
    do_pan_and_scan: Option<bool>,
    #[serde(default)]
    size: Option<Size>,
    #[serde(default)]
    patch_size: Option<Side>,
    #[serde(default)]
    resample: Option<u32>,
    #[serde(default = "one_255th")]
    rescale_factor: f64,
    #[serde(default)]
    image_mean: Option<Vec<f64>>,
    #[serde(default)]
    image_std: Option<Vec<f64>>,
    // Qwen's: the merge of patches into one token, the pixel budget (`size.shortest_edge` /
    // `size.longest_edge` or these, which win, as mlx-vlm reads them).
    #[serde(default)]
    merge_size: Option<u32>,
    #[serde(default)]
    min_pixels: Option<u64>,
    #[serde(default)]
    max_pixels: Option<u64>,
    // Gemma 4's: soft tokens an image may take, and the pooling of patches into one.
    #[serde(default)]
    max_soft_tokens: Option<u32>,
    #[serde(default)]
    pooling_kernel_size: Option<u32>,
}

/// Qwen's `size`: a pixel budget under the names of edges.
#[derive(Clone, Debug, Default, Deserialize)]
struct PixelBudget {
    #[serde(default)]
    shortest_edge: Option<u64>,
    #[serde(default)]
    longest_edge: Option<u64>,
}

/// `size`: a fixed height and width, or a longest edge (Pixtral).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Size {
    Fixed { height: u32, width: u32 },
    Longest { longest_edge: u32 },
}

/// A patch side: `{"height", "width"}` or one number.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Side {
    Pair { height: u32, width: u32 },
    One(u32),
}

impl Side {
    fn pair(&self) -> (u32, u32) {
        match *self {
            Side::Pair { height, width } => (height, width),
            Side::One(n) => (n, n),
        }
    }
}

/// How an image is resized.
#[derive(Clone, Debug, PartialEq)]
enum Resize {
    /// To `(width, height)`.
    Fixed(u32, u32),
    /// Within `edge` on both sides (aspect kept), then each side rounded up to a multiple of
    /// `patch` (height, width): Pixtral's `get_resize_output_image_size`.
    Longest { edge: u32, patch: (u32, u32) },
    /// Qwen's `smart_resize`: each side to the nearest multiple of `factor`, then scaled as a
    /// whole into `[min_pixels, max_pixels]`.
    Smart {
        factor: u32,
        min_pixels: u64,
        max_pixels: u64,
    },
    /// Gemma 4's: as large as `max_patches` patches of `patch` pixels allow, aspect kept, each
    /// side floored to a multiple of `patch * pooling`.
    Budget {
        patch: u32,
        max_patches: u32,
        pooling: u32,
    },
}

/// The processors that resize with Qwen's `smart_resize`.
const QWEN_PROCESSORS: [&str; 3] = [
    "Qwen2VLImageProcessor",
    "Qwen2VLImageProcessorFast",
    "Qwen3VLImageProcessor",
];

fn yes() -> bool {
    true
}
fn one_255th() -> f64 {
    1.0 / 255.0
}
// transformers' IMAGENET_STANDARD_MEAN / _STD, the Gemma 3 processor's defaults.
const HALF3: [f64; 3] = [0.5; 3];
// OPENAI_CLIP_MEAN / _STD, the Pixtral processor's.
const CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];

/// An image processor built from a `preprocessor_config.json`.
#[derive(Clone, Debug)]
pub struct ImageProcessor {
    resize: Option<Resize>,
    filter: Filter,
    rescale: Option<f64>,
    /// Rescale as a float32 product (mlx-vlm's Pixtral processor) rather than in float64.
    rescale_f32: bool,
    normalize: Option<([f32; 3], [f32; 3])>,
}

/// One image's tensor: `[3, height, width]`, row-major, as the Python processor's
/// `pixel_values[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelValues {
    pub height: u32,
    pub width: u32,
    pub data: Vec<f32>,
}

/// Pixtral's output size for an image of `height` x `width` (mlx-vlm's
/// `get_resize_output_image_size`, its float64 ratio and floors).
fn longest_edge_size(height: u32, width: u32, edge: u32, patch: (u32, u32)) -> (u32, u32) {
    let (mut h, mut w) = (height, width);
    let ratio = (h as f64 / edge as f64).max(w as f64 / edge as f64);
    if ratio > 1.0 {
        h = (h as f64 / ratio).floor() as u32;
        w = (w as f64 / ratio).floor() as u32;
    }
    let up = |n: u32, p: u32| (n.max(1) - 1) / p * p + p;
    (up(h, patch.0), up(w, patch.1))
}

/// Gemma 4's output size (mlx-vlm's `get_aspect_ratio_preserving_size`, its float64 factor and
/// floors); `None` for an image so thin that neither side reaches one multiple, which the
/// Python processor refuses ("a 0 x 0 image").
fn budget_size(
    height: u32,
    width: u32,
    patch: u32,
    max_patches: u32,
    pooling: u32,
) -> Option<(u32, u32)> {
    let (h, w) = (height as f64, width as f64);
    let target_px = max_patches as f64 * (patch as f64) * (patch as f64);
    let factor = (target_px / (h * w)).sqrt();
    let side = (pooling * patch) as f64;
    let mut th = (factor * h / side).floor() * side;
    let mut tw = (factor * w / side).floor() * side;
    if th == 0.0 && tw == 0.0 {
        return None;
    }
    let max_side = (max_patches / (pooling * pooling).max(1)) as f64 * side;
    if th == 0.0 {
        th = side;
        tw = ((w / h).floor() * side).min(max_side);
    } else if tw == 0.0 {
        tw = side;
        th = ((h / w).floor() * side).min(max_side);
    }
    Some((th as u32, tw as u32))
}

/// Qwen's `smart_resize` (mlx-vlm's `_smart_resize_image`, a port of transformers'): Python's
/// `round` (half to even) of each side over `factor`, then, past the budget, the area scaled by
/// `beta` with floors (too big) or ceilings (too small). `None` for an aspect ratio over 200,
/// which the Python processor refuses too.
fn smart_size(
    height: u32,
    width: u32,
    factor: u32,
    min_px: u64,
    max_px: u64,
) -> Option<(u32, u32)> {
    let (h, w, f) = (height as f64, width as f64, factor as f64);
    if h.max(w) / h.min(w) > 200.0 {
        return None;
    }
    let mut hb = (h / f).round_ties_even() * f;
    let mut wb = (w / f).round_ties_even() * f;
    if hb * wb > max_px as f64 {
        let beta = (h * w / max_px as f64).sqrt();
        hb = f.max((h / beta / f).floor() * f);
        wb = f.max((w / beta / f).floor() * f);
    } else if hb * wb < min_px as f64 {
        let beta = (min_px as f64 / (h * w)).sqrt();
        hb = (h * beta / f).ceil() * f;
        wb = (w * beta / f).ceil() * f;
    }
    Some((hb as u32, wb as u32))
}

impl ImageProcessor {
    /// A model folder's image processor: its `preprocessor_config.json`, or else the
    /// `image_processor` of its `processor_config.json` (how Gemma 4's repos ship it); `None`
    /// when it has neither. Errors name the file.
    pub fn from_dir(dir: &std::path::Path) -> Result<Option<ImageProcessor>, VisionError> {
        let read = |name: &str| -> Result<Option<(std::path::PathBuf, String)>, VisionError> {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok(Some((path, text))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(VisionError::Config(format!("{}: {e}", path.display()))),
            }
        };
        let at = |path: &std::path::Path, e: VisionError| {
            VisionError::Config(format!("{}: {e}", path.display()))
        };
        if let Some((path, text)) = read("preprocessor_config.json")? {
            return Self::from_json(&text).map(Some).map_err(|e| at(&path, e));
        }
        let Some((path, text)) = read("processor_config.json")? else {
            return Ok(None);
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| at(&path, VisionError::Config(e.to_string())))?;
        match v.get("image_processor") {
            Some(inner) if inner.is_object() => Self::from_json(&inner.to_string())
                .map(Some)
                .map_err(|e| at(&path, e)),
            _ => Ok(None),
        }
    }

    /// From the text of a `preprocessor_config.json`.
    pub fn from_json(text: &str) -> Result<ImageProcessor, VisionError> {
        let c: Config =
            serde_json::from_str(text).map_err(|e| VisionError::Config(e.to_string()))?;
        if c.do_pan_and_scan == Some(true) {
            return Err(VisionError::Config(
                "do_pan_and_scan is on; rmx resizes whole images only (set it to false)".into(),
            ));
        }
        let kind = c.image_processor_type.as_deref();
        let pixtral = kind == Some("PixtralImageProcessor");
        let qwen = kind.is_some_and(|k| QWEN_PROCESSORS.contains(&k));
        let gemma4 = kind == Some("Gemma4ImageProcessor");
        // Each processor's own default filter: Gemma 3's bilinear, Pixtral's bicubic.
        // (Qwen's: bicubic, which mlx-vlm uses whatever the config says.)
        let resample = match c.resample {
            _ if qwen || gemma4 => 3,
            Some(r) => r,
            None if pixtral => 3,
            None => 2,
        };
        let filter = Filter::from_pil(resample).ok_or_else(|| {
            VisionError::Config(format!(
                "resample {resample} is not implemented (Pillow's BILINEAR, 2, and BICUBIC, 3)"
            ))
        })?;
        let three = |v: Option<&Vec<f64>>, default: [f64; 3], what: &str| match v.map(Vec::as_slice)
        {
            None => Ok(default.map(|x| x as f32)),
            Some([a, b, c]) => Ok([*a as f32, *b as f32, *c as f32]),
            Some(v) => Err(VisionError::Config(format!(
                "{what} has {} values, not 3",
                v.len()
            ))),
        };
        let resize = match (&c.size, pixtral) {
            _ if qwen => {
                let budget: PixelBudget = serde_json::from_str::<serde_json::Value>(text)
                    .ok()
                    .and_then(|v| v.get("size").cloned())
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default();
                let patch = c.patch_size.as_ref().map_or(16, |p| p.pair().0);
                let factor = patch * c.merge_size.unwrap_or(2);
                let min_pixels = c.min_pixels.or(budget.shortest_edge).unwrap_or(56 * 56);
                let max_pixels = c
                    .max_pixels
                    .or(budget.longest_edge)
                    .unwrap_or(14 * 14 * 4 * 1280);
                if factor == 0 || max_pixels == 0 || min_pixels > max_pixels {
                    return Err(VisionError::Config(format!(
                        "patch_size x merge_size is {factor} and the pixel budget \
                         [{min_pixels}, {max_pixels}]: both must be positive and ordered"
                    )));
                }
                Resize::Smart {
                    factor,
                    min_pixels,
                    max_pixels,
                }
            }
            _ if gemma4 => {
                let patch = c.patch_size.as_ref().map_or(16, |p| p.pair().0);
                let (tokens, pooling) = (
                    c.max_soft_tokens.unwrap_or(280),
                    c.pooling_kernel_size.unwrap_or(3),
                );
                if patch == 0 || tokens == 0 || pooling == 0 {
                    return Err(VisionError::Config(
                        "patch_size, max_soft_tokens and pooling_kernel_size must be positive"
                            .into(),
                    ));
                }
                Resize::Budget {
                    patch,
                    max_patches: tokens * pooling * pooling,
                    pooling,
                }
            }
            (None, _) => return Err(VisionError::Config("size is missing".into())),
            (Some(Size::Fixed { height, width }), false) => {
                if *height == 0 || *width == 0 {
                    return Err(VisionError::Config("size has a zero side".into()));
                }
                Resize::Fixed(*width, *height)
            }
            (Some(Size::Longest { longest_edge }), true) => {
                let patch = c.patch_size.as_ref().map_or((16, 16), Side::pair);
                if *longest_edge == 0 || patch.0 == 0 || patch.1 == 0 {
                    return Err(VisionError::Config(
                        "size.longest_edge or patch_size is zero".into(),
                    ));
                }
                Resize::Longest {
                    edge: *longest_edge,
                    patch,
                }
            }
            (Some(Size::Longest { .. }), false) => {
                return Err(VisionError::Config(
                    "size.longest_edge is read for PixtralImageProcessor only".into(),
                ))
            }
            (Some(Size::Fixed { .. }), true) => {
                return Err(VisionError::Config(
                    "a PixtralImageProcessor's size is a longest_edge".into(),
                ))
            }
        };
        let (mean, std) = if pixtral {
            (CLIP_MEAN, CLIP_STD)
        } else {
            (HALF3, HALF3)
        };
        Ok(ImageProcessor {
            resize: c.do_resize.then_some(resize),
            filter,
            rescale: c.do_rescale.then_some(c.rescale_factor),
            // mlx-vlm's Pixtral, Qwen and Gemma 4 processors rescale in float32.
            rescale_f32: pixtral || qwen || gemma4,
            // Gemma 4's processor leaves the [0, 1] values as they are unless asked.
            normalize: if c.do_normalize.unwrap_or(!gemma4) {
                Some((
                    three(c.image_mean.as_ref(), mean, "image_mean")?,
                    three(c.image_std.as_ref(), std, "image_std")?,
                ))
            } else {
                None
            },
        })
    }

    /// Pixtral's sides rounded up to a multiple of `patch` pixels instead of the config's
    /// `patch_size`: Mistral 3's processor passes the patch times the spatial merge (28 for
    /// Mistral Small 3.1), so that merged patches tile the image. No change for a fixed size.
    pub fn with_patch_multiple(mut self, patch: u32) -> ImageProcessor {
        if let Some(Resize::Longest { patch: p, .. }) = &mut self.resize {
            *p = (patch.max(1), patch.max(1));
        }
        self
    }

    /// The `(height, width)` of the tensor made of an image of `height` x `width` pixels. An
    /// image the processor refuses ([`ImageProcessor::check`] says why) keeps its size here.
    pub fn output_size(&self, height: u32, width: u32) -> (u32, u32) {
        match self.resize {
            None => (height, width),
            Some(Resize::Fixed(w, h)) => (h, w),
            Some(Resize::Longest { edge, patch }) => longest_edge_size(height, width, edge, patch),
            Some(Resize::Smart {
                factor,
                min_pixels,
                max_pixels,
            }) => {
                smart_size(height, width, factor, min_pixels, max_pixels).unwrap_or((height, width))
            }
            Some(Resize::Budget {
                patch,
                max_patches,
                pooling,
            }) => {
                budget_size(height, width, patch, max_patches, pooling).unwrap_or((height, width))
            }
        }
    }

    /// Whether this processor takes an image of `height` x `width` pixels: Qwen's refuses an
    /// aspect ratio over 200 (its merged patches could not tile the image), Gemma 4's one so
    /// thin that no side reaches a whole pooled patch.
    pub fn check(&self, height: u32, width: u32) -> Result<(), VisionError> {
        match self.resize {
            Some(Resize::Smart { factor, .. })
                if smart_size(height, width, factor, 1, u64::MAX).is_none() =>
            {
                Err(VisionError::AspectRatio { width, height })
            }
            Some(Resize::Budget {
                patch,
                max_patches,
                pooling,
            }) if budget_size(height, width, patch, max_patches, pooling).is_none() => {
                Err(VisionError::AspectRatio { width, height })
            }
            _ => Ok(()),
        }
    }

    /// The tensor the vision tower takes for `image`.
    pub fn pixel_values(&self, image: &RgbImage) -> PixelValues {
        let (h, w) = self.output_size(image.height, image.width);
        let img = if (h, w) == (image.height, image.width) {
            // Pillow returns a copy for the same size.
            image.clone()
        } else {
            resize(image, w, h, self.filter)
        };
        let plane = img.width as usize * img.height as usize;
        let mut data = vec![0f32; 3 * plane];
        for (i, px) in img.data.chunks_exact(3).enumerate() {
            for ch in 0..3 {
                let mut v = match self.rescale {
                    Some(f) if self.rescale_f32 => px[ch] as f32 * f as f32,
                    Some(f) => (px[ch] as f64 * f) as f32,
                    None => px[ch] as f32,
                };
                if let Some((mean, std)) = &self.normalize {
                    v = (v - mean[ch]) / std[ch];
                }
                data[ch * plane + i] = v;
            }
        }
        PixelValues {
            height: img.height,
            width: img.width,
            data,
        }
    }
}
