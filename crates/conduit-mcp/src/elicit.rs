//! Elicitation: what a server asks the user, in Conduit's own types read from the wire's
//! restricted JSON Schema (strings, numbers, booleans, single and multi-select enums), the
//! answer checked against that schema before it goes back, and the [`Asker`] seam through
//! which a frontend answers (a form in the window, prompts on a terminal, a scenario in
//! the conformance client). The same seam takes sampling requests ([`crate::sampling`]).

use async_trait::async_trait;

use crate::sampling::{SamplingAnswer, SamplingRequest};
use conduit_core::content::json_size;
use serde::Serialize;
use serde_json::{Map, Value};

// A question waits until the user answers, and every waiting question goes to the window
// again each time one arrives or leaves: without these caps a server could park forms of
// hundreds of MiB and make every reload copy them into the page. A question past one is
// declined, and the log says which cap it broke.

/// The longest message a question carries, in bytes: a real one is a sentence or a
/// paragraph; this is pages of text.
pub const MAX_QUESTION_MESSAGE_BYTES: usize = 64 * 1024;

/// The longest page address a URL question carries, in bytes: the longest link Conduit
/// opens (a sign-in page's, with its state and challenge, is well under 2 KiB), so a page
/// shown can be opened.
pub const MAX_QUESTION_URL_BYTES: usize = conduit_core::text::MAX_LINK_BYTES;

/// The most fields a form has: a real one asks a handful of things.
pub const MAX_FORM_FIELDS: usize = 100;

/// The most options one field of a form offers: a list of every country is about 250.
pub const MAX_FIELD_OPTIONS: usize = 1_000;

/// The most JSON a form's schema takes (names, titles, descriptions, defaults, options):
/// a real form's is a few KiB, a long list of options tens.
pub const MAX_FORM_SCHEMA_BYTES: usize = 256 * 1024;

/// One question a server asks.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct Elicitation {
    /// The server that asks (the name in the `mcpServers` file).
    pub server: String,
    pub message: String,
    pub kind: ElicitationKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum ElicitationKind {
    /// Fields to fill in.
    Form { fields: Vec<FormField> },
    /// A page to open in the browser, with the user's consent.
    Url { url: String },
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(rename_all = "camelCase")]
pub struct FormField {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub input: FieldInput,
}

impl Elicitation {
    /// Whether the question may be shown: its message and page address within their caps
    /// (a form's fields are capped as they are read, by [`form_fields`]), and a page one
    /// the user's browser reaches safely: https, or http on this machine (a sign-in or a
    /// payment page over plain http elsewhere can be read and changed on the way), and
    /// that only when the server asking is on this machine too (`server_on_this_machine`:
    /// it runs here or its URL names this machine). A remote server must not send the
    /// browser to a service on the user's machine (a local admin page's "shut down"
    /// address), the rule sign-in pages follow. Else why not.
    pub fn check(&self, server_on_this_machine: bool) -> Result<(), String> {
        if self.message.len() > MAX_QUESTION_MESSAGE_BYTES {
            return Err(format!(
                "the question's message is larger than {} KiB",
                MAX_QUESTION_MESSAGE_BYTES / 1024
            ));
        }
        match &self.kind {
            ElicitationKind::Url { url } if url.len() > MAX_QUESTION_URL_BYTES => Err(format!(
                "the question's page address is larger than {} KiB",
                MAX_QUESTION_URL_BYTES / 1024
            )),
            ElicitationKind::Url { url } => match reqwest::Url::parse(url) {
                Ok(page) if page.scheme() == "https" => Ok(()),
                Ok(page)
                    if page.scheme() == "http"
                        && crate::config::url_on_this_machine(url)
                        && server_on_this_machine =>
                {
                    Ok(())
                }
                Ok(page) if page.scheme() == "http" && crate::config::url_on_this_machine(url) => {
                    Err("the question's page is on this machine over http, and the server asking is not; Conduit opens such a page only for a server that is on this machine too".to_owned())
                }
                Ok(page) => Err(format!(
                    "the question's page is not https ({}:); Conduit opens a server's page only over https (http only on this machine)",
                    crate::client::server_words(page.scheme(), 20)
                )),
                Err(error) => Err(format!("the question's page address is not a URL: {error}")),
            },
            ElicitationKind::Form { .. } => Ok(()),
        }
    }
}

/// What a field takes.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FieldInput {
    Text {
        default: Option<String>,
        /// `email`, `uri`, `date` or `date-time`.
        format: Option<String>,
        min_length: Option<u64>,
        max_length: Option<u64>,
    },
    Number {
        integer: bool,
        default: Option<f64>,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean {
        default: Option<bool>,
    },
    /// One of the options.
    Choice {
        options: Vec<ChoiceOption>,
        default: Option<String>,
    },
    /// Any number of the options.
    Choices {
        options: Vec<ChoiceOption>,
        default: Vec<String>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ChoiceOption {
    pub value: String,
    pub title: Option<String>,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// The form's values (empty for a URL the user agreed to open).
    Accept(Map<String, Value>),
    Decline,
    Cancel,
}

/// Which kinds of elicitation a frontend can answer; declared to servers as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElicitationOffer {
    pub form: bool,
    pub url: bool,
}

/// Who answers a server's questions (elicitation) and requests to run a model
/// (sampling).
#[async_trait]
pub trait Asker: Send + Sync {
    fn offers(&self) -> ElicitationOffer;

    /// Asks the user; a frontend that cannot ask right now declines.
    async fn elicit(&self, question: Elicitation) -> ElicitationAnswer;

    /// Whether this frontend can answer sampling requests (then, and only then, the
    /// sampling capability is declared, with tools).
    fn samples(&self) -> bool {
        false
    }

    /// Whether this frontend renders MCP Apps views (then, and only then, the
    /// `io.modelcontextprotocol/ui` extension is declared).
    fn shows_views(&self) -> bool {
        false
    }

    /// Decides a server's sampling request: shown to the user, run on the model they
    /// pick after they approve it, and its result returned only after they confirm. A
    /// frontend that cannot ask rejects.
    async fn sample(&self, request: SamplingRequest) -> SamplingAnswer {
        let _ = request;
        SamplingAnswer::Rejected
    }
}

/// Reads a form's restricted schema (`requestedSchema`): an object whose properties are
/// primitives, within the form's caps. Anything else is refused, naming the property or
/// the cap.
pub fn form_fields(schema: &Value) -> Result<Vec<FormField>, String> {
    if json_size(schema) > MAX_FORM_SCHEMA_BYTES {
        return Err(format!(
            "the form's schema is larger than {} KiB",
            MAX_FORM_SCHEMA_BYTES / 1024
        ));
    }
    let object = schema
        .as_object()
        .ok_or("the form's schema is not an object")?;
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the form's schema must be of type object".into());
    }
    let required: Vec<&str> = match object.get("required") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| n.as_str().ok_or("required must list property names"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("required must be an array".into()),
    };
    let properties = match object.get("properties") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(properties)) => properties,
        Some(_) => return Err("properties must be an object".into()),
    };
    if properties.len() > MAX_FORM_FIELDS {
        return Err(format!(
            "the form has {} fields; a form may have at most {MAX_FORM_FIELDS}",
            properties.len()
        ));
    }
    properties
        .iter()
        .map(|(name, property)| {
            let input = field_input(property).map_err(|why| format!("field {name:?}: {why}"))?;
            Ok(FormField {
                name: name.clone(),
                title: text(property, "title"),
                description: text(property, "description"),
                required: required.contains(&name.as_str()),
                input,
            })
        })
        .collect()
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn number(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// Options from `enum` (with the legacy `enumNames` as titles), or from `oneOf`/`anyOf`
/// entries of `{const, title}`.
fn options(schema: &Value) -> Result<Option<Vec<ChoiceOption>>, String> {
    let few_enough = |offered: usize| {
        if offered > MAX_FIELD_OPTIONS {
            Err(format!(
                "it offers {offered} options; a field may offer at most {MAX_FIELD_OPTIONS}"
            ))
        } else {
            Ok(())
        }
    };
    if let Some(values) = schema.get("enum") {
        let values = values.as_array().ok_or("enum must be an array")?;
        few_enough(values.len())?;
        let titles = schema.get("enumNames").and_then(Value::as_array);
        return values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = v.as_str().ok_or("enum values must be strings")?.to_owned();
                let title = titles
                    .and_then(|t| t.get(i))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                Ok(ChoiceOption { value, title })
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Some);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(entries) = schema.get(key) {
            let entries = entries
                .as_array()
                .ok_or(format!("{key} must be an array"))?;
            few_enough(entries.len())?;
            return entries
                .iter()
                .map(|entry| {
                    let value = entry
                        .get("const")
                        .and_then(Value::as_str)
                        .ok_or(format!("each {key} entry needs a string const"))?
                        .to_owned();
                    Ok(ChoiceOption {
                        value,
                        title: text(entry, "title"),
                    })
                })
                .collect::<Result<Vec<_>, String>>()
                .map(Some);
        }
    }
    Ok(None)
}

fn field_input(property: &Value) -> Result<FieldInput, String> {
    let kind = property
        .get("type")
        .and_then(Value::as_str)
        .ok_or("it has no type")?;
    match kind {
        "string" => match options(property)? {
            Some(options) => Ok(FieldInput::Choice {
                options,
                default: text(property, "default"),
            }),
            None => Ok(FieldInput::Text {
                default: text(property, "default"),
                format: text(property, "format"),
                min_length: count(property, "minLength"),
                max_length: count(property, "maxLength"),
            }),
        },
        "number" | "integer" => Ok(FieldInput::Number {
            integer: kind == "integer",
            default: number(property, "default"),
            minimum: number(property, "minimum"),
            maximum: number(property, "maximum"),
        }),
        "boolean" => Ok(FieldInput::Boolean {
            default: property.get("default").and_then(Value::as_bool),
        }),
        "array" => {
            let items = property.get("items").ok_or("a list needs items")?;
            let options = options(items)?.ok_or("a list's items must be enumerated")?;
            let default = match property.get("default") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(values)) => values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                Some(_) => return Err("a list's default must be an array".into()),
            };
            Ok(FieldInput::Choices {
                options,
                default,
                min_items: count(property, "minItems"),
                max_items: count(property, "maxItems"),
            })
        }
        other => Err(format!("type {other:?} is not one a form can ask for")),
    }
}

/// The form's defaults: what a user who changes nothing sends.
pub fn defaults(fields: &[FormField]) -> Map<String, Value> {
    let mut values = Map::new();
    for field in fields {
        let value = match &field.input {
            FieldInput::Text { default, .. } => default.clone().map(Value::String),
            FieldInput::Number {
                default, integer, ..
            } => default.map(|d| {
                if *integer {
                    Value::from(d as i64)
                } else {
                    Value::from(d)
                }
            }),
            FieldInput::Boolean { default } => default.map(Value::Bool),
            FieldInput::Choice { default, .. } => default.clone().map(Value::String),
            FieldInput::Choices { default, .. } if !default.is_empty() => Some(Value::Array(
                default.iter().cloned().map(Value::String).collect(),
            )),
            FieldInput::Choices { .. } => None,
        };
        if let Some(value) = value {
            values.insert(field.name.clone(), value);
        }
    }
    values
}

/// Checks an answer against the form: every required field, the right type, within its
/// bounds and among its options, and no field the form did not ask for.
pub fn check(fields: &[FormField], values: &Map<String, Value>) -> Result<(), String> {
    if let Some(unknown) = values
        .keys()
        .find(|k| !fields.iter().any(|f| &f.name == *k))
    {
        return Err(format!("the form has no field {unknown:?}"));
    }
    for field in fields {
        let Some(value) = values.get(&field.name) else {
            if field.required {
                return Err(format!("{} is required", label(field)));
            }
            continue;
        };
        check_value(field, value).map_err(|why| format!("{}: {why}", label(field)))?;
    }
    Ok(())
}

fn label(field: &FormField) -> &str {
    field.title.as_deref().unwrap_or(&field.name)
}

/// Whether `text` is what the spec's string `format` names (`email`, `uri`, `date`,
/// `date-time`); a format it does not name takes any text.
fn fits_format(text: &str, format: &str) -> bool {
    let digits =
        |part: &str, count: usize| part.len() == count && part.bytes().all(|b| b.is_ascii_digit());
    // `YYYY-MM-DD`, the month and day in range.
    let date = |text: &str| {
        let mut parts = text.split('-');
        let (Some(year), Some(month), Some(day), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        digits(year, 4)
            && digits(month, 2)
            && digits(day, 2)
            && (1..=12).contains(&month.parse::<u8>().unwrap_or(0))
            && (1..=31).contains(&day.parse::<u8>().unwrap_or(0))
    };
    match format {
        "email" => text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
                && !text.chars().any(char::is_whitespace)
        }),
        "uri" => !text.chars().any(char::is_whitespace) && url::Url::parse(text).is_ok(),
        "date" => date(text),
        // RFC 3339: `2026-11-30T06:46:38Z`, `…38.5+01:00`.
        "date-time" => text
            .split_once(['T', 't'])
            .is_some_and(|(day, time)| {
                let zone_at = time.rfind(['Z', 'z', '+', '-']).unwrap_or(time.len());
                let (clock, zone) = time.split_at(zone_at);
                let clock = clock.split_once('.').map_or(clock, |(whole, fraction)| {
                    if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) {
                        whole
                    } else {
                        ""
                    }
                });
                let mut hms = clock.split(':');
                let zone_fits = matches!(zone, "Z" | "z")
                    || zone.get(1..).is_some_and(|offset| {
                        offset.split_once(':').is_some_and(|(h, m)| digits(h, 2) && digits(m, 2))
                    });
                date(day)
                    && zone_fits
                    && matches!(
                        (hms.next(), hms.next(), hms.next(), hms.next()),
                        (Some(h), Some(m), Some(sec), None) if digits(h, 2) && digits(m, 2) && digits(sec, 2)
                    )
            }),
        _ => true,
    }
}

fn check_value(field: &FormField, value: &Value) -> Result<(), String> {
    let among = |options: &[ChoiceOption], chosen: &str| {
        if options.iter().any(|o| o.value == chosen) {
            Ok(())
        } else {
            Err(format!("{chosen:?} is not one of the options"))
        }
    };
    match &field.input {
        FieldInput::Text {
            min_length,
            max_length,
            format,
            ..
        } => {
            let text = value.as_str().ok_or("must be text")?;
            if !text.is_empty()
                && let Some(format) = format.as_deref()
                && !fits_format(text, format)
            {
                return Err(format!("is not a valid {format}"));
            }
            let length = text.chars().count() as u64;
            if min_length.is_some_and(|min| length < min) {
                return Err(format!(
                    "must be at least {} characters",
                    min_length.unwrap_or(0)
                ));
            }
            if max_length.is_some_and(|max| length > max) {
                return Err(format!(
                    "must be at most {} characters",
                    max_length.unwrap_or(0)
                ));
            }
            Ok(())
        }
        FieldInput::Number {
            integer,
            minimum,
            maximum,
            ..
        } => {
            let number = value.as_f64().ok_or("must be a number")?;
            if *integer && number.fract() != 0.0 {
                return Err("must be a whole number".into());
            }
            if minimum.is_some_and(|min| number < min) || maximum.is_some_and(|max| number > max) {
                return Err("is out of range".into());
            }
            Ok(())
        }
        FieldInput::Boolean { .. } => value
            .as_bool()
            .map(|_| ())
            .ok_or("must be yes or no".into()),
        FieldInput::Choice { options, .. } => among(options, value.as_str().ok_or("must be text")?),
        FieldInput::Choices {
            options,
            min_items,
            max_items,
            ..
        } => {
            let chosen = value.as_array().ok_or("must be a list")?;
            for (at, item) in chosen.iter().enumerate() {
                among(options, item.as_str().ok_or("must be a list of text")?)?;
                // Each option once: `["a","a"]` met a `minItems` of 2.
                if chosen[..at].contains(item) {
                    return Err("names a choice twice".into());
                }
            }
            let n = chosen.len() as u64;
            if min_items.is_some_and(|min| n < min) || max_items.is_some_and(|max| n > max) {
                return Err("has too few or too many choices".into());
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The spec's restricted schema, every kind of field (2025-11-25, SEP-1034 defaults,
    /// SEP-1330 enums).
    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 5, "default": "Ann"},
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
                "score": {"type": "number", "default": 0.5},
                "ok": {"type": "boolean", "default": true},
                "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"], "default": "g"},
                "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 2, "default": ["a"]},
                "picks": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Ex"}]}}
            },
            "required": ["name", "age"]
        })
    }

    #[test]
    fn every_kind_of_field_is_read_with_its_titles_bounds_and_defaults() {
        let fields = form_fields(&schema()).unwrap();
        assert_eq!(fields.len(), 9);
        let name = &fields[0];
        assert_eq!(
            (name.name.as_str(), name.title.as_deref(), name.required),
            ("name", Some("Name"), true)
        );
        let color = fields.iter().find(|f| f.name == "color").unwrap();
        assert_eq!(
            color.input,
            FieldInput::Choice {
                options: vec![
                    ChoiceOption {
                        value: "r".into(),
                        title: Some("Red".into())
                    },
                    ChoiceOption {
                        value: "g".into(),
                        title: Some("Green".into())
                    }
                ],
                default: Some("g".into())
            }
        );
        assert_eq!(
            Value::Object(defaults(&fields)),
            json!({"name": "Ann", "age": 30, "score": 0.5, "ok": true, "color": "g", "tags": ["a"]})
        );
    }

    #[test]
    fn answers_are_checked_against_the_form() {
        let fields = form_fields(&schema()).unwrap();
        let answer = |v: Value| check(&fields, v.as_object().unwrap());
        assert!(answer(json!({"name": "Bo", "age": 3, "tags": ["a", "b"], "size": "l"})).is_ok());
        for (bad, why) in [
            (json!({"age": 3}), "required"),
            (json!({"name": "", "age": 3}), "at least"),
            (json!({"name": "toolong", "age": 3}), "at most"),
            (json!({"name": "Bo", "age": 3.5}), "whole"),
            (json!({"name": "Bo", "age": 200}), "range"),
            (json!({"name": "Bo", "age": 3, "color": "blue"}), "options"),
            (
                json!({"name": "Bo", "age": 3, "tags": ["a", "b", "c"]}),
                "too many",
            ),
            (json!({"name": "Bo", "age": 3, "ok": "yes"}), "yes or no"),
            (json!({"name": "Bo", "age": 3, "extra": 1}), "no field"),
            (json!({"name": "Bo", "age": 3, "tags": ["a", "a"]}), "twice"),
            (
                json!({"name": "Bo", "age": 3, "email": "not an address"}),
                "valid email",
            ),
        ] {
            let refused = answer(bad.clone()).unwrap_err();
            assert!(refused.contains(why), "{bad}: {refused}");
        }
        assert!(answer(json!({"name": "Bo", "age": 3, "email": "bo@example.org"})).is_ok());
    }

    /// The spec's four string formats, as every frontend's answer is checked (the
    /// window's inputs, the terminal's typed text).
    #[test]
    fn text_in_a_format_is_checked_against_it() {
        for (format, good, bad) in [
            (
                "email",
                &["a@b.io", "first.last+tag@mail.example.org"][..],
                &["a@b", "@b.io", "a b@c.io", "a@.io", "a@b.io.", "a@b@c.io"][..],
            ),
            (
                "uri",
                &[
                    "https://example.org/a?b=c",
                    "mailto:a@b.io",
                    "urn:isbn:0451450523",
                ],
                &["example.org", "/relative/path", "https://exa mple.org"],
            ),
            (
                "date",
                &["2026-11-30", "2024-02-29"],
                &[
                    "2026-13-01",
                    "2026-11-32",
                    "26-11-30",
                    "2026/11/30",
                    "2026-11-30T00:00",
                ],
            ),
            (
                "date-time",
                &[
                    "2026-11-30T06:46:38Z",
                    "2026-11-30T06:46:38.125+01:00",
                    "2026-11-30t06:46:38-05:30",
                ],
                &[
                    "2026-11-30",
                    "2026-11-30T06:46Z",
                    "2026-11-30T06:46:38",
                    "2026-11-30T06:46:38.Z",
                    "2026-11-30 06:46:38Z",
                ],
            ),
        ] {
            for text in good {
                assert!(fits_format(text, format), "{format}: {text}");
            }
            for text in bad {
                assert!(!fits_format(text, format), "{format}: {text}");
            }
        }
        assert!(fits_format("anything at all", "color"));
    }

    #[test]
    fn a_form_past_a_cap_is_refused_naming_the_cap() {
        let fields = |count: usize| {
            let properties: Map<String, Value> = (0..count)
                .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
                .collect();
            json!({"type": "object", "properties": properties})
        };
        let options = |count: usize| -> Vec<String> { (0..count).map(|i| i.to_string()).collect() };
        // A form at each cap is still read: real servers are not refused.
        assert_eq!(form_fields(&fields(MAX_FORM_FIELDS)).unwrap().len(), 100);
        let many = options(MAX_FIELD_OPTIONS);
        assert!(
            form_fields(&json!({"type": "object", "properties": {
                "pick": {"type": "string", "enum": many},
                "picks": {"type": "array", "items": {"anyOf": many.iter().map(|o| json!({"const": o})).collect::<Vec<_>>()}}
            }}))
            .is_ok()
        );
        let too_many = options(MAX_FIELD_OPTIONS + 1);
        for (schema, why) in [
            (
                fields(MAX_FORM_FIELDS + 1),
                "101 fields; a form may have at most 100",
            ),
            (
                json!({"type": "object", "properties": {"pick": {"type": "string", "enum": too_many}}}),
                "field \"pick\": it offers 1001 options; a field may offer at most 1000",
            ),
            (
                json!({"type": "object", "properties": {"picks": {"type": "array", "items": {
                    "oneOf": too_many.iter().map(|o| json!({"const": o})).collect::<Vec<_>>()}}}}),
                "field \"picks\": it offers 1001 options",
            ),
            (
                json!({"type": "object", "properties": {"name": {"type": "string",
                    "description": "x".repeat(MAX_FORM_SCHEMA_BYTES)}}}),
                "schema is larger than 256 KiB",
            ),
        ] {
            let refused = form_fields(&schema).unwrap_err();
            assert!(refused.contains(why), "{why}: {refused}");
        }
    }

    #[test]
    fn a_question_with_a_huge_message_or_address_or_a_page_not_over_https_is_refused() {
        let question = |message: String, kind: ElicitationKind| Elicitation {
            server: "s".into(),
            message,
            kind,
        };
        let form = || ElicitationKind::Form {
            fields: form_fields(&schema()).unwrap(),
        };
        let page = |url: String| ElicitationKind::Url { url };
        let near_cap = "x".repeat(MAX_QUESTION_MESSAGE_BYTES);
        assert_eq!(question(near_cap.clone(), form()).check(false), Ok(()));
        let address = format!(
            "https://pay.example/?{}",
            "a".repeat(MAX_QUESTION_URL_BYTES - 30)
        );
        assert_eq!(question("Pay".into(), page(address)).check(false), Ok(()));
        let local = || page("http://127.0.0.1:8080/authorize".into());
        assert_eq!(question("Sign in".into(), local()).check(true), Ok(()));
        // A remote server's page on this machine is refused.
        let refused = question("Sign in".into(), local())
            .check(false)
            .unwrap_err();
        assert!(refused.contains("the server asking is not"), "{refused}");
        let admin = page("http://localhost:8384/rest/system/shutdown".into());
        assert!(question("Go".into(), admin).check(false).is_err());
        for (asked, why) in [
            (
                question(format!("{near_cap}x"), form()),
                "message is larger than 64 KiB",
            ),
            (
                question(format!("{near_cap}x"), page("https://pay.example/".into())),
                "message is larger than 64 KiB",
            ),
            (
                question(
                    "Pay".into(),
                    page(format!(
                        "https://pay.example/?{}",
                        "a".repeat(MAX_QUESTION_URL_BYTES)
                    )),
                ),
                "page address is larger than 8 KiB",
            ),
            (
                question("Sign in".into(), page("http://sso-login.example/".into())),
                "not https (http:)",
            ),
            (
                question("Write".into(), page("mailto:boss@example.com".into())),
                "not https (mailto:)",
            ),
            (
                question("Run".into(), page("vscode://open".into())),
                "not https",
            ),
            (
                question("Oops".into(), page("not a url".into())),
                "not a URL",
            ),
        ] {
            let refused = asked.check(true).unwrap_err();
            assert!(refused.contains(why), "{why}: {refused}");
        }
    }

    #[test]
    fn a_schema_a_form_cannot_ask_is_refused_naming_the_field() {
        for (schema, why) in [
            (json!([]), "not an object"),
            (json!({"type": "array"}), "type object"),
            (
                json!({"type": "object", "properties": {"f": {"type": "object"}}}),
                "field \"f\"",
            ),
            (
                json!({"type": "object", "properties": {"f": {"type": "array", "items": {"type": "string"}}}}),
                "enumerated",
            ),
            (
                json!({"type": "object", "properties": {"f": {"type": "string", "enum": [1]}}}),
                "strings",
            ),
        ] {
            let refused = form_fields(&schema).unwrap_err();
            assert!(refused.contains(why), "{schema}: {refused}");
        }
    }
}
