//! A model's `preprocessor_config.json` and what it does to an image: resize to a fixed size,
//! rescale to [0, 1], normalise per channel, channels first. This is Gemma 3's
//! `Gemma3ImageProcessor` (without pan-and-scan, which its configs leave off); SigLIP-style
//! processors of other models read the same keys.
//!
//! The arithmetic follows transformers' numpy path exactly: `float32(float64(u8) * factor)`,
//! then `(x - mean) / std` in float32.

use serde::Deserialize;

use crate::resize::{resize, Filter};
use crate::{RgbImage, VisionError};

/// The keys of `preprocessor_config.json` this processor reads; the rest are ignored.
#[derive(Clone, Debug, Deserialize)]
struct Config {
    #[serde(default = "yes")]
    do_resize: bool,
    #[serde(default = "yes")]
    do_rescale: bool,
    #[serde(default = "yes")]
    do_normalize: bool,
    #[serde(default)]
    do_pan_and_scan: Option<bool>,
    size: Size,
    #[serde(default = "bilinear")]
    resample: u32,
    #[serde(default = "one_255th")]
    rescale_factor: f64,
    #[serde(default = "half3")]
    image_mean: Vec<f64>,
    #[serde(default = "half3")]
    image_std: Vec<f64>,
}

#[derive(Clone, Debug, Deserialize)]
struct Size {
    height: u32,
    width: u32,
}

fn yes() -> bool {
    true
}
fn bilinear() -> u32 {
    2
}
fn one_255th() -> f64 {
    1.0 / 255.0
}
// transformers' IMAGENET_STANDARD_MEAN / _STD, the Gemma 3 processor's defaults.
fn half3() -> Vec<f64> {
    vec![0.5; 3]
}

/// An image processor built from a `preprocessor_config.json`.
#[derive(Clone, Debug)]
pub struct ImageProcessor {
    resize_to: Option<(u32, u32)>,
    filter: Filter,
    rescale: Option<f64>,
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

impl ImageProcessor {
    /// From the text of a `preprocessor_config.json`.
    pub fn from_json(text: &str) -> Result<ImageProcessor, VisionError> {
        let c: Config =
            serde_json::from_str(text).map_err(|e| VisionError::Config(e.to_string()))?;
        if c.do_pan_and_scan == Some(true) {
            return Err(VisionError::Config(
                "do_pan_and_scan is on; rmx resizes whole images only (set it to false)".into(),
            ));
        }
        let filter = Filter::from_pil(c.resample).ok_or_else(|| {
            VisionError::Config(format!(
                "resample {} is not implemented (only Pillow's BILINEAR, 2)",
                c.resample
            ))
        })?;
        let three = |v: &[f64], what: &str| -> Result<[f32; 3], VisionError> {
            match v {
                [a, b, c] => Ok([*a as f32, *b as f32, *c as f32]),
                _ => Err(VisionError::Config(format!(
                    "{what} has {} values, not 3",
                    v.len()
                ))),
            }
        };
        if c.size.height == 0 || c.size.width == 0 {
            return Err(VisionError::Config("size has a zero side".into()));
        }
        Ok(ImageProcessor {
            resize_to: c.do_resize.then_some((c.size.width, c.size.height)),
            filter,
            rescale: c.do_rescale.then_some(c.rescale_factor),
            normalize: if c.do_normalize {
                Some((
                    three(&c.image_mean, "image_mean")?,
                    three(&c.image_std, "image_std")?,
                ))
            } else {
                None
            },
        })
    }

    /// The tensor the vision tower takes for `image`.
    pub fn pixel_values(&self, image: &RgbImage) -> PixelValues {
        let img = match self.resize_to {
            Some((w, h)) => resize(image, w, h, self.filter),
            None => image.clone(),
        };
        let plane = img.width as usize * img.height as usize;
        let mut data = vec![0f32; 3 * plane];
        for (i, px) in img.data.chunks_exact(3).enumerate() {
            for ch in 0..3 {
                let mut v = match self.rescale {
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
