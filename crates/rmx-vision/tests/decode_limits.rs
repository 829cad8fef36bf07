//! Bad images are refused with the error that says why, and a decompression bomb is refused
//! from its header, before any pixel is decoded (issue #27).

#![allow(clippy::unwrap_used)]

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, Rgb, RgbImage};
use rmx_vision::{decode, Limits, VisionError};

fn encoded(format: ImageFormat, width: u32, height: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(width, height, |x, y| Rgb([x as u8, y as u8, 7]));
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img)
        .write_to(&mut out, format)
        .expect("encode a test image");
    out.into_inner()
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A valid PNG whose header claims `width` x `height` (its CRC recomputed), followed by the
/// few bytes of a small image's data: what a bomb looks like before it is inflated.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut png = encoded(ImageFormat::Png, 4, 4);
    // signature (8), IHDR length (4), "IHDR" (4), width, height, ...
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

#[test]
fn a_bomb_is_refused_from_its_header() {
    let bomb = png_claiming(100_000, 100_000);
    assert!(bomb.len() < 200, "the bomb is a small file");
    match decode(&bomb, &Limits::default()) {
        Err(VisionError::TooLarge { width, height, .. }) => {
            assert_eq!((width, height), (100_000, 100_000))
        }
        other => panic!("a 100000x100000 PNG header: {other:?}"),
    }
    // A GIF's screen size too (no checksum there).
    let mut gif = encoded(ImageFormat::Gif, 4, 4);
    gif[6..8].copy_from_slice(&60_000u16.to_le_bytes());
    gif[8..10].copy_from_slice(&60_000u16.to_le_bytes());
    assert!(matches!(
        decode(&gif, &Limits::default()),
        Err(VisionError::TooLarge { .. })
    ));
}

#[test]
fn the_limit_is_per_side_and_in_all() {
    let limits = Limits {
        max_side: 64,
        max_pixels: 1000,
    };
    assert!(decode(&encoded(ImageFormat::Png, 64, 15), &limits).is_ok());
    assert!(matches!(
        decode(&encoded(ImageFormat::Png, 65, 2), &limits),
        Err(VisionError::TooLarge { .. })
    ));
    assert!(matches!(
        decode(&encoded(ImageFormat::Png, 40, 40), &limits),
        Err(VisionError::TooLarge { .. })
    ));
}

#[test]
fn truncated_and_unknown_images_say_so() {
    for format in [
        ImageFormat::Png,
        ImageFormat::Jpeg,
        ImageFormat::Gif,
        ImageFormat::WebP,
    ] {
        let full = encoded(format, 40, 30);
        assert!(decode(&full, &Limits::default()).is_ok(), "{format:?}");
        let cut = &full[..full.len() / 2];
        assert!(
            matches!(
                decode(cut, &Limits::default()),
                Err(VisionError::Undecodable(_))
            ),
            "half a {format:?}: {:?}",
            decode(cut, &Limits::default()).map(|i| (i.width, i.height))
        );
    }
    assert!(matches!(
        decode(b"GIF87a", &Limits::default()),
        Err(VisionError::Undecodable(_))
    ));
    assert!(matches!(
        decode(b"%PDF-1.7 not an image", &Limits::default()),
        Err(VisionError::UnknownFormat)
    ));
    assert!(matches!(
        // A BMP's magic: a format `image` knows, but not one rmx takes.
        decode(&[b"BM".as_slice(), &[0u8; 60]].concat(), &Limits::default()),
        Err(VisionError::UnknownFormat)
    ));
}
