//! Bytes to 8-bit RGB, with the dimensions checked before decoding.
//!
//! RGB as mlx-vlm loads an image before its processor sees it (`load_image` in mlx_vlm/utils.py:
//! Pillow's `ImageOps.exif_transpose`, then `convert("RGB")`): the EXIF orientation is applied,
//! an alpha channel is dropped (not composited), grey is repeated into three channels. A GIF
//! gives its first frame, as Pillow's `Image.open` does.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};

use crate::VisionError;

/// An 8-bit RGB image, row-major, 3 bytes a pixel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    pub width: u32,
    pub height: u32,
    pub data: Vec<u8>,
}

/// The largest image [`decode`] accepts. The defaults admit any photo a phone takes (48 MP,
/// 8000x6000) and refuse what only an attack sends: a decoded 8192x8192 RGBA image is 256 MiB.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_side: u32,
    pub max_pixels: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_side: 16_384,
            max_pixels: 50_000_000,
        }
    }
}

impl Limits {
    fn check(&self, width: u32, height: u32) -> Result<(), VisionError> {
        if width == 0 || height == 0 {
            return Err(VisionError::Empty { width, height });
        }
        if width > self.max_side
            || height > self.max_side
            || width as u64 * height as u64 > self.max_pixels
        {
            return Err(VisionError::TooLarge {
                width,
                height,
                max_side: self.max_side,
                max_pixels: self.max_pixels,
            });
        }
        Ok(())
    }
}

/// The format and dimensions from the header only; nothing is decoded.
pub fn dimensions(bytes: &[u8]) -> Result<(ImageFormat, u32, u32), VisionError> {
    let reader = reader(bytes)?;
    let format = reader.format().ok_or(VisionError::UnknownFormat)?;
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| VisionError::Undecodable(e.to_string()))?;
    Ok((format, w, h))
}

/// Decodes `bytes` to RGB after checking the header's dimensions against `limits`.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<RgbImage, VisionError> {
    let (_, width, height) = dimensions(bytes)?;
    limits.check(width, height)?;
    let mut reader = reader(bytes)?;
    // The decoder's own limits too: a file whose frames claim more than its header (a GIF's
    // frames are sized separately) is stopped inside the decoder.
    let mut decoder_limits = image::Limits::default();
    decoder_limits.max_image_width = Some(limits.max_side);
    decoder_limits.max_image_height = Some(limits.max_side);
    decoder_limits.max_alloc = Some(limits.max_pixels.saturating_mul(8));
    reader.limits(decoder_limits);
    let undecodable = |e: image::ImageError| VisionError::Undecodable(e.to_string());
    let mut decoder = reader.into_decoder().map_err(undecodable)?;
    let orientation = decoder.orientation().map_err(undecodable)?;
    let mut img = DynamicImage::from_decoder(decoder).map_err(undecodable)?;
    img.apply_orientation(orientation);
    let (width, height) = (img.width(), img.height());
    Ok(RgbImage {
        width,
        height,
        data: img.to_rgb8().into_raw(),
    })
}

fn reader(bytes: &[u8]) -> Result<ImageReader<Cursor<&[u8]>>, VisionError> {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| VisionError::Undecodable(e.to_string()))?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif) => {
            Ok(reader)
        }
        _ => Err(VisionError::UnknownFormat),
    }
}
