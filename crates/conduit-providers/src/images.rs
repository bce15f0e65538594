//! Images and attached PDFs on their way to a provider: the bytes decide the type, and
//! an image a provider would refuse (type, long edge, size) is downscaled and re-encoded
//! first, decoded and shrunk within the limits of [`conduit_core::images`]; a PDF goes
//! as it is, within the request's budget.

use std::collections::HashMap;
use std::io::Cursor;

use base64::Engine;
use conduit_core::content::{Block, MediaRef, Message, ResultPart};
use conduit_core::media::MediaStore;
use image::{ImageFormat, ImageReader};

/// What one provider accepts.
#[derive(Debug, Clone, Copy)]
pub struct ImageLimits {
    pub max_long_edge: u32,
    /// The most bytes one image may take in the request, that is as base64 (4 bytes for
    /// every 3): Anthropic measures its 5 MB there, so an image of 4 MB is refused.
    pub max_encoded_bytes: usize,
    pub accepted: &'static [&'static str],
    /// The most images one request carries, and their most bytes as base64 together: a
    /// long conversation of screenshots passed the service's limit on a request and
    /// every later turn was refused. The newest are sent; older ones are left out, the
    /// model told so.
    pub max_request_images: usize,
    pub max_request_encoded_bytes: usize,
}

/// Anthropic: larger images are scaled down by the service anyway; 5 MB per image as
/// base64 ("image exceeds 5 MB maximum: 6275800 bytes > 5242880 bytes" for 4.7 MB).
/// A request carries at most 100 images and 32 MB in all (24 MiB of images leaves room
/// for the conversation's text).
pub const ANTHROPIC: ImageLimits = ImageLimits {
    max_long_edge: 1568,
    max_encoded_bytes: 5 * 1024 * 1024,
    accepted: &["image/jpeg", "image/png", "image/gif", "image/webp"],
    max_request_images: 100,
    max_request_encoded_bytes: 24 * 1024 * 1024,
};

/// OpenAI (Chat Completions and Responses) and compatible servers: at most 500 images
/// and 50 MB of payload a request.
pub const OPENAI: ImageLimits = ImageLimits {
    max_long_edge: 2048,
    max_encoded_bytes: 20 * 1024 * 1024,
    accepted: &["image/jpeg", "image/png", "image/gif", "image/webp"],
    max_request_images: 500,
    max_request_encoded_bytes: 40 * 1024 * 1024,
};

/// Gemini: inline data up to 20 MB per request.
pub const GEMINI: ImageLimits = ImageLimits {
    max_long_edge: 3072,
    max_encoded_bytes: 15 * 1024 * 1024,
    accepted: &["image/jpeg", "image/png", "image/webp"],
    max_request_images: 1000,
    max_request_encoded_bytes: 16 * 1024 * 1024,
};

/// An image ready to embed: its type and base64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    pub mime: &'static str,
    pub base64: String,
}

impl PreparedImage {
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, self.base64)
    }
}

/// Every image of a request by hash: prepared, or why it cannot be sent.
pub type PreparedImages = HashMap<String, Result<PreparedImage, ImageError>>;

/// Why an image cannot go to a provider (the model is told instead), its cause kept.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Load(#[from] conduit_core::media::MediaError),
    #[error("the file is not an image in a known format")]
    UnknownFormat,
    #[error("the image is corrupt: {0}")]
    Corrupt(#[source] image::ImageError),
    /// Over Conduit's size or memory limits, or it does not decode.
    #[error(transparent)]
    Decode(#[from] conduit_core::images::DecodeError),
    #[error("cannot re-encode the image: {0}")]
    Encode(#[source] image::ImageError),
    #[error(
        "the image is still {size} bytes as base64 after downscaling; the provider takes at most {max}"
    )]
    TooLarge { size: usize, max: usize },
    #[error(
        "an older image, left out so the request stays within what the provider takes in one request ({images} images, {megabytes} MB of images and PDFs); newer images were sent"
    )]
    LeftOut { images: usize, megabytes: usize },
    #[error("the stored file is not a PDF")]
    NotPdf,
    /// The model's server refused the request that carried the PDF.
    #[error("the model's server refused the request with it ({message})")]
    Refused { message: String },
    /// Why it was not sent the first time, for the request sent again after a refusal.
    #[error("{0}")]
    AsBefore(String),
    /// Not carried by a request that was refused, so not tried in the one sent again.
    #[error("it was left out of the request sent again after the model's server refused one")]
    NotRetried,
    /// An earlier request of this session was refused with its PDFs.
    #[error("earlier in this session the model's server refused the request that carried it")]
    RefusedEarlier,
}

/// Why a PDF was not sent, as the model reads it after "was not sent: ".
pub fn document_reason(error: &ImageError) -> String {
    match error {
        ImageError::TooLarge { size, max } => format!(
            "it is {} as base64, more than the {} of files this provider takes in one request",
            megabytes(*size),
            megabytes(*max)
        ),
        ImageError::LeftOut { .. } => "it is older, and was left out so the request stays within what the provider takes of images and PDFs in one request; newer ones were sent".to_owned(),
        other => other.to_string(),
    }
}

/// `bytes` in megabytes as people read file sizes (1,000,000 bytes, one decimal).
fn megabytes(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

/// The prepared PDF attached as `media`, or the note the model reads in its place
/// ([`conduit_core::content::document_not_read`]).
pub fn document_or_note<'a>(
    name: &str,
    media: &MediaRef,
    images: &'a PreparedImages,
) -> Result<&'a PreparedImage, String> {
    match images.get(&document_key(&media.hash)) {
        Some(Ok(document)) if document.mime == conduit_core::attached::PDF_MIME => Ok(document),
        Some(Ok(_)) => Err(document_reason(&ImageError::NotPdf)),
        Some(Err(error)) => Err(document_reason(error)),
        None => Err("it was not loaded".to_owned()),
    }
    .map_err(|reason| conduit_core::content::document_not_read(name, media, &reason))
}

/// What a reference is embedded as: the same stored file may be named as an image in
/// one place and as a PDF in another (a server's forged bytes), and each is prepared and
/// looked up as what it is named as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Image,
    Document,
}

/// Where a PDF is kept among the prepared images: apart from any image of the same hash.
pub fn document_key(hash: &str) -> String {
    format!("pdf:{hash}")
}

/// Calls `visit` with every image and PDF `messages` embed, in order, once per place it
/// is used.
fn each_image(messages: &[Message], mut visit: impl FnMut(&MediaRef, Kind)) {
    for message in messages {
        for block in &message.blocks {
            match block {
                Block::Image { media } => visit(media, Kind::Image),
                Block::Document { media, .. } => visit(media, Kind::Document),
                Block::ToolResult(result) => {
                    for part in &result.parts {
                        if let ResultPart::Image { media } = part {
                            visit(media, Kind::Image);
                        }
                    }
                    for (_, media) in result.documents() {
                        visit(media, Kind::Document);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The key a reference is prepared under.
fn key(media: &MediaRef, kind: Kind) -> String {
    match kind {
        Kind::Image => media.hash.clone(),
        Kind::Document => document_key(&media.hash),
    }
}

/// The media a request references (images and PDFs), in order of first use.
pub fn referenced_images(messages: &[Message]) -> Vec<MediaRef> {
    referenced(messages)
        .into_iter()
        .map(|(media, _)| media)
        .collect()
}

fn referenced(messages: &[Message]) -> Vec<(MediaRef, Kind)> {
    let mut seen = Vec::<(MediaRef, Kind)>::new();
    each_image(messages, |media, kind| {
        if !seen.iter().any(|(m, k)| m.hash == media.hash && *k == kind) {
            seen.push((media.clone(), kind));
        }
    });
    seen
}

/// How many times each image or PDF is embedded in a request (once per place it is
/// used), and the place of its last use (counted through the request's images).
fn uses(messages: &[Message]) -> HashMap<String, (usize, usize)> {
    let mut uses = HashMap::<String, (usize, usize)>::new();
    let mut place = 0;
    each_image(messages, |media, kind| {
        let entry = uses.entry(key(media, kind)).or_default();
        entry.0 += 1;
        entry.1 = place;
        place += 1;
    });
    uses
}

/// Loads and prepares every image and PDF `messages` reference, newest first, within
/// the request's budget ([`ImageLimits::max_request_images`] and
/// [`ImageLimits::max_request_encoded_bytes`]): past it, older ones are left out (not
/// even loaded), and the model gets a note in their place. A PDF for which
/// `left_out_document` gives a reason is neither loaded nor counted. CPU-heavy: call it
/// off the async runtime's worker threads.
pub fn prepare_all(
    messages: &[Message],
    media: &dyn MediaStore,
    limits: &ImageLimits,
    left_out_document: &dyn Fn(&str) -> Option<ImageError>,
) -> PreparedImages {
    let uses = uses(messages);
    let mut images = 0usize;
    let mut bytes = 0usize;
    let mut full = false;
    let mut prepared = PreparedImages::new();
    // Newest first by last use: an old image the newest message shows again is new.
    let mut references = referenced(messages);
    references.sort_by_key(|(reference, kind)| {
        std::cmp::Reverse(
            uses.get(&key(reference, *kind))
                .map_or(0, |(_, last)| *last),
        )
    });
    for (reference, kind) in references {
        let key = key(&reference, kind);
        if kind == Kind::Document
            && let Some(reason) = left_out_document(&reference.hash)
        {
            prepared.insert(key, Err(reason));
            continue;
        }
        let times = uses.get(&key).map_or(1, |(times, _)| *times).max(1);
        if full {
            prepared.insert(key, Err(left_out(limits)));
            continue;
        }
        let image =
            media
                .load(&reference)
                .map_err(ImageError::from)
                .and_then(|loaded| match kind {
                    Kind::Document => prepare_document(&loaded, limits),
                    Kind::Image => prepare(&loaded, limits),
                });
        let image = match image {
            Ok(image) => {
                let size = image.base64.len().saturating_mul(times);
                if images + times > limits.max_request_images
                    || bytes.saturating_add(size) > limits.max_request_encoded_bytes
                {
                    full = true;
                    Err(left_out(limits))
                } else {
                    images += times;
                    bytes += size;
                    Ok(image)
                }
            }
            Err(error) => Err(error),
        };
        prepared.insert(key, image);
    }
    prepared
}

fn left_out(limits: &ImageLimits) -> ImageError {
    ImageError::LeftOut {
        images: limits.max_request_images,
        megabytes: limits.max_request_encoded_bytes / (1024 * 1024),
    }
}

/// Makes `bytes` acceptable to a provider with `limits`, or says why it cannot be.
/// Media was fully decoded once when it was stored; here the header is enough to pass
/// an image through unchanged, and only images that must change are decoded.
pub fn prepare(bytes: &[u8], limits: &ImageLimits) -> Result<PreparedImage, ImageError> {
    let format = image::guess_format(bytes).map_err(|_| ImageError::UnknownFormat)?;
    let mime = format.to_mime_type();
    let (width, height) = ImageReader::with_format(Cursor::new(bytes), format)
        .into_dimensions()
        .map_err(ImageError::Corrupt)?;
    let fits = limits.accepted.contains(&mime)
        && width.max(height) <= limits.max_long_edge
        && base64_len(bytes.len()) <= limits.max_encoded_bytes;
    if fits {
        return Ok(PreparedImage {
            mime: static_mime(mime),
            base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        });
    }
    let _turn = conduit_core::images::decode_turn();
    let (_, decoded) = conduit_core::images::decode(bytes)?;
    let scaled = conduit_core::images::shrink_to_fit(
        decoded,
        limits.max_long_edge,
        limits.max_long_edge,
        image::imageops::FilterType::Triangle,
    );
    let mut png = Vec::new();
    scaled
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .map_err(ImageError::Encode)?;
    if base64_len(png.len()) <= limits.max_encoded_bytes {
        return Ok(PreparedImage {
            mime: "image/png",
            base64: base64::engine::general_purpose::STANDARD.encode(png),
        });
    }
    let mut jpeg = Vec::new();
    image::DynamicImage::ImageRgb8(scaled.to_rgb8())
        .write_to(&mut Cursor::new(&mut jpeg), ImageFormat::Jpeg)
        .map_err(ImageError::Encode)?;
    if base64_len(jpeg.len()) > limits.max_encoded_bytes {
        return Err(ImageError::TooLarge {
            size: base64_len(jpeg.len()),
            max: limits.max_encoded_bytes,
        });
    }
    Ok(PreparedImage {
        mime: "image/jpeg",
        base64: base64::engine::general_purpose::STANDARD.encode(jpeg),
    })
}

/// A PDF as it goes to a provider: whole, as base64, when it is one and fits in what the
/// provider takes of images and files in one request.
pub fn prepare_document(bytes: &[u8], limits: &ImageLimits) -> Result<PreparedImage, ImageError> {
    if !conduit_core::attached::is_pdf(bytes) {
        return Err(ImageError::NotPdf);
    }
    let size = base64_len(bytes.len());
    if size > limits.max_request_encoded_bytes {
        return Err(ImageError::TooLarge {
            size,
            max: limits.max_request_encoded_bytes,
        });
    }
    Ok(PreparedImage {
        mime: conduit_core::attached::PDF_MIME,
        base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// The length of `bytes` bytes as padded base64.
fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3).saturating_mul(4)
}

fn static_mime(mime: &str) -> &'static str {
    match mime {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        _ => "application/octet-stream",
    }
}

/// The note a model gets instead of an image that cannot be sent.
pub fn omitted_note(reason: impl std::fmt::Display) -> String {
    format!("[An image was omitted: {reason}]")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use image::GenericImageView;

    pub fn png(width: u32, height: u32) -> Vec<u8> {
        let img = image::RgbaImage::from_fn(width, height, |x, y| {
            image::Rgba([(x % 256) as u8, (y % 256) as u8, 128, 255])
        });
        let mut out = Vec::new();
        image::DynamicImage::ImageRgba8(img)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    /// Pixels that do not compress, so the PNG is large.
    fn noisy_png(width: u32, height: u32) -> Vec<u8> {
        let mut seed: u32 = 12345;
        let img = image::RgbImage::from_fn(width, height, |_, _| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let [a, b, c, _] = seed.to_le_bytes();
            image::Rgb([a, b, c])
        });
        let mut out = Vec::new();
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    fn decode(prepared: &PreparedImage) -> image::DynamicImage {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&prepared.base64)
            .unwrap();
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn a_small_png_passes_through_unchanged() {
        let bytes = png(10, 5);
        let prepared = prepare(&bytes, &ANTHROPIC).unwrap();
        assert_eq!(prepared.mime, "image/png");
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(&prepared.base64)
                .unwrap(),
            bytes
        );
    }

    #[test]
    fn the_bytes_decide_the_type_not_a_declaration() {
        // A PNG stored under any name or declared type is still a PNG.
        assert_eq!(prepare(&png(2, 2), &OPENAI).unwrap().mime, "image/png");
    }

    #[test]
    fn a_large_image_is_downscaled_to_the_long_edge() {
        let prepared = prepare(&png(3000, 1500), &ANTHROPIC).unwrap();
        let img = decode(&prepared);
        assert_eq!(img.dimensions(), (1568, 784));
    }

    /// Anthropic's types, any long edge, 300 KB as base64.
    fn small_limits() -> ImageLimits {
        ImageLimits {
            max_long_edge: 4096,
            max_encoded_bytes: 300_000,
            accepted: ANTHROPIC.accepted,
            max_request_images: 100,
            max_request_encoded_bytes: 24 * 1024 * 1024,
        }
    }

    /// A long conversation of screenshots: the newest go, within the request's count and
    /// bytes; older ones are left out, not even loaded, and the model is told why. An
    /// image used twice counts twice.
    #[test]
    fn a_request_carries_its_newest_images_within_its_budget() {
        use conduit_core::media::MediaStore as _;
        let store = conduit_core::testing::MemoryMedia::default();
        let shots: Vec<MediaRef> = (0..6)
            .map(|n| {
                store
                    .put(&noisy_png(100 + n, 100), Some("image/png"))
                    .unwrap()
            })
            .collect();
        let each = base64_len(noisy_png(100, 100).len());
        let mut messages: Vec<Message> = shots
            .iter()
            .map(|media| Message {
                role: conduit_core::content::Role::User,
                blocks: vec![Block::Image {
                    media: media.clone(),
                }],
            })
            .collect();
        let limits = ImageLimits {
            max_request_images: 4,
            max_request_encoded_bytes: each * 10,
            ..small_limits()
        };
        let prepared = prepare_all(&messages, &store, &limits, &|_| None);
        let sent: Vec<bool> = shots
            .iter()
            .map(|media| prepared[&media.hash].is_ok())
            .collect();
        assert_eq!(sent, [false, false, true, true, true, true], "by count");
        let Err(reason) = &prepared[&shots[0].hash] else {
            unreachable!()
        };
        assert!(
            omitted_note(reason).contains("an older image, left out"),
            "{reason}"
        );
        // By bytes: room for three of them.
        let by_bytes = ImageLimits {
            max_request_images: 100,
            max_request_encoded_bytes: each * 3 + each / 2,
            ..small_limits()
        };
        let prepared = prepare_all(&messages, &store, &by_bytes, &|_| None);
        let sent: Vec<bool> = shots
            .iter()
            .map(|media| prepared[&media.hash].is_ok())
            .collect();
        assert_eq!(sent, [false, false, false, true, true, true], "by bytes");
        // The newest image shown again: it takes two of the four places.
        let mut again = messages.clone();
        again.push(messages[5].clone());
        let prepared = prepare_all(&again, &store, &limits, &|_| None);
        let sent: Vec<bool> = shots
            .iter()
            .map(|media| prepared[&media.hash].is_ok())
            .collect();
        assert_eq!(sent, [false, false, false, true, true, true], "used twice");
        // The oldest shown again by the newest message: it is new, and goes.
        messages.push(messages[0].clone());
        let prepared = prepare_all(&messages, &store, &limits, &|_| None);
        let sent: Vec<bool> = shots
            .iter()
            .map(|media| prepared[&media.hash].is_ok())
            .collect();
        assert_eq!(
            sent,
            [true, false, false, false, true, true],
            "the oldest, again"
        );
    }

    #[test]
    fn an_image_over_the_byte_limit_is_re_encoded_smaller() {
        let limits = small_limits();
        let bytes = noisy_png(400, 400);
        assert!(bytes.len() > limits.max_encoded_bytes);
        let prepared = prepare(&bytes, &limits).unwrap();
        assert_eq!(prepared.mime, "image/jpeg");
        assert_eq!(decode(&prepared).dimensions(), (400, 400));
    }

    #[test]
    fn the_limit_is_on_the_image_as_base64_as_the_request_carries_it() {
        let limits = small_limits();
        // Under the limit as bytes, over it as base64: re-encoded, and then within it.
        let bytes = noisy_png(280, 280);
        assert!(bytes.len() < limits.max_encoded_bytes, "{}", bytes.len());
        assert!(
            base64_len(bytes.len()) > limits.max_encoded_bytes,
            "{}",
            bytes.len()
        );
        let prepared = prepare(&bytes, &limits).unwrap();
        assert_eq!(prepared.mime, "image/jpeg");
        assert!(prepared.base64.len() <= limits.max_encoded_bytes);
        assert_eq!(base64_len(3), 4);
        assert_eq!(base64_len(4), 8);
        assert_eq!(base64_len(0), 0);
    }

    #[test]
    fn the_hostile_tall_png_is_refused_by_its_size_and_the_model_told_why() {
        let hostile = conduit_core::testing::zero_png(257, 2_088_000);
        let started = std::time::Instant::now();
        let err = prepare(&hostile, &GEMINI).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        assert!(matches!(err, ImageError::Decode(_)), "{err:?}");
        assert_eq!(
            omitted_note(&err),
            "[An image was omitted: the image is 257×2088000 pixels; the most Conduit reads \
             is 32768 pixels on a side and 64 million pixels in all]"
        );
    }

    #[test]
    fn a_full_page_screenshot_is_downscaled_keeping_its_aspect() {
        let screenshot = conduit_core::testing::zero_png_with(1280, 20_000, 2, 8);
        let prepared = prepare(&screenshot, &ANTHROPIC).unwrap();
        assert_eq!(prepared.mime, "image/png");
        assert_eq!(decode(&prepared).dimensions(), (100, 1568));
        let frame = prepare(&png(1600, 1000), &ANTHROPIC).unwrap();
        assert_eq!(decode(&frame).dimensions(), (1568, 980));
    }

    #[test]
    fn corrupt_and_unknown_bytes_are_refused_with_a_reason() {
        // A PNG signature followed by garbage: the header cannot be read.
        let mut broken = png(50, 50);
        broken.truncate(8);
        broken.extend_from_slice(b"garbage instead of an IHDR chunk");
        let err = prepare(&broken, &ANTHROPIC).unwrap_err().to_string();
        assert!(err.contains("corrupt"), "{err}");
        let err = prepare(b"hello, not an image", &ANTHROPIC)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an image"), "{err}");
    }
}
