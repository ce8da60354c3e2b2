//! `nodeSelector`: a Kubernetes `LabelSelector` (matchLabels + matchExpressions).
//!
//! Parsed and checked here, so every error names its field
//! (`peers[0].nodeSelector.matchExpressions[0].values: required and non-empty for In`) and
//! label keys and values follow the Kubernetes rules; kube-core's conversion checks neither
//! and its error names no field. Matching is kube-core's, through [`LabelSelector::to_kube`].

use std::collections::BTreeMap;

use kube_core::{Expression, Selector, SelectorExt};

use crate::error::{Errors, quoted};
use crate::tree::{Node, Obj, child_path, node};

/// Selects nodes by label; every term must hold. An empty selector matches every node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    /// Non-empty for `In`/`NotIn`, empty for `Exists`/`DoesNotExist`.
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// The same selector as kube-core's type, which does the matching. Infallible: the
    /// parser has checked the operators and that `In`/`NotIn` have values.
    pub fn to_kube(&self) -> Selector {
        let equal = self
            .match_labels
            .iter()
            .map(|(k, v)| Expression::Equal(k.clone(), v.clone()));
        let expressions = self.match_expressions.iter().map(|r| {
            let key = r.key.clone();
            let values = || r.values.iter().cloned().collect();
            match r.operator {
                SelectorOperator::In => Expression::In(key, values()),
                SelectorOperator::NotIn => Expression::NotIn(key, values()),
                SelectorOperator::Exists => Expression::Exists(key),
                SelectorOperator::DoesNotExist => Expression::DoesNotExist(key),
            }
        });
        equal.chain(expressions).collect()
    }

    /// Kubernetes semantics (kube-core's matcher): every term must hold; `NotIn` and
    /// `DoesNotExist` match a node without the label.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.to_kube().matches(labels)
    }
}

pub(crate) fn parse_selector(n: Node<'_, '_>, errs: &mut Errors) -> Option<LabelSelector> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["matchLabels", "matchExpressions"], errs);
    let before = errs.0.len();
    let mut selector = LabelSelector::default();
    if let Some(labels) = obj.get("matchLabels")
        && let Some(map) = Obj::of(node(&labels), errs)
    {
        for (key, value) in map.map {
            let path = child_path(&map.path, key);
            check_label_key(&path, key, errs);
            let pair = (path, value);
            if let Some(v) = node(&pair).str(errs) {
                check_label_value(&pair.0, v, errs);
                selector.match_labels.insert(key.clone(), v.to_owned());
            }
        }
    }
    if let Some(exprs) = obj.get("matchExpressions")
        && let Some(items) = node(&exprs).list(errs)
    {
        for item in &items {
            if let Some(req) = parse_requirement(node(item), errs) {
                selector.match_expressions.push(req);
            }
        }
    }
    (errs.0.len() == before).then_some(selector)
}

fn parse_requirement(n: Node<'_, '_>, errs: &mut Errors) -> Option<LabelSelectorRequirement> {
    let obj = Obj::of(n, errs)?;
    obj.check_keys(&["key", "operator", "values"], errs);
    let key = match obj.get("key") {
        Some(k) => node(&k)
            .str(errs)
            .inspect(|key| check_label_key(&k.0, key, errs)),
        None => {
            errs.push(&obj.key_path("key"), "required");
            None
        }
    };
    let operator = match obj.get("operator") {
        Some(op) => node(&op).parse(
            "one of In, NotIn, Exists, DoesNotExist",
            errs,
            |s| match s {
                "In" => Ok(SelectorOperator::In),
                "NotIn" => Ok(SelectorOperator::NotIn),
                "Exists" => Ok(SelectorOperator::Exists),
                "DoesNotExist" => Ok(SelectorOperator::DoesNotExist),
                _ => Err("is not one of In, NotIn, Exists, DoesNotExist".to_owned()),
            },
        ),
        None => {
            errs.push(&obj.key_path("operator"), "required");
            None
        }
    };
    let mut values = Vec::new();
    if let Some(vs) = obj.get("values")
        && let Some(items) = node(&vs).list(errs)
    {
        for item in &items {
            if let Some(v) = node(item).str(errs) {
                check_label_value(&item.0, v, errs);
                values.push(v.to_owned());
            }
        }
    }
    let operator = operator?;
    let needs_values = matches!(operator, SelectorOperator::In | SelectorOperator::NotIn);
    let values_path = obj.key_path("values");
    if needs_values && values.is_empty() {
        errs.push(
            &values_path,
            format!("required and non-empty for {operator:?}"),
        );
    } else if !needs_values && !values.is_empty() {
        errs.push(&values_path, format!("must be empty for {operator:?}"));
    }
    Some(LabelSelectorRequirement {
        key: key?.to_owned(),
        operator,
        values,
    })
}

/// `[prefix/]name`: prefix a DNS subdomain, name up to 63 characters (Kubernetes rules).
pub(crate) fn check_label_key(path: &str, key: &str, errs: &mut Errors) {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(is_dns_subdomain);
    if !prefix_ok || name.is_empty() || !is_label_value(name) {
        errs.push(
            path,
            format!(
                "{} is not a valid label key ([prefix/]name; name up to 63 of \
                 a-z, A-Z, 0-9, '-', '_', '.', starting and ending alphanumeric)",
                quoted(key)
            ),
        );
    }
}

fn check_label_value(path: &str, value: &str, errs: &mut Errors) {
    if !is_label_value(value) {
        errs.push(
            path,
            format!(
                "{} is not a valid label value (up to 63 of a-z, A-Z, 0-9, '-', '_', '.', \
                 starting and ending alphanumeric)",
                quoted(value)
            ),
        );
    }
}

fn is_label_value(s: &str) -> bool {
    let bytes = s.as_bytes();
    s.is_empty()
        || (bytes.len() <= 63
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

/// RFC 1123 label: lowercase alphanumerics and '-', 1..=63, alphanumeric at both ends.
pub(crate) fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .first()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// RFC 1123 subdomain (Kubernetes object names such as Node): dot-separated labels, ≤ 253.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn req(key: &str, operator: SelectorOperator, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn empty_selector_matches_every_node() {
        assert!(LabelSelector::default().matches(&labels(&[])));
    }

    /// A selector of one requirement.
    fn one(key: &str, operator: SelectorOperator, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![req(key, operator, values)],
        }
    }

    #[test]
    fn selector_operators_follow_kubernetes_semantics() {
        let node = labels(&[("rack", "r1")]);
        assert!(one("rack", SelectorOperator::In, &["r1", "r2"]).matches(&node));
        assert!(!one("rack", SelectorOperator::NotIn, &["r1"]).matches(&node));
        assert!(one("zone", SelectorOperator::NotIn, &["z1"]).matches(&node));
        assert!(one("rack", SelectorOperator::Exists, &[]).matches(&node));
        assert!(one("zone", SelectorOperator::DoesNotExist, &[]).matches(&node));
        assert!(!one("zone", SelectorOperator::In, &["z1"]).matches(&node));
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let selector = LabelSelector {
            match_labels: labels(&[("rack", "r1")]),
            match_expressions: vec![req("zone", SelectorOperator::Exists, &[])],
        };
        assert!(!selector.matches(&labels(&[("rack", "r1")])));
        assert!(selector.matches(&labels(&[("rack", "r1"), ("zone", "a")])));
    }

    #[test]
    fn dns_names_follow_rfc1123() {
        assert!(is_dns_label("tor1"));
        assert!(!is_dns_label("Tor1"));
        assert!(!is_dns_label("-tor"));
        assert!(!is_dns_label(""));
        assert!(is_dns_subdomain("node-a.example"));
        assert!(!is_dns_subdomain("node_a"));
    }
}
