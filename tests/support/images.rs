//! The images the vision tests send: a seeded noise whose every pixel differs (so every
//! resampling weight and every patch matters) and smooth bands, both of odd sizes that the
//! processors shrink, stretch or round.

use std::path::{Path, PathBuf};

/// `width` x `height` of xorshift noise from `seed`.
pub fn noise(width: u32, height: u32, seed: u32) -> image::RgbImage {
    let mut state = seed;
    image::RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        image::Rgb([(state >> 8) as u8, (state >> 16) as u8, (state >> 24) as u8])
    })
}

/// `width` x `height` of colour bands.
pub fn bands(width: u32, height: u32) -> image::RgbImage {
    image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 3) as u8, (y * 12) as u8, ((x + y) * 5) as u8])
    })
}

/// The two test images, 45x61 noise from `seed` and 70x20 bands, as `noise.png` and
/// `bands.png` in `dir`.
pub fn two_pngs(dir: &Path, seed: u32) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).expect("create the image folder");
    let paths = vec![dir.join("noise.png"), dir.join("bands.png")];
    noise(45, 61, seed)
        .save(&paths[0])
        .expect("write noise.png");
    bands(70, 20).save(&paths[1]).expect("write bands.png");
    paths
}
