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
}

impl ImagePrompt {
    /// The marker a chat template writes for one image.
    pub fn marker(&self) -> &str {
        match self {
            ImagePrompt::Gemma3 { begin, .. } => begin,
        }
    }

    /// Placeholder tokens one image takes in the prompt (what it counts in usage, with the
    /// markers around them).
    pub fn tokens_per_image(&self) -> usize {
        match self {
            ImagePrompt::Gemma3 { per_image, .. } => *per_image,
        }
    }

    /// `text` with each of its `images` markers widened; refused unless there are exactly as
    /// many markers as images.
    pub fn expand(&self, text: &str, images: usize) -> Result<String, ImagePromptError> {
        let markers = text.matches(self.marker()).count();
        if markers != images {
            return Err(ImagePromptError::Count {
                markers,
                images,
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
        }
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
        let got = gemma3(2).expand("a<boi>b<boi>", 2).unwrap();
        assert_eq!(
            got,
            "a\n\n<boi><img><img><eoi>\n\nb\n\n<boi><img><img><eoi>\n\n"
        );
    }

    #[test]
    fn markers_and_images_must_agree() {
        assert_eq!(
            gemma3(4).expand("one <boi> only", 2),
            Err(ImagePromptError::Count {
                markers: 1,
                images: 2,
                marker: "<boi>".into()
            })
        );
        assert!(gemma3(4).expand("no images", 0).is_ok());
    }
}
