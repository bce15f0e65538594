//! JSON read with every object's keys checked: a key written twice is refused.
//!
//! serde_json keeps the last of two equal keys and drops the first without a word, so a
//! server written twice in `mcpServers` would run as the second and vanish as the first on
//! the next write. The error names the key, and serde_json adds its line and column.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON value whose objects each hold every key once.
pub(super) struct UniqueKeys(pub(super) Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::Bool(value)))
    }

    fn visit_i64<E>(self, value: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::from(value)))
    }

    fn visit_u64<E>(self, value: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::from(value)))
    }

    fn visit_f64<E>(self, value: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::from(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::String(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::String(value)))
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::Null))
    }

    fn visit_none<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys(Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<UniqueKeys, D::Error> {
        UniqueKeys::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(UniqueKeys(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "{key:?} is written twice in the same object (only one can count)"
                )));
            }
            let UniqueKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(UniqueKeys(Value::Object(object)))
    }
}
