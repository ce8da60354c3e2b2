//! Walking the generic YAML value tree with a field path, so every error can name its field.

use serde_json::{Map, Value};

use crate::error::{Errors, show};

/// A value and the path that leads to it (`peers[1].holdTime`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a, 'p> {
    pub(crate) path: &'p str,
    pub(crate) value: &'a Value,
}

/// A mapping whose keys are checked against a fixed set.
#[derive(Debug)]
pub(crate) struct Obj<'a> {
    pub(crate) path: String,
    pub(crate) map: &'a Map<String, Value>,
}

/// `parent.key`, or `parent["odd key"]` when the key is not a plain identifier.
pub(crate) fn child_path(parent: &str, key: &str) -> String {
    let plain = key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, parent.is_empty()) {
        (true, true) => key.to_owned(),
        (true, false) => format!("{parent}.{key}"),
        (false, _) => format!("{parent}[{}]", show(&Value::String(key.to_owned()))),
    }
}

pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

impl<'a> Obj<'a> {
    /// The mapping at `node`, or an error if it is something else.
    pub(crate) fn of(node: Node<'a, '_>, errs: &mut Errors) -> Option<Obj<'a>> {
        match node.value {
            Value::Object(map) => Some(Obj {
                path: node.path.to_owned(),
                map,
            }),
            other => {
                errs.push(node.path, format!("{} is not a mapping", show(other)));
                None
            }
        }
    }

    /// Reports every key not in `allowed`, suggesting the closest allowed key.
    pub(crate) fn check_keys(&self, allowed: &[&str], errs: &mut Errors) {
        for key in self.map.keys() {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let message = match suggest(key, allowed) {
                Some(near) => format!("unknown key (did you mean {near}?)"),
                None if allowed.len() <= 6 => {
                    format!("unknown key (expected one of {})", allowed.join(", "))
                }
                None => "unknown key".to_owned(),
            };
            errs.push(&child_path(&self.path, key), message);
        }
    }

    /// The value under `key` with its path; absent and `null` are both `None`.
    pub(crate) fn get(&self, key: &str) -> Option<(String, &'a Value)> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some((self.key_path(key), value)),
        }
    }

    pub(crate) fn key_path(&self, key: &str) -> String {
        child_path(&self.path, key)
    }
}

/// The allowed key closest to `key`: same letters in another case, or at most two edits away.
fn suggest<'k>(key: &str, allowed: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    if let Some(same) = allowed.iter().find(|a| a.to_ascii_lowercase() == lower) {
        return Some(same);
    }
    let limit = if key.chars().count() <= 4 { 1 } else { 2 };
    allowed
        .iter()
        .map(|a| (edit_distance(&lower, &a.to_ascii_lowercase()), *a))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

impl<'a> Node<'a, '_> {
    pub(crate) fn str(self, errs: &mut Errors) -> Option<&'a str> {
        match self.value {
            Value::String(s) => Some(s),
            Value::Number(_) | Value::Bool(_) => {
                let v = show(self.value);
                errs.push(
                    self.path,
                    format!("{v} is not a string (quote it: \"{v}\")"),
                );
                None
            }
            other => {
                errs.push(self.path, format!("{} is not a string", show(other)));
                None
            }
        }
    }

    pub(crate) fn bool(self, errs: &mut Errors) -> Option<bool> {
        match self.value {
            Value::Bool(b) => Some(*b),
            other => {
                errs.push(
                    self.path,
                    format!("{} is not a boolean (true or false)", show(other)),
                );
                None
            }
        }
    }

    /// A whole number in `lo..=hi`; `rule` is the allowed set as shown in errors.
    pub(crate) fn int(self, lo: u64, hi: u64, rule: &str, errs: &mut Errors) -> Option<u64> {
        match self.value {
            Value::Number(n) => {
                if let Some(v) = n.as_u64() {
                    if (lo..=hi).contains(&v) {
                        return Some(v);
                    }
                } else if n.as_i64().is_none() && n.as_f64().is_some_and(|f| f.fract() != 0.0) {
                    errs.push(self.path, format!("{n} is not a whole number"));
                    return None;
                }
                errs.not_allowed(self.path, n, rule);
                None
            }
            Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                errs.push(
                    self.path,
                    format!("{} is not a number (remove the quotes)", show(self.value)),
                );
                None
            }
            other => {
                errs.push(self.path, format!("{} is not a number", show(other)));
                None
            }
        }
    }

    /// The items of a list, each with its indexed path.
    pub(crate) fn list(self, errs: &mut Errors) -> Option<Vec<(String, &'a Value)>> {
        match self.value {
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (index_path(self.path, i), v))
                    .collect(),
            ),
            other => {
                errs.push(self.path, format!("{} is not a list", show(other)));
                None
            }
        }
    }

    /// A string parsed by `parse`. A non-string is reported as `<value> is not <expected>`;
    /// `parse` returns the rest of the message for a bad string (`"<value>" <message>`).
    pub(crate) fn parse<T>(
        self,
        expected: &str,
        errs: &mut Errors,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let Value::String(text) = self.value else {
            errs.push(self.path, format!("{} is not {expected}", show(self.value)));
            return None;
        };
        match parse(text) {
            Ok(v) => Some(v),
            Err(message) => {
                errs.push(self.path, format!("{} {message}", show(self.value)));
                None
            }
        }
    }
}

/// A looked-up field: absent (or null), present but invalid (already reported), or valid.
#[derive(Debug)]
pub(crate) enum Lookup<T> {
    Absent,
    Invalid,
    Valid(T),
}

impl<T> Lookup<T> {
    /// Reads `key` from `obj` with `read`, which reports its own errors.
    pub(crate) fn of<'a>(
        obj: &Obj<'a>,
        key: &str,
        errs: &mut Errors,
        read: impl FnOnce(Node<'a, '_>, &mut Errors) -> Option<T>,
    ) -> Lookup<T> {
        match obj.get(key) {
            None => Lookup::Absent,
            Some(pair) => match read(node(&pair), errs) {
                Some(v) => Lookup::Valid(v),
                None => Lookup::Invalid,
            },
        }
    }

    /// The value or `default`; `None` only when invalid, so dependent checks can be skipped.
    pub(crate) fn known(self, default: T) -> Option<T> {
        match self {
            Lookup::Absent => Some(default),
            Lookup::Invalid => None,
            Lookup::Valid(v) => Some(v),
        }
    }

    /// The value or `default`; an invalid value has been reported, so the result is unused.
    pub(crate) fn or(self, default: T) -> T {
        match self {
            Lookup::Valid(v) => v,
            Lookup::Absent | Lookup::Invalid => default,
        }
    }

    /// `Some(None)` when absent, `None` when invalid.
    pub(crate) fn optional(self) -> Option<Option<T>> {
        match self {
            Lookup::Absent => Some(None),
            Lookup::Invalid => None,
            Lookup::Valid(v) => Some(Some(v)),
        }
    }

    /// Reports `<path>: required` when absent.
    pub(crate) fn required(self, path: &str, errs: &mut Errors) -> Option<T> {
        match self {
            Lookup::Absent => {
                errs.push(path, "required");
                None
            }
            Lookup::Invalid => None,
            Lookup::Valid(v) => Some(v),
        }
    }
}

impl<T> Lookup<Option<T>> {
    pub(crate) fn or_none(self) -> Option<T> {
        self.or(None)
    }
}

impl<T> Lookup<T> {
    /// Wraps a valid value in `Some` so optional fields read uniformly.
    pub(crate) fn some(self) -> Lookup<Option<T>> {
        match self {
            Lookup::Absent => Lookup::Absent,
            Lookup::Invalid => Lookup::Invalid,
            Lookup::Valid(v) => Lookup::Valid(Some(v)),
        }
    }
}

/// [`Node::bool`] as a plain function, for [`Lookup::of`].
pub(crate) fn boolean(n: Node<'_, '_>, errs: &mut Errors) -> Option<bool> {
    n.bool(errs)
}

/// Shorthand for a [`Node`] from a `(path, value)` pair.
pub(crate) fn node<'a, 'p>(pair: &'p (String, &'a Value)) -> Node<'a, 'p> {
    Node {
        path: &pair.0,
        value: pair.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestion_prefers_case_insensitive_match() {
        assert_eq!(
            suggest("holdtime", &["holdTime", "keepaliveTime"]),
            Some("holdTime")
        );
    }

    #[test]
    fn suggestion_allows_two_edits_for_longer_keys() {
        assert_eq!(suggest("adress", &["address", "port"]), Some("address"));
        assert_eq!(suggest("prot", &["address", "port"]), None);
        assert_eq!(suggest("xyzzy", &["address", "port"]), None);
    }

    #[test]
    fn odd_keys_are_bracketed_in_paths() {
        assert_eq!(child_path("a", "b"), "a.b");
        assert_eq!(child_path("", "b"), "b");
        assert_eq!(
            child_path("m", "kubernetes.io/zone"),
            "m[\"kubernetes.io/zone\"]"
        );
    }
}
