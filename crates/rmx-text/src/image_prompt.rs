//! Where a prompt's images go: a chat template writes one marker per image (Gemma 3's writes
//! `<start_of_image>` for an `{"type": "image"}` content part), and the model's processor
//! widens each marker into the run of placeholder tokens its vision tower's features replace.
//! Done on the text before tokenizing, as the processors do: the newlines around the run merge
//! with the template's own into single tokens ("\n\n\n", "\n\n\n\n").

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImagePromptError {
    #[error(
        "the prompt has {markers} image markers ({marker}) but {images} images came with it; \
         give each image its own content part"
    )]
    Count {
        markers: usize,
        images: usize,
        marker: String,
    },
}

/// How one model family marks images in a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImagePrompt {
    /// Gemma 3 (`Gemma3Processor.full_image_sequence`): each `begin` becomes
    /// `"\n\n" + begin + placeholder × per_image + end + "\n\n"`.
    Gemma3 {
        begin: String,
        placeholder: String,
        end: String,
        per_image: usize,
    },
    /// Pixtral (Mistral 3's processor): each `image` marker becomes the image's grid of merged
    /// patches (`unit` pixels a side), row by row: `image` × columns, `brk` between rows,
    /// `end` after the last.
    Pixtral {
        image: String,
        brk: String,
        end: String,
        unit: u32,
    },
    /// Qwen3-VL / Qwen3.5 (`Qwen3VLProcessor`): the template writes each image as
    /// `<|vision_start|><|image_pad|><|vision_end|>`, and each `pad` becomes one per merged
    /// patch (`unit` pixels a side).
    Qwen { pad: String, unit: u32 },
    /// Gemma 4 (`Gemma4Processor`): the template writes `image` for each image, which becomes
    /// `begin` + `image` × its soft tokens + `end`, a soft token per `unit` x `unit` pixels.
    Gemma4 {
        begin: String,
        image: String,
        end: String,
        unit: u32,
    },
}

impl ImagePrompt {
    /// The marker a chat template writes for one image.
    pub fn marker(&self) -> &str {
        match self {
            ImagePrompt::Gemma3 { begin, .. } => begin,
            ImagePrompt::Pixtral { image, .. } => image,
            ImagePrompt::Qwen { pad, .. } => pad,
            ImagePrompt::Gemma4 { image, .. } => image,
        }
    }

    /// Placeholder tokens an image whose pixel values are `height` x `width` takes in the
    /// prompt (what it counts in usage, with the markers around them).
    pub fn placeholders(&self, height: u32, width: u32) -> usize {
        match self {
            ImagePrompt::Gemma3 { per_image, .. } => *per_image,
            ImagePrompt::Pixtral { unit, .. }
            | ImagePrompt::Qwen { unit, .. }
            | ImagePrompt::Gemma4 { unit, .. } => {
                (height / unit.max(&1)) as usize * (width / unit.max(&1)) as usize
            }
        }
    }

    /// `text` with the marker of each image (pixel values `(height, width)`, in order)
    /// widened; refused unless there are exactly as many markers as images.
    pub fn expand(&self, text: &str, images: &[(u32, u32)]) -> Result<String, ImagePromptError> {
        let markers = text.matches(self.marker()).count();
        if markers != images.len() {
            return Err(ImagePromptError::Count {
                markers,
                images: images.len(),
                marker: self.marker().to_string(),
            });
        }
        match self {
            ImagePrompt::Gemma3 {
                begin,
                placeholder,
                end,
                per_image,
            } => {
                let run = format!("\n\n{begin}{}{end}\n\n", placeholder.repeat(*per_image));
                Ok(text.replace(begin.as_str(), &run))
            }
            ImagePrompt::Pixtral {
                image,
                brk,
                end,
                unit,
            } => {
                let mut parts = text.split(image.as_str());
                let mut out = parts.next().unwrap_or_default().to_string();
                for (part, &(h, w)) in parts.zip(images) {
                    let (rows, cols) = (h / unit.max(&1), w / unit.max(&1));
                    let row = image.repeat(cols as usize);
                    let grid = vec![row; rows as usize].join(brk);
                    out.push_str(&grid);
                    out.push_str(end);
                    out.push_str(part);
                }
                Ok(out)
            }
            ImagePrompt::Qwen { pad, .. } => Ok(self.widen(text, images, "", pad, "")),
            ImagePrompt::Gemma4 {
                begin, image, end, ..
            } => Ok(self.widen(text, images, begin, image, end)),
        }
    }
}

impl ImagePrompt {
    /// `text` with each `marker` (one per image, in order) replaced by `begin`, the marker once
    /// per placeholder of that image, and `end`.
    fn widen(
        &self,
        text: &str,
        images: &[(u32, u32)],
        begin: &str,
        marker: &str,
        end: &str,
    ) -> String {
        let mut parts = text.split(marker);
        let mut out = parts.next().unwrap_or_default().to_string();
        for (part, &(h, w)) in parts.zip(images) {
            out.push_str(begin);
            out.push_str(&marker.repeat(self.placeholders(h, w)));
            out.push_str(end);
            out.push_str(part);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemma3(n: usize) -> ImagePrompt {
        ImagePrompt::Gemma3 {
            begin: "<boi>".into(),
            placeholder: "<img>".into(),
            end: "<eoi>".into(),
            per_image: n,
        }
    }

    #[test]
    fn each_marker_becomes_its_run() {
        let got = gemma3(2).expand("a<boi>b<boi>", &[(8, 8); 2]).unwrap();
        assert_eq!(
            got,
            "a\n\n<boi><img><img><eoi>\n\nb\n\n<boi><img><img><eoi>\n\n"
        );
    }

    #[test]
    fn markers_and_images_must_agree() {
        assert_eq!(
            gemma3(4).expand("one <boi> only", &[(8, 8); 2]),
            Err(ImagePromptError::Count {
                markers: 1,
                images: 2,
                marker: "<boi>".into()
            })
        );
        assert!(gemma3(4).expand("no images", &[]).is_ok());
    }

    #[test]
    fn a_pixtral_image_becomes_its_rows() {
        let p = ImagePrompt::Pixtral {
            image: "[IMG]".into(),
            brk: "[B]".into(),
            end: "[E]".into(),
            unit: 4,
        };
        // 2 rows of 3, then 1 row of 1.
        let got = p.expand("a[IMG]b[IMG]c", &[(8, 12), (4, 4)]).unwrap();
        assert_eq!(got, "a[IMG][IMG][IMG][B][IMG][IMG][IMG][E]b[IMG][E]c");
        assert_eq!(p.placeholders(8, 12), 6);
        assert!(p.expand("[IMG]", &[]).is_err());
    }

    #[test]
    fn a_qwen_image_pad_becomes_one_per_merged_patch() {
        let p = ImagePrompt::Qwen {
            pad: "<pad>".into(),
            unit: 8,
        };
        // 2 x 3 merged patches, then 1 x 1.
        let got = p
            .expand("a<s><pad><e>b<s><pad><e>", &[(16, 24), (8, 8)])
            .unwrap();
        assert_eq!(got, format!("a<s>{}<e>b<s><pad><e>", "<pad>".repeat(6)));
        assert!(p.expand("<pad>", &[(8, 8), (8, 8)]).is_err());
    }

    #[test]
    fn a_gemma4_image_becomes_its_soft_tokens_between_its_markers() {
        let p = ImagePrompt::Gemma4 {
            begin: "<|image>".into(),
            image: "<|image|>".into(),
            end: "<image|>".into(),
            unit: 48,
        };
        // 2 x 3 cells of 48 pixels, then 1 x 1.
        let got = p
            .expand("a<|image|>b<|image|>", &[(96, 144), (48, 48)])
            .unwrap();
        let six = "<|image|>".repeat(6);
        assert_eq!(
            got,
            format!("a<|image>{six}<image|>b<|image><|image|><image|>")
        );
        assert_eq!(p.placeholders(96, 144), 6);
        assert!(p.expand("<|image|>", &[]).is_err());
    }
}
