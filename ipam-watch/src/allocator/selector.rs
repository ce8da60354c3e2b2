//! A pool's node selector: kube-core's label selector (`kube::core::Selector`, which does the
//! matching), plus the number of terms the allocator ranks matching pools by.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Expression, Selector, SelectorExt};

/// A label selector; the empty selector matches every node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelector {
    selector: Selector,
    terms: usize,
}

impl NodeSelector {
    /// A selector whose every expression must hold.
    pub fn new(expressions: impl IntoIterator<Item = Expression>) -> Self {
        let expressions: Vec<Expression> = expressions.into_iter().collect();
        NodeSelector {
            terms: expressions.len(),
            selector: expressions.into_iter().collect(),
        }
    }

    /// `matchLabels` only.
    pub fn labels(labels: impl IntoIterator<Item = (String, String)>) -> Self {
        Self::new(labels.into_iter().map(|(k, v)| Expression::Equal(k, v)))
    }

    /// A Kubernetes `LabelSelector` (a pool's `spec.nodeSelector`). Unlike kube-core's
    /// `TryFrom`, it never fails: `In`/`NotIn` without values have the empty set (`In`
    /// matches nothing, `NotIn` everything), and an unknown operator yields a term nothing
    /// satisfies, so the pool serves no node rather than every node.
    pub fn from_label_selector(ls: &LabelSelector) -> Self {
        let labels = ls.match_labels.iter().flatten();
        let equal = labels.map(|(k, v)| Expression::Equal(k.clone(), v.clone()));
        let expressions = ls.match_expressions.iter().flatten().map(|e| {
            let key = e.key.clone();
            let values = || -> BTreeSet<String> { e.values.iter().flatten().cloned().collect() };
            match e.operator.as_str() {
                "In" => Expression::In(key, values()),
                "NotIn" => Expression::NotIn(key, values()),
                "Exists" => Expression::Exists(key),
                "DoesNotExist" => Expression::DoesNotExist(key),
                _ => Expression::In(key, BTreeSet::new()),
            }
        });
        Self::new(equal.chain(expressions))
    }

    /// True if every term holds for `labels` (kube-core's matching: `NotIn` and
    /// `DoesNotExist` hold for a node without the label).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.matches(labels)
    }

    /// Number of terms; more specific selectors are preferred when several pools match.
    pub fn specificity(&self) -> usize {
        self.terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.map(|vs| vs.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn empty_matches_all() {
        assert!(NodeSelector::default().matches(&labels(&[])));
        let empty = NodeSelector::from_label_selector(&LabelSelector::default());
        assert!(empty.matches(&labels(&[("rack", "r1")])));
        assert_eq!(empty.specificity(), 0);
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = NodeSelector::from_label_selector(&LabelSelector {
            match_labels: Some(labels(&[("rack", "r1")])),
            match_expressions: Some(vec![
                req("zone", "In", Some(&["a", "b"])),
                req("gpu", "DoesNotExist", None),
                req("tier", "NotIn", Some(&["edge"])),
                req("pool", "Exists", None),
            ]),
        });
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

    #[test]
    fn missing_values_and_unknown_operators() {
        let one = |r| {
            NodeSelector::from_label_selector(&LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![r]),
            })
        };
        let node = labels(&[("zone", "a")]);
        assert!(!one(req("zone", "In", None)).matches(&node));
        assert!(one(req("zone", "NotIn", None)).matches(&node));
        assert!(one(req("zone", "NotIn", Some(&[]))).matches(&node));
        assert!(!one(req("zone", "Bogus", Some(&["a"]))).matches(&node));
        assert!(!one(req("zone", "Bogus", None)).matches(&labels(&[])));
    }

    #[test]
    fn match_labels_alone() {
        let sel = NodeSelector::labels([("rack".to_owned(), "r1".to_owned())]);
        assert!(sel.matches(&labels(&[("rack", "r1"), ("zone", "a")])));
        assert!(!sel.matches(&labels(&[("rack", "r2")])));
        assert_eq!(sel.specificity(), 1);
    }
}
