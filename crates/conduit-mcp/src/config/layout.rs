//! Edits made in the file's own text, so everything they do not change stays as the user
//! laid it out: spacing, line breaks, the order of keys, how strings were escaped.
//!
//! The result is only a proposal: [`super::planned`] reads it back and uses it only when
//! it holds exactly the document the edits make, so a mistake here costs the layout,
//! never a value.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

use super::{Edit, SERVERS};

/// The text `edits` make of `original` (the file's text, without a byte order mark);
/// `None` when one cannot be made in it (the text no longer parses, a name is missing).
pub(super) fn edited(original: &str, edits: &[Edit]) -> Option<String> {
    let mut text = original.to_owned();
    for edit in edits {
        text = match edit {
            // The raw editor's text is what the user wrote: kept as written.
            Edit::Replace { text } => super::without_bom_text(text).to_owned(),
            edit => edited_once(&text, edit)?,
        };
    }
    Some(text)
}

fn edited_once(text: &str, edit: &Edit) -> Option<String> {
    let root = CstRootNode::parse(text, &ParseOptions::default()).ok()?;
    let servers = root.object_value()?.object_value_or_create(SERVERS)?;
    match edit {
        Edit::Replace { .. } => return None,
        Edit::Add { name, entry } => {
            servers.append(name, input(entry));
        }
        Edit::Update { name, entry } => {
            let property = servers.get(name)?;
            match (property.object_value(), entry) {
                (Some(object), Value::Object(fields)) => merge(&object, fields),
                _ => property.set_value(input(entry)),
            }
        }
        Edit::Remove { name } => servers.get(name)?.remove(),
        Edit::SetDisabled { name, disabled } => {
            let entry = servers.get(name)?.object_value()?;
            match (entry.get("disabled"), disabled) {
                (Some(property), true) => property.set_value(CstInputValue::Bool(true)),
                (None, true) => {
                    entry.append("disabled", CstInputValue::Bool(true));
                }
                (Some(property), false) => property.remove(),
                (None, false) => {}
            }
        }
    }
    Some(root.to_string())
}

/// Makes `object` hold `fields`, touching only what differs: a field gone is removed, a
/// new one appended, a changed one rewritten (an object within, field by field).
fn merge(object: &CstObject, fields: &serde_json::Map<String, Value>) {
    for property in object.properties() {
        let gone = property
            .decoded_name()
            .is_none_or(|name| !fields.contains_key(&name));
        if gone {
            property.remove();
        }
    }
    for (name, value) in fields {
        let Some(property) = object.get(name) else {
            object.append(name, input(value));
            continue;
        };
        if property
            .value()
            .and_then(|now| now.to_serde_value())
            .is_some_and(|now| now == *value)
        {
            continue;
        }
        match (property.object_value(), value) {
            (Some(inner), Value::Object(inner_fields)) => merge(&inner, inner_fields),
            _ => property.set_value(input(value)),
        }
    }
}

fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(value) => CstInputValue::Bool(*value),
        Value::Number(number) => CstInputValue::Number(number.to_string()),
        Value::String(text) => CstInputValue::String(text.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(fields) => CstInputValue::Object(
            fields
                .iter()
                .map(|(name, value)| (name.clone(), input(value)))
                .collect(),
        ),
    }
}
