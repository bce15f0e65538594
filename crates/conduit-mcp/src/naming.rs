//! Tool names every provider accepts: `server__tool` in `[A-Za-z0-9_-]`, at most 64
//! characters, made unique with a short hash when cleaning or shortening collides. The
//! way back is not a name parse: each tool made under a name carries its server and tool
//! ([`crate::tool::McpTool`]'s origin), which calls and events take from the registry.

use std::collections::{BTreeMap, HashSet};

/// The longest name the strictest provider accepts.
pub const MAX_LEN: usize = 64;
const SEPARATOR: &str = "__";

/// Exposed names for `(server, tool)` pairs, distinct from one another.
#[derive(Debug, Default, Clone)]
pub struct ToolNames {
    forward: BTreeMap<(String, String), String>,
}

impl ToolNames {
    /// Names every pair; the same input always gives the same names.
    pub fn assign<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut names = Self::default();
        let mut pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut taken: HashSet<String> = HashSet::new();
        for (server, tool) in pairs {
            let mut name = exposed_name(server, tool);
            // A hashed name may be taken too (a server can craft names whose hashes
            // meet): hashed again, with a counter, until it is free, so no tool hides
            // another under one name.
            let mut attempt = 0u32;
            while taken.contains(&name) {
                let key = match attempt {
                    0 => format!("{server}\u{0}{tool}"),
                    n => format!("{server}\u{0}{tool}\u{0}{n}"),
                };
                name = with_hash(&exposed_name(server, tool), &key);
                attempt += 1;
            }
            taken.insert(name.clone());
            names
                .forward
                .insert((server.to_owned(), tool.to_owned()), name);
        }
        names
    }

    pub fn name_of(&self, server: &str, tool: &str) -> Option<&str> {
        self.forward
            .get(&(server.to_owned(), tool.to_owned()))
            .map(String::as_str)
    }
}

/// `server__tool`, cleaned to the allowed characters and shortened with a hash suffix
/// when it is too long or cleaning changed it.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let raw = format!("{server}{SEPARATOR}{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean == raw && clean.len() <= MAX_LEN {
        return clean;
    }
    with_hash(&clean, &raw)
}

/// `base` cut to fit, then `_` and 8 hex digits of a hash of `key`.
fn with_hash(base: &str, key: &str) -> String {
    let hash = fnv1a(key.as_bytes());
    let suffix = format!("_{:08x}", hash as u32);
    let keep = MAX_LEN - suffix.len();
    let mut out: String = base.chars().take(keep).collect();
    out.push_str(&suffix);
    out
}

/// FNV-1a: a stable hash (unlike std's) so names do not change between runs.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_LEN
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(exposed_name("everything", "get-sum"), "everything__get-sum");
    }

    #[test]
    fn odd_characters_and_long_names_get_a_stable_hash() {
        let odd = exposed_name("my server", "read.file");
        assert!(valid(&odd), "{odd}");
        assert!(odd.starts_with("my_server__read_file_"));
        assert_eq!(
            odd,
            exposed_name("my server", "read.file"),
            "stable across calls"
        );
        let long = exposed_name(&"s".repeat(40), &"t".repeat(40));
        assert!(valid(&long) && long.len() == MAX_LEN, "{long}");
    }

    #[test]
    fn collisions_are_resolved_and_every_pair_gets_its_own_valid_name() {
        let pairs = [("a b", "x"), ("a_b", "x"), ("a", "b__x"), ("srv", "tool")];
        let names = ToolNames::assign(pairs);
        let exposed: HashSet<&str> = pairs
            .iter()
            .map(|(s, t)| names.name_of(s, t).unwrap())
            .collect();
        assert_eq!(exposed.len(), pairs.len(), "{exposed:?}");
        for (server, tool) in pairs {
            let name = names.name_of(server, tool).unwrap();
            assert!(valid(name), "{name}");
        }
        assert_eq!(
            names.name_of("a b", "x"),
            ToolNames::assign(pairs.iter().rev().copied()).name_of("a b", "x"),
            "the same pairs give the same names in any order"
        );
    }
}
