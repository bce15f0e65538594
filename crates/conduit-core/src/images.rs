//! The one way Conduit decodes and shrinks an image, bounded in size and memory, so that
//! bytes from a tool or a page are refused with a reason instead of taking gigabytes.

use std::io::Cursor;

use image::error::{ImageError, LimitErrorKind};
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// The longest side Conduit reads, in pixels. A full-page screenshot of a long page
/// (1280 × 30,000) fits; a longer side is no picture a person looks at, only a way to make
/// a resize allocate width × height buffers.
pub const MAX_SIDE: u32 = 32_768;

/// The most pixels Conduit reads in one image: more than a camera's photo (61 million),
/// an 8K frame (33 million) or a 1280-wide screenshot [`MAX_SIDE`] tall (42 million). An
/// RGB photo of 64 million pixels decodes to 192 MB, within [`MAX_ALLOC`]; an RGBA image
/// that large is refused by that (a clear error, not a crash).
pub const MAX_PIXELS: u64 = 64_000_000;

/// The most memory one decode may take, and one resize's working buffer: half the image
/// crate's default, which let a 0.5 MB PNG decode to 536 MB.
pub const MAX_ALLOC: u64 = 256 * 1024 * 1024;

/// Why an image is not read, its cause kept.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the bytes are no image format Conduit knows")]
    UnknownFormat(#[source] ImageError),
    #[error(
        "the image is {width}×{height} pixels; the most Conduit reads is {max_side} pixels on a side and {max_million} million pixels in all",
        max_side = MAX_SIDE,
        max_million = MAX_PIXELS / 1_000_000
    )]
    TooLarge { width: u32, height: u32 },
    #[error(
        "the image needs more than the {max_mib} MiB of memory Conduit gives one image",
        max_mib = MAX_ALLOC / (1024 * 1024)
    )]
    TooMuchMemory(#[source] ImageError),
    #[error("the image does not decode: {0}")]
    Corrupt(#[source] ImageError),
}

/// Why a preview of an image is not made, its cause kept.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("the image could not be written")]
    Encode(#[source] ImageError),
}

/// Refuses a width × height over [`MAX_SIDE`] or [`MAX_PIXELS`].
pub fn check_size(width: u32, height: u32) -> Result<(), DecodeError> {
    let pixels = u64::from(width) * u64::from(height);
    if width > MAX_SIDE || height > MAX_SIDE || pixels > MAX_PIXELS {
        return Err(DecodeError::TooLarge { width, height });
    }
    Ok(())
}

/// Full decodes under way at once in the process, each with what is made from its image
/// (a thumbnail, a PNG, the clipboard's pixels): each may take [`MAX_ALLOC`] and more,
/// and a page or a server asking for many at once (a large image at fifty thumbnail
/// URLs, say) must not add them up to gigabytes.
pub const DECODES_AT_ONCE: usize = 2;

/// Turns taken, out of [`DECODES_AT_ONCE`]; the condition wakes a waiter when one ends.
static DECODE_TURNS: (parking_lot::Mutex<usize>, parking_lot::Condvar) =
    (parking_lot::Mutex::new(0), parking_lot::Condvar::new());

/// A turn to decode an image and work with it, held until dropped. Take it off the async
/// workers (it waits for a turn), and never while holding another.
#[must_use = "the turn ends when dropped"]
pub struct DecodeTurn(());

/// Waits for a turn to decode (see [`DECODES_AT_ONCE`]).
pub fn decode_turn() -> DecodeTurn {
    let (taken, freed) = &DECODE_TURNS;
    let mut taken = taken.lock();
    while *taken >= DECODES_AT_ONCE {
        freed.wait(&mut taken);
    }
    *taken += 1;
    DecodeTurn(())
}

impl Drop for DecodeTurn {
    fn drop(&mut self) {
        let (taken, freed) = &DECODE_TURNS;
        *taken.lock() -= 1;
        freed.notify_one();
    }
}

/// The format the bytes are in and the image they hold, read within the limits: the size
/// in the header is checked before any pixel is read, and the decoder may allocate at most
/// [`MAX_ALLOC`].
pub fn decode(bytes: &[u8]) -> Result<(ImageFormat, DynamicImage), DecodeError> {
    let format = image::guess_format(bytes).map_err(DecodeError::UnknownFormat)?;
    let reader = |limits: Limits| {
        let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
        reader.limits(limits);
        reader
    };
    // The header without the side limits, so an image over them is refused by its size
    // (which the person can read) and not by the decoder's bare "dimension error".
    let mut header = limits();
    header.max_image_width = None;
    header.max_image_height = None;
    let (width, height) = reader(header).into_dimensions().map_err(refused)?;
    check_size(width, height)?;
    let image = reader(limits()).decode().map_err(refused)?;
    Ok((format, image))
}

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    limits
}

fn refused(error: ImageError) -> DecodeError {
    match &error {
        ImageError::Limits(limit) if limit.kind() == LimitErrorKind::InsufficientMemory => {
            DecodeError::TooMuchMemory(error)
        }
        _ => DecodeError::Corrupt(error),
    }
}

/// The size of `width` × `height` scaled down to fit inside `max_width` × `max_height`,
/// keeping its aspect ratio (rounded, at least one pixel); never larger than it is.
pub fn fit_within(width: u32, height: u32, max_width: u32, max_height: u32) -> (u32, u32) {
    if width <= max_width && height <= max_height {
        return (width, height);
    }
    let (w, h) = (u64::from(width.max(1)), u64::from(height.max(1)));
    let (max_w, max_h) = (u64::from(max_width.max(1)), u64::from(max_height.max(1)));
    // Width-bound when the image is relatively wider than the box.
    let (new_w, new_h) = if w * max_h >= h * max_w {
        (max_w, h.saturating_mul(max_w).saturating_add(w / 2) / w)
    } else {
        (w.saturating_mul(max_h).saturating_add(h / 2) / h, max_h)
    };
    let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX).max(1);
    (narrow(new_w), narrow(new_h))
}

/// The bytes a filtered resize of a `source_width`-wide image to `height` rows allocates
/// before its output: the image crate samples every source column into a float RGBA
/// buffer `source_width` × `height` (16 bytes a pixel). A 257 × 2,088,000 image made
/// 256 wide asks for 8.5 GB there.
pub fn resize_scratch(source_width: u32, height: u32) -> u64 {
    u64::from(source_width)
        .saturating_mul(u64::from(height))
        .saturating_mul(16)
}

/// `image` scaled down to fit inside `max_width` × `max_height` with its aspect ratio
/// (the image itself when it already fits), never allocating more than [`MAX_ALLOC`] for
/// the resize: while the filter's working buffer would be larger, the source is first
/// halved by exact 2 × 2 averages, which need no buffer but their output.
pub fn shrink_to_fit(
    image: DynamicImage,
    max_width: u32,
    max_height: u32,
    filter: FilterType,
) -> DynamicImage {
    let (width, height) = fit_within(image.width(), image.height(), max_width, max_height);
    if (width, height) == (image.width(), image.height()) {
        return image;
    }
    let mut source = image;
    for _ in 0..halvings(source.width(), source.height(), width, height) {
        source = source.thumbnail_exact(source.width() / 2, source.height() / 2);
    }
    if resize_scratch(source.width(), height) <= MAX_ALLOC {
        source.resize_exact(width, height, filter)
    } else {
        // Less than twice the size and still too large for the filter (a box far taller
        // than the window asks for): area averages, which need no buffer.
        source.thumbnail_exact(width, height)
    }
}

/// A PNG of the image in `bytes`, scaled down to fit inside `max_width` × `max_height`:
/// what the window shows of an image it must not take as sent (a server's sampling
/// request). The bytes are decoded within the limits here and drawn anew, so the page's
/// image decoders only ever see Conduit's own PNG. Transparent parts are drawn over a
/// grey checkerboard, not the page's background: white text on a transparent image would
/// vanish on a white card while a model that flattens it onto black reads it.
pub fn preview_png(bytes: &[u8], max_width: u32, max_height: u32) -> Result<Vec<u8>, PreviewError> {
    let _turn = decode_turn();
    let (_, image) = decode(bytes)?;
    let small = shrink_to_fit(image, max_width, max_height, FilterType::Triangle);
    let shown = if small.color().has_alpha() {
        DynamicImage::ImageRgb8(over_checkerboard(&small.into_rgba8()))
    } else {
        small
    };
    let mut png = Vec::new();
    shown
        .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
        .map_err(PreviewError::Encode)?;
    Ok(png)
}

/// JPEG quality of a photo turned upright: high, as the photo was the user's.
const UPRIGHT_JPEG_QUALITY: u8 = 92;

/// The image in `bytes` turned upright, when its Exif orientation says the pixels are
/// stored rotated or mirrored (a phone's portrait photo is stored on its side with a tag
/// saying so): re-encoded without the tag, as a JPEG (its colour profile kept: an iPhone's
/// Display P3 would shift otherwise), or as a PNG when it has transparency. The window
/// sizes an image by its stored pixels and a provider may ignore the tag (or get a resized
/// copy without it), so the photo would show squashed and reach the model on its side.
/// `Ok(None)` when nothing needs turning, or the bytes are no image this reads (the media
/// store then judges them as they came, with its own error).
pub fn upright(bytes: &[u8]) -> Result<Option<Vec<u8>>, PreviewError> {
    use image::metadata::Orientation;
    use image::{ImageDecoder, ImageEncoder};
    let Ok(format) = image::guess_format(bytes) else {
        return Ok(None);
    };
    let Ok(mut decoder) = ImageReader::with_format(Cursor::new(bytes), format).into_decoder()
    else {
        return Ok(None);
    };
    let orientation = match decoder.orientation() {
        Ok(Orientation::NoTransforms) | Err(_) => return Ok(None),
        Ok(orientation) => orientation,
    };
    // A profile that does not read is left out: the colours shift a little, nothing more.
    let profile = decoder.icc_profile().ok().flatten();
    drop(decoder);
    let _turn = decode_turn();
    let (_, mut image) = decode(bytes)?;
    image.apply_orientation(orientation);
    let mut out = Vec::new();
    if image.color().has_alpha() {
        image
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .map_err(PreviewError::Encode)?;
    } else {
        let mut encoder =
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, UPRIGHT_JPEG_QUALITY);
        if let Some(profile) = profile
            && let Err(error) = encoder.set_icc_profile(profile)
        {
            tracing::debug!(%error, "the photo's colour profile was left out");
        }
        let rgb = image.into_rgb8();
        encoder
            .write_image(
                rgb.as_raw(),
                rgb.width(),
                rgb.height(),
                image::ExtendedColorType::Rgb8,
            )
            .map_err(PreviewError::Encode)?;
    }
    Ok(Some(out))
}

/// The side of a checkerboard square, and its two greys: mid-tones, so that both white
/// and black stand out on them.
const CHECKER_SIDE: u32 = 8;
const CHECKER_GREYS: [u8; 2] = [0x70, 0x98];

/// `image` drawn over a checkerboard, opaque.
fn over_checkerboard(image: &image::RgbaImage) -> image::RgbImage {
    image::RgbImage::from_fn(image.width(), image.height(), |x, y| {
        let square = usize::from((x / CHECKER_SIDE + y / CHECKER_SIDE) % 2 == 1);
        let grey = u16::from(CHECKER_GREYS[square]);
        let [r, g, b, a] = image.get_pixel(x, y).0;
        let alpha = u16::from(a);
        // In u16: the two weights add up to 255, so the sum is at most 255 × 255, and the
        // division brings it back under 256.
        let blend = |c: u8| ((u16::from(c) * alpha + grey * (255 - alpha)) / 255) as u8;
        image::Rgb([blend(r), blend(g), blend(b)])
    })
}

/// How often a `source_width` × `source_height` image is halved before a filtered resize
/// to `width` × `height` fits [`MAX_ALLOC`] (never below the target).
fn halvings(source_width: u32, source_height: u32, width: u32, height: u32) -> u32 {
    let (mut w, mut h, mut steps) = (source_width, source_height, 0);
    while resize_scratch(w, height) > MAX_ALLOC && w / 2 >= width && h / 2 >= height {
        (w, h, steps) = (w / 2, h / 2, steps + 1);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{jpeg_with_orientation, zero_png};
    use std::time::{Duration, Instant};

    /// No more than [`DECODES_AT_ONCE`] turns are out at once: the next waits for one to
    /// end, then goes on.
    #[test]
    fn decodes_take_turns() {
        let held: Vec<DecodeTurn> = (0..DECODES_AT_ONCE).map(|_| decode_turn()).collect();
        let (started, waiting) = std::sync::mpsc::channel();
        let next = std::thread::spawn(move || {
            let _turn = decode_turn();
            started.send(()).unwrap();
        });
        assert!(
            waiting.recv_timeout(Duration::from_millis(200)).is_err(),
            "a third turn waits while two are out"
        );
        drop(held);
        waiting
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiting turn goes on once one ends");
        next.join().unwrap();
    }

    #[test]
    fn the_hostile_tall_png_is_refused_by_its_size_at_once() {
        let bytes = zero_png(257, 2_088_000);
        assert!(bytes.len() < 4 * 1024 * 1024, "{}", bytes.len());
        let started = Instant::now();
        let err = decode(&bytes).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(matches!(err, DecodeError::TooLarge { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "the image is 257×2088000 pixels; the most Conduit reads is 32768 pixels on a \
             side and 64 million pixels in all"
        );
    }

    #[test]
    fn a_preview_is_a_png_that_fits_the_box_at_real_sizes() {
        // A 1600 × 1000 frame and a 1280 × 8,000 screenshot, each as a JPEG.
        for (width, height, fits) in [(1600, 1000, (800, 500)), (1280, 8_000, (128, 800))] {
            let mut jpeg = Vec::new();
            DynamicImage::new_rgb8(width, height)
                .write_to(&mut Cursor::new(&mut jpeg), ImageFormat::Jpeg)
                .unwrap();
            let png = preview_png(&jpeg, 800, 800).unwrap();
            let (format, shown) = decode(&png).unwrap();
            assert_eq!(format, ImageFormat::Png);
            assert_eq!((shown.width(), shown.height()), fits);
        }
        // Smaller than the box: its own size.
        let (_, shown) = decode(&preview_png(&zero_png(64, 32), 800, 800).unwrap()).unwrap();
        assert_eq!((shown.width(), shown.height()), (64, 32));
    }

    #[test]
    fn a_previews_transparent_parts_show_a_checkerboard_and_what_is_drawn_on_them() {
        // White text on nothing: a transparent image with one opaque white pixel.
        let mut image = image::RgbaImage::new(32, 32);
        image.put_pixel(3, 3, image::Rgba([255, 255, 255, 255]));
        image.put_pixel(12, 3, image::Rgba([0, 0, 0, 128]));
        let mut png = Vec::new();
        DynamicImage::ImageRgba8(image)
            .write_to(&mut Cursor::new(&mut png), ImageFormat::Png)
            .unwrap();
        let (_, shown) = decode(&preview_png(&png, 800, 800).unwrap()).unwrap();
        assert!(!shown.color().has_alpha(), "drawn opaque");
        let shown = shown.into_rgb8();
        assert_eq!(shown.get_pixel(0, 0).0, [0x70; 3], "the first square");
        assert_eq!(shown.get_pixel(8, 0).0, [0x98; 3], "the next square");
        assert_eq!(
            shown.get_pixel(3, 3).0,
            [255; 3],
            "the white pixel stands out"
        );
        // Half-transparent black over the second grey: half its brightness.
        assert_eq!(shown.get_pixel(12, 3).0, [75; 3], "0x98 × 127 / 255");
    }

    #[test]
    fn a_preview_of_bytes_that_are_no_image_says_why() {
        let err = preview_png(b"<svg onload='x'/>", 800, 800).unwrap_err();
        assert!(
            matches!(err, PreviewError::Decode(DecodeError::UnknownFormat(_))),
            "{err:?}"
        );
        let mut cut = zero_png(600, 400);
        cut.truncate(cut.len() / 2);
        assert!(preview_png(&cut, 800, 800).is_err());
        let err = preview_png(&zero_png(257, 2_088_000), 800, 800).unwrap_err();
        assert!(
            matches!(err, PreviewError::Decode(DecodeError::TooLarge { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn the_handmade_png_is_a_real_png() {
        // The same encoder at a size that may decode: what the hostile one would be.
        let (format, image) = decode(&zero_png(257, 1000)).unwrap();
        assert_eq!(format, ImageFormat::Png);
        assert_eq!((image.width(), image.height()), (257, 1000));
        assert!(image.to_luma8().pixels().all(|p| p.0 == [0]));
    }

    #[test]
    fn sizes_over_one_limit_are_refused_and_real_ones_pass() {
        assert!(check_size(1600, 1000).is_ok());
        assert!(check_size(1280, 20_000).is_ok());
        assert!(check_size(1280, MAX_SIDE).is_ok());
        assert!(check_size(7680, 4320).is_ok());
        assert!(check_size(100, MAX_SIDE + 1).is_err());
        assert!(check_size(MAX_SIDE + 1, 1).is_err());
        assert!(
            check_size(9504, 6336).is_ok(),
            "a 61-megapixel camera's photo"
        );
        assert!(
            check_size(8001, 8000).is_err(),
            "just over 64 million pixels"
        );
    }

    #[test]
    fn a_decode_over_the_memory_limit_is_refused_as_such() {
        // 6,000 × 6,000 RGBA at 16 bits a channel: within the size limits, 288 MB decoded.
        let bytes = crate::testing::zero_png_with(6000, 6000, 6, 16);
        let err = decode(&bytes).unwrap_err();
        assert!(matches!(err, DecodeError::TooMuchMemory(_)), "{err:?}");
        assert!(err.to_string().contains("256 MiB"), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn a_photo_stored_on_its_side_is_turned_upright_and_an_upright_one_is_left_alone() {
        let sideways = jpeg_with_orientation(1600, 1000, 6);
        let turned = upright(&sideways).unwrap().expect("turned");
        let (format, image) = decode(&turned).unwrap();
        assert_eq!(format, ImageFormat::Jpeg);
        assert_eq!((image.width(), image.height()), (1000, 1600));
        // Turned clockwise: the left (red) half is now on top.
        let rgb = image.to_rgb8();
        let top = rgb.get_pixel(500, 100);
        let bottom = rgb.get_pixel(500, 1500);
        assert!(top[0] > 200 && top[2] < 60, "{top:?}");
        assert!(bottom[2] > 200 && bottom[0] < 60, "{bottom:?}");
        // No tag left to turn it again.
        assert!(upright(&turned).unwrap().is_none());

        assert!(
            upright(&jpeg_with_orientation(40, 20, 1))
                .unwrap()
                .is_none()
        );
        assert!(upright(&zero_png(40, 20)).unwrap().is_none());
        assert!(upright(b"not an image").unwrap().is_none());
    }

    #[test]
    fn fitting_keeps_the_aspect_ratio_and_never_grows() {
        assert_eq!(fit_within(1600, 1000, 1024, 2400), (1024, 640));
        assert_eq!(fit_within(800, 3000, 512, 2400), (512, 1920));
        assert_eq!(fit_within(1280, 20_000, 256, 2400), (154, 2400));
        assert_eq!(fit_within(3000, 1500, 1568, 1568), (1568, 784));
        assert_eq!(fit_within(10, 5, 1568, 1568), (10, 5));
        assert_eq!(fit_within(257, 2_088_000, 256, u32::MAX), (256, 2_079_875));
        assert_eq!(fit_within(1, 100_000, 1, 10), (1, 10));
    }

    #[test]
    fn a_shrink_that_would_need_a_large_buffer_halves_first() {
        // 7,000 × 7,000 made 2400 wide: the filter alone would take 7000 × 2400 × 16 bytes.
        assert!(resize_scratch(7000, 2400) > MAX_ALLOC);
        assert_eq!(halvings(7000, 7000, 2400, 2400), 1);
        assert!(resize_scratch(3500, 2400) <= MAX_ALLOC);
        // The width the hostile PNG was asked at: 8.5 GB, and nothing to halve.
        assert!(resize_scratch(257, 2_079_875) > 8_000_000_000);
        assert_eq!(halvings(257, 2_079_875, 256, 2_079_875), 0);
        assert_eq!(halvings(32_768, 1525, 2400, 112), 0, "the filter fits");
        assert_eq!(halvings(1600, 1000, 1024, 640), 0);

        // Real sizes, shrunk in one go and in halves, keep the aspect ratio.
        let tall = shrink_to_fit(
            DynamicImage::new_luma8(1280, 20_000),
            256,
            2400,
            FilterType::CatmullRom,
        );
        assert_eq!((tall.width(), tall.height()), (154, 2400));
        let square = shrink_to_fit(
            DynamicImage::new_luma8(7000, 7000),
            2400,
            2400,
            FilterType::CatmullRom,
        );
        assert_eq!((square.width(), square.height()), (2400, 2400));
        let same = shrink_to_fit(
            DynamicImage::new_rgba8(3, 2),
            256,
            256,
            FilterType::Triangle,
        );
        assert_eq!((same.width(), same.height()), (3, 2));
    }
}
