//! The time tools: the time now in an IANA time zone, and a time converted between
//! zones, with daylight saving time gaps and repeated hours said out loud.

use async_trait::async_trait;
use conduit_core::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};
use jiff::{Timestamp, Zoned, civil};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{spec, structured};

/// The longest time zone name accepted (the longest IANA name has 32 characters).
const MAX_ZONE_CHARS: usize = 64;
/// The longest time text accepted.
const MAX_TIME_CHARS: usize = 100;

/// A time in one zone, as both time tools return it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ZonedTime {
    time_zone: String,
    /// RFC 9557: `2026-03-29T03:30:00+02:00[Europe/Berlin]`.
    datetime: String,
    /// The wall clock: `2026-03-29T03:30:00`.
    local: String,
    /// The same instant in UTC: `2026-03-29T01:30:00Z`.
    utc: String,
    offset: String,
    abbreviation: String,
    dst: bool,
    weekday: String,
}

impl ZonedTime {
    fn of(zoned: &Zoned, zone_name: &str) -> Self {
        let info = zoned.time_zone().to_offset_info(zoned.timestamp());
        Self {
            time_zone: zone_name.to_owned(),
            datetime: zoned.to_string(),
            local: zoned.datetime().to_string(),
            utc: zoned.timestamp().to_string(),
            offset: offset_text(zoned.offset()),
            abbreviation: info.abbreviation().to_owned(),
            dst: info.dst().is_dst(),
            weekday: format!("{:?}", zoned.weekday()),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} {} in {} ({}, UTC{})",
            self.weekday, self.local, self.time_zone, self.abbreviation, self.offset
        )
    }
}

fn zoned_time_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "timeZone": {"type": "string"},
            "datetime": {"type": "string", "description": "RFC 9557, with offset and zone"},
            "local": {"type": "string", "description": "the wall-clock date and time"},
            "utc": {"type": "string", "format": "date-time"},
            "offset": {"type": "string"},
            "abbreviation": {"type": "string"},
            "dst": {"type": "boolean"},
            "weekday": {"type": "string"}
        },
        "required": ["timeZone", "datetime", "local", "utc", "offset", "abbreviation", "dst", "weekday"]
    })
}

/// The zone named `name` (an IANA name such as `Europe/Berlin`, or `UTC`) and the name
/// to show for it, or an error result. The name is checked before it reaches the zone
/// database: it is a name, never a path.
fn zone(field: &str, name: &str) -> Result<(TimeZone, String), ToolOutput> {
    zone_in(jiff::tz::db(), field, name)
}

/// [`zone`] in the zone database `db`.
fn zone_in(
    db: &TimeZoneDatabase,
    field: &str,
    name: &str,
) -> Result<(TimeZone, String), ToolOutput> {
    let name = name.trim();
    let example =
        "an IANA time zone name such as Europe/Berlin, America/New_York, Asia/Tokyo or UTC";
    if name.is_empty() {
        return Err(ToolOutput::error(format!(
            "`{field}` is empty: give {example}"
        )));
    }
    let shaped = name.chars().count() <= MAX_ZONE_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'))
        && !name.starts_with('/')
        && !name.ends_with('/')
        && !name.contains("//");
    if !shaped {
        return Err(ToolOutput::error(format!(
            "`{field}` {name:?} is not a time zone name: give {example}"
        )));
    }
    // UTC needs no database.
    if name.eq_ignore_ascii_case("UTC") {
        return Ok((TimeZone::UTC, "UTC".to_owned()));
    }
    match db.get(name) {
        Ok(zone) => {
            let shown = zone.iana_name().unwrap_or(name).to_owned();
            Ok((zone, shown))
        }
        Err(_) if db.is_definitively_empty() => Err(ToolOutput::error(format!(
            "`{field}` {name:?} cannot be looked up: this computer has no time zone database (on Debian and Ubuntu, install the tzdata package). UTC works without it."
        ))),
        Err(_) => Err(ToolOutput::error(format!(
            "`{field}` {name:?} is not a time zone Conduit knows: give {example}"
        ))),
    }
}

/// The computer's own zone and its name (UTC if it cannot be found).
fn local_zone() -> (TimeZone, String) {
    match TimeZone::try_system() {
        Ok(zone) => {
            let name = zone
                .iana_name()
                .map(str::to_owned)
                .unwrap_or_else(|| "the computer's local time zone".to_owned());
            (zone, name)
        }
        Err(e) => {
            tracing::warn!(error = %e, "the system time zone is unknown; using UTC");
            (TimeZone::UTC, "UTC".to_owned())
        }
    }
}

// ---------------------------------------------------------------------------------------

/// `time_now`: the current date and time in a zone.
pub struct TimeNow {
    spec: ToolSpec,
    clock: fn() -> Timestamp,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NowArguments {
    #[serde(default)]
    time_zone: Option<String>,
}

impl TimeNow {
    pub fn new() -> Self {
        Self::with_clock(Timestamp::now)
    }

    /// A `time_now` that reads `clock` (tests give it a fixed instant).
    pub fn with_clock(clock: fn() -> Timestamp) -> Self {
        Self {
            spec: Self::spec(),
            clock,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "time_now",
            "Current time",
            "The current date and time in a time zone: wall-clock time, UTC, the UTC \
             offset, the zone's abbreviation, whether daylight saving time is in effect, \
             and the weekday. Without time_zone, the user's computer's own zone is used.",
            json!({
                "type": "object",
                "properties": {
                    "time_zone": {
                        "type": "string",
                        "maxLength": MAX_ZONE_CHARS,
                        "description": "An IANA time zone name such as Europe/Berlin, America/New_York or UTC. Default: the user's local zone."
                    }
                },
                "additionalProperties": false
            }),
            Some(zoned_time_schema()),
            true,
        )
    }
}

impl Default for TimeNow {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for TimeNow {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: NowArguments = match super::arguments("time_now", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        let (zone, name) = match args.time_zone.as_deref() {
            Some(name) => match self::zone("time_zone", name) {
                Ok(found) => found,
                Err(error) => return Ok(error),
            },
            None => local_zone(),
        };
        // Whole seconds: nobody asks a model for the nanosecond.
        let now = (self.clock)();
        let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
        let time = ZonedTime::of(&now.to_zoned(zone), &name);
        Ok(structured(format!("It is {}.", time.describe()), time))
    }
}

// ---------------------------------------------------------------------------------------

/// `convert_time`: one time, read in one zone, shown in another.
pub struct ConvertTime {
    spec: ToolSpec,
    clock: fn() -> Timestamp,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConvertArguments {
    time: String,
    #[serde(default)]
    from_time_zone: Option<String>,
    to_time_zone: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Conversion {
    from: ZonedTime,
    to: ZonedTime,
    /// Set when the time fell in a daylight saving gap or repeated hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

impl ConvertTime {
    pub fn new() -> Self {
        Self::with_clock(Timestamp::now)
    }

    /// A `convert_time` whose "today" (for a time without a date) comes from `clock`.
    pub fn with_clock(clock: fn() -> Timestamp) -> Self {
        Self {
            spec: Self::spec(),
            clock,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "convert_time",
            "Convert a time between zones",
            "Convert a date and time from one time zone to another, with daylight saving \
             time applied for that date. `time` is a wall-clock time such as \
             2026-03-29T14:30 or 2026-03-29 14:30:00 (read in from_time_zone), a time of \
             day such as 14:30 (today in from_time_zone), or an exact instant with an \
             offset or zone such as 2026-03-29T14:30:00Z, 2026-03-29T14:30:00+02:00 or \
             2026-03-29T14:30:00[Europe/Paris] (then leave from_time_zone out). A wall-clock \
             time that a clock change skips or repeats is resolved and explained in `note`.",
            json!({
                "type": "object",
                "properties": {
                    "time": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_TIME_CHARS,
                        "description": "The time to convert (see the tool's description for the forms)."
                    },
                    "from_time_zone": {
                        "type": "string",
                        "maxLength": MAX_ZONE_CHARS,
                        "description": "The IANA zone `time` is read in, for a time without an offset. Default: the user's local zone."
                    },
                    "to_time_zone": {
                        "type": "string",
                        "maxLength": MAX_ZONE_CHARS,
                        "description": "The IANA zone to convert to, such as Asia/Tokyo or UTC."
                    }
                },
                "required": ["time", "to_time_zone"],
                "additionalProperties": false
            }),
            Some(json!({
                "type": "object",
                "properties": {
                    "from": zoned_time_schema(),
                    "to": zoned_time_schema(),
                    "note": {"type": "string"}
                },
                "required": ["from", "to"]
            })),
            true,
        )
    }

    fn convert(&self, args: ConvertArguments) -> Result<ToolOutput, ToolOutput> {
        let text = args.time.trim();
        if text.is_empty() {
            return Err(ToolOutput::error(
                "`time` is empty: give a time such as 2026-03-29T14:30",
            ));
        }
        if text.chars().count() > MAX_TIME_CHARS {
            return Err(ToolOutput::error(format!(
                "`time` is longer than {MAX_TIME_CHARS} characters"
            )));
        }
        let (to_zone, to_name) = zone("to_time_zone", &args.to_time_zone)?;
        let exact = |from: Zoned,
                     from_name: String|
         -> Result<(Zoned, String, Option<String>), ToolOutput> {
            if args.from_time_zone.is_some() {
                return Err(ToolOutput::error(format!(
                    "`time` {text:?} already names its offset or zone: leave from_time_zone out, or give the time without an offset"
                )));
            }
            Ok((from, from_name, None))
        };
        let (from, from_name, note) = if text.contains('[') {
            match text.parse::<Zoned>() {
                Ok(zoned) => {
                    let name = zoned
                        .time_zone()
                        .iana_name()
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("UTC{}", offset_text(zoned.offset())));
                    exact(zoned, name)?
                }
                Err(e) => return Err(unreadable(text, &e)),
            }
        } else if let Ok(instant) = text.parse::<Timestamp>() {
            // An instant with an offset: shown in that offset.
            let offset = parse_offset(text);
            let zone = offset.map_or(TimeZone::UTC, TimeZone::fixed);
            let name =
                offset.map_or_else(|| "UTC".to_owned(), |o| format!("UTC{}", offset_text(o)));
            exact(instant.to_zoned(zone), name)?
        } else {
            let (from_zone, from_name) = match args.from_time_zone.as_deref() {
                Some(name) => zone("from_time_zone", name)?,
                None => local_zone(),
            };
            let wall = match text.parse::<civil::DateTime>() {
                Ok(wall) => wall,
                Err(date_error) => match text.parse::<civil::Time>() {
                    Ok(time) => {
                        let today = (self.clock)().to_zoned(from_zone.clone()).date();
                        today.to_datetime(time)
                    }
                    Err(_) => return Err(unreadable(text, &date_error)),
                },
            };
            let ambiguous = from_zone.to_ambiguous_zoned(wall);
            let offsets = ambiguous.offset();
            let zoned = ambiguous.compatible().map_err(|e| {
                ToolOutput::error(format!("{wall} in {from_name} is out of range: {e}"))
            })?;
            let note = match offsets {
                AmbiguousOffset::Unambiguous { .. } => None,
                AmbiguousOffset::Gap { before, after } => Some(format!(
                    "{wall} does not exist in {from_name}: the clocks jumped from UTC{} to UTC{} then, so it is read as {}",
                    offset_text(before),
                    offset_text(after),
                    zoned.datetime()
                )),
                AmbiguousOffset::Fold { before, after } => Some(format!(
                    "{wall} happens twice in {from_name} (first at UTC{}, then at UTC{} after the clocks went back); the first is used",
                    offset_text(before),
                    offset_text(after)
                )),
            };
            (zoned, from_name, note)
        };
        let to = from.with_time_zone(to_zone);
        let conversion = Conversion {
            from: ZonedTime::of(&from, &from_name),
            to: ZonedTime::of(&to, &to_name),
            note,
        };
        let mut text = format!(
            "{} is {}.",
            conversion.from.describe(),
            conversion.to.describe()
        );
        if let Some(note) = &conversion.note {
            text.push_str(&format!(" Note: {note}."));
        }
        Ok(structured(text, conversion))
    }
}

impl Default for ConvertTime {
    fn default() -> Self {
        Self::new()
    }
}

/// An offset as ISO 8601 writes it: `+02:00`, `-09:30` (`+00:19:32` for the odd
/// historical one with seconds).
fn offset_text(offset: jiff::tz::Offset) -> String {
    let seconds = offset.seconds();
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.unsigned_abs();
    let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if rest == 0 {
        format!("{sign}{hours:02}:{minutes:02}")
    } else {
        format!("{sign}{hours:02}:{minutes:02}:{rest:02}")
    }
}

/// The numeric offset a time with an offset was written with (`None` for `Z`).
fn parse_offset(text: &str) -> Option<jiff::tz::Offset> {
    use jiff::fmt::temporal::{Pieces, PiecesOffset};
    match Pieces::parse(text).ok()?.offset()? {
        PiecesOffset::Numeric(numeric) => Some(numeric.offset()),
        _ => None,
    }
}

fn unreadable(text: &str, error: &jiff::Error) -> ToolOutput {
    ToolOutput::error(format!(
        "`time` {text:?} is not a time Conduit can read ({error}); use a form such as 2026-03-29T14:30, 2026-03-29 14:30, 14:30, 2026-03-29T14:30:00Z or 2026-03-29T14:30:00+02:00"
    ))
}

#[async_trait]
impl Tool for ConvertTime {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ConvertArguments = match super::arguments("convert_time", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        Ok(self.convert(args).unwrap_or_else(|error| error))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn error_text(output: ToolOutput) -> String {
        format!("{:?}", output.parts)
    }

    #[test]
    fn without_a_zone_database_a_named_zone_says_what_to_install_and_utc_still_works() {
        let none = TimeZoneDatabase::none();
        let (utc, shown) = zone_in(&none, "to_time_zone", "utc").unwrap();
        assert_eq!((utc, shown.as_str()), (TimeZone::UTC, "UTC"));
        let missing = error_text(zone_in(&none, "to_time_zone", "Europe/Oslo").unwrap_err());
        assert!(
            missing.contains("no time zone database") && missing.contains("tzdata"),
            "{missing}"
        );
    }

    #[test]
    fn with_the_systems_database_a_named_zone_is_found_and_a_wrong_one_named() {
        let (oslo, shown) = zone("to_time_zone", "Europe/Oslo").unwrap();
        assert_eq!(shown, "Europe/Oslo");
        assert_eq!(oslo.iana_name(), Some("Europe/Oslo"));
        let wrong = error_text(zone("to_time_zone", "Europe/Atlantis").unwrap_err());
        assert!(wrong.contains("not a time zone Conduit knows"), "{wrong}");
    }
}
