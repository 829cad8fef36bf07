//! Pillow's `Image.resize` on 8-bit RGB, bit for bit (libImaging/Resample.c).
//!
//! The Hugging Face image processors resize through Pillow, so this is what the vision models
//! were trained on. Pillow convolves each axis separately (horizontal pass first) with a filter
//! stretched by the scale when shrinking (an antialiasing resize, unlike a plain bilinear
//! lookup), in fixed point with 22 fractional bits, rounding and clamping to 8 bits after each
//! pass. Any other resizer differs by a level here and there, 2/255 after normalisation.

use crate::RgbImage;

/// A resampling filter, as Pillow numbers them in processor configs (`resample`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    /// Pillow's `BILINEAR` (2): a triangle of support 1.
    Bilinear,
    /// Pillow's `BICUBIC` (3): Keys' cubic with a = -0.5, support 2.
    Bicubic,
}

impl Filter {
    /// The filter a processor config's `resample` names, if implemented here.
    pub fn from_pil(code: u32) -> Option<Filter> {
        match code {
            2 => Some(Filter::Bilinear),
            3 => Some(Filter::Bicubic),
            _ => None,
        }
    }

    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Bicubic => 2.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Bilinear => {
                let x = x.abs();
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Filter::Bicubic => {
                // libImaging's bicubic_filter, its operations in its order.
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
        }
    }
}

const PRECISION_BITS: u32 = 32 - 8 - 2;

/// For each output pixel of one axis: the first input pixel and the fixed-point weights.
struct Coeffs {
    bounds: Vec<(usize, usize)>,
    ksize: usize,
    weights: Vec<i32>,
}

fn coeffs(in_size: usize, out_size: usize, filter: Filter) -> Coeffs {
    // Pillow computes the box edges in single precision (`float in0, in1`), then in double.
    let scale = (in_size as f32 as f64) / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filter.support() * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let mut bounds = Vec::with_capacity(out_size);
    let mut weights = vec![0i32; out_size * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's (int) cast truncates toward zero; clamped to the image after.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(xmax) {
            let w = filter.weight((x as f64 + xmin as f64 - center + 0.5) * ss);
            *kx = w;
            ww += w;
        }
        for (x, &kx) in k.iter().enumerate().take(xmax) {
            let kx = if ww != 0.0 { kx / ww } else { kx };
            let fixed = kx * (1i64 << PRECISION_BITS) as f64;
            weights[xx * ksize + x] = if kx < 0.0 {
                (-0.5 + fixed) as i32
            } else {
                (0.5 + fixed) as i32
            };
        }
        bounds.push((xmin, xmax));
    }
    Coeffs {
        bounds,
        ksize,
        weights,
    }
}

fn clip8(v: i64) -> u8 {
    if v >= (1i64 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// `image` resized to `width` x `height` as Pillow's `Image.resize(size, filter)` does.
///
/// Horizontal pass first, as Pillow up to 12 does (the pin in scripts/requirements-test.txt).
/// Each pass rounds to 8 bits, so the order shows in the result: Pillow 13 picks the order per
/// size pair by a rule of its own and differs from 12 by one level on some pixels.
pub fn resize(image: &RgbImage, width: u32, height: u32, filter: Filter) -> RgbImage {
    let (in_w, in_h) = (image.width as usize, image.height as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    let mut data = image.data.clone();
    if out_w != in_w {
        data = horizontal(&data, in_w, in_h, out_w, filter);
    }
    if out_h != in_h {
        data = vertical(&data, out_w, in_h, out_h, filter);
    }
    RgbImage {
        width,
        height,
        data,
    }
}

/// Output rows are independent: each pass splits them over this many threads at most, in
/// bands of at least `MIN_BAND` rows (a small image is not worth a thread).
const MAX_THREADS: usize = 8;
const MIN_BAND: usize = 32;

/// Runs `row(y, out_row)` for every row of `out` (rows of `row_len` bytes), in bands over
/// threads. The integer sums are exact, so the split changes nothing in the result.
fn by_rows(out: &mut [u8], row_len: usize, row: impl Fn(usize, &mut [u8]) + Sync) {
    let rows = out.len() / row_len.max(1);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
        .min(rows.div_ceil(MIN_BAND))
        .max(1);
    let band = rows.div_ceil(threads).max(1);
    if threads == 1 {
        for (y, r) in out.chunks_mut(row_len).enumerate() {
            row(y, r);
        }
        return;
    }
    std::thread::scope(|scope| {
        for (b, chunk) in out.chunks_mut(band * row_len).enumerate() {
            let row = &row;
            scope.spawn(move || {
                for (i, r) in chunk.chunks_mut(row_len).enumerate() {
                    row(b * band + i, r);
                }
            });
        }
    });
}

/// Rows of `in_w` pixels resampled to `out_w`.
fn horizontal(src: &[u8], in_w: usize, rows: usize, out_w: usize, filter: Filter) -> Vec<u8> {
    let c = coeffs(in_w, out_w, filter);
    let mut out = vec![0u8; out_w * rows * 3];
    by_rows(&mut out, out_w * 3, |y, out_row| {
        let row = &src[y * in_w * 3..(y + 1) * in_w * 3];
        for (xx, &(xmin, xmax)) in c.bounds.iter().enumerate() {
            let k = &c.weights[xx * c.ksize..xx * c.ksize + xmax];
            for ch in 0..3 {
                let mut ss = 1i64 << (PRECISION_BITS - 1);
                for (x, &kx) in k.iter().enumerate() {
                    ss += row[(xmin + x) * 3 + ch] as i64 * kx as i64;
                }
                out_row[xx * 3 + ch] = clip8(ss);
            }
        }
    });
    out
}

/// Columns of `in_h` pixels resampled to `out_h`: each output row sums its input rows whole
/// (contiguous reads), which gives the same exact integer sums as Pillow's column order.
fn vertical(src: &[u8], width: usize, in_h: usize, out_h: usize, filter: Filter) -> Vec<u8> {
    let c = coeffs(in_h, out_h, filter);
    let line = width * 3;
    let mut out = vec![0u8; line * out_h];
    by_rows(&mut out, line, |yy, out_row| {
        let (ymin, ymax) = c.bounds[yy];
        let k = &c.weights[yy * c.ksize..yy * c.ksize + ymax];
        let mut acc = vec![1i64 << (PRECISION_BITS - 1); line];
        for (y, &ky) in k.iter().enumerate() {
            let src_row = &src[(ymin + y) * line..(ymin + y + 1) * line];
            for (a, &v) in acc.iter_mut().zip(src_row) {
                *a += v as i64 * ky as i64;
            }
        }
        for (o, a) in out_row.iter_mut().zip(&acc) {
            *o = clip8(*a);
        }
    });
    out
}
