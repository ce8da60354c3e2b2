//! Label and field selectors, parsed the way the API server parses them.

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(Self(reqs))
    }

    /// Whether the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

// Commas inside `in (a,b)` do not separate requirements.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn invalid_selector(text: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {text:?}"))
}

fn parse_label_req(part: &str) -> Result<LabelReq, ApiError> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(LabelReq::NotExists(check_key(key.trim(), part)?));
    }
    for (op, ctor) in [
        ("!=", LabelReq::NotEq as fn(_, _) -> _),
        ("==", LabelReq::Eq),
        ("=", LabelReq::Eq),
    ] {
        if let Some((k, v)) = part.split_once(op) {
            return Ok(ctor(check_key(k.trim(), part)?, v.trim().to_owned()));
        }
    }
    for (op, ctor) in [
        (" notin ", LabelReq::NotIn as fn(_, _) -> _),
        (" in ", LabelReq::In),
    ] {
        if let Some((k, rest)) = part.split_once(op) {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| invalid_selector(part))?;
            let values = inner.split(',').map(|v| v.trim().to_owned()).collect();
            return Ok(ctor(check_key(k.trim(), part)?, values));
        }
    }
    Ok(LabelReq::Exists(check_key(part, part)?))
}

fn check_key(key: &str, part: &str) -> Result<String, ApiError> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_owned())
    } else {
        Err(invalid_selector(part))
    }
}

/// A parsed `fieldSelector` over dotted JSON paths (`metadata.name`, `spec.nodeName`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `metadata.name=a,metadata.namespace!=b` (`==` is accepted too).
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(invalid_selector(part));
            };
            reqs.push((path.trim().to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(reqs))
    }

    /// Whether the object satisfies every requirement; a missing field reads as "".
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let got = path.split('.').try_fold(obj, |v, seg| v.get(seg));
            let got = match got {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *equal
        })
    }
}

/// Label and field selector together, as given on a list or watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    /// The `labelSelector` query parameter.
    pub labels: LabelSelector,
    /// The `fieldSelector` query parameter.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Parses both optional query parameters.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(labels.unwrap_or(""))?,
            fields: FieldSelector::parse(fields.unwrap_or(""))?,
        })
    }

    /// Whether the object matches both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj() -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns", "labels": {"a": "1", "b": "2"}}, "spec": {"x": true}})
    }

    #[test]
    fn label_selector_supports_equality_set_and_exists_forms() {
        let cases = [
            ("", true),
            ("a=1", true),
            ("a==1", true),
            ("a!=1", false),
            ("c!=1", true),
            ("a in (1,3)", true),
            ("a in (3)", false),
            ("a notin (3, 4),b", true),
            ("c notin (3)", true),
            ("!c", true),
            ("!a", false),
            ("a=1,b=3", false),
            ("c", false),
        ];
        for (sel, want) in cases {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&obj()),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a in 1").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selector_matches_dotted_paths() {
        let cases = [
            ("metadata.name=n1", true),
            ("metadata.name==n1,metadata.namespace=ns", true),
            ("metadata.name!=n1", false),
            ("metadata.namespace!=other", true),
            ("spec.x=true", true),
            ("spec.missing=", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(&obj()),
                want,
                "{sel}"
            );
        }
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
