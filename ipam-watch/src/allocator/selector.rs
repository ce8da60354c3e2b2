//! Pure Kubernetes-style label selector (matchLabels + matchExpressions).

use std::collections::BTreeMap;

/// Operator of a `matchExpressions` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOp {
    /// Label present and its value in `values`.
    In,
    /// Label absent, or its value not in `values`.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: SelectorOp,
    /// Values for `In` / `NotIn`.
    pub values: Vec<String>,
}

/// A label selector; the empty selector matches every node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelector {
    /// Exact key/value matches.
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    pub match_expressions: Vec<SelectorRequirement>,
}

impl NodeSelector {
    /// True if every term holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let val = labels.get(&r.key);
                match r.operator {
                    SelectorOp::In => val.is_some_and(|v| r.values.contains(v)),
                    SelectorOp::NotIn => val.is_none_or(|v| !r.values.contains(v)),
                    SelectorOp::Exists => val.is_some(),
                    SelectorOp::DoesNotExist => val.is_none(),
                }
            })
    }

    /// Number of terms; more specific selectors are preferred when several pools match.
    pub fn specificity(&self) -> usize {
        self.match_labels.len() + self.match_expressions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: SelectorOp, values: &[&str]) -> SelectorRequirement {
        SelectorRequirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn empty_matches_all() {
        assert!(NodeSelector::default().matches(&labels(&[])));
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = NodeSelector {
            match_labels: labels(&[("rack", "r1")]),
            match_expressions: vec![
                req("zone", SelectorOp::In, &["a", "b"]),
                req("gpu", SelectorOp::DoesNotExist, &[]),
                req("tier", SelectorOp::NotIn, &["edge"]),
                req("pool", SelectorOp::Exists, &[]),
            ],
        };
        assert!(sel.matches(&labels(&[("rack", "r1"), ("zone", "a"), ("pool", "x")])));
        assert!(sel.matches(&labels(&[
            ("rack", "r1"),
            ("zone", "b"),
            ("pool", ""),
            ("tier", "core")
        ])));
        assert!(!sel.matches(&labels(&[("rack", "r2"), ("zone", "a"), ("pool", "x")])));
        assert!(!sel.matches(&labels(&[("rack", "r1"), ("zone", "c"), ("pool", "x")])));
        assert!(!sel.matches(&labels(&[
            ("rack", "r1"),
            ("zone", "a"),
            ("pool", "x"),
            ("gpu", "1")
        ])));
        assert!(!sel.matches(&labels(&[
            ("rack", "r1"),
            ("zone", "a"),
            ("pool", "x"),
            ("tier", "edge")
        ])));
        assert!(!sel.matches(&labels(&[("rack", "r1"), ("zone", "a")])));
        assert_eq!(sel.specificity(), 5);
    }
}
