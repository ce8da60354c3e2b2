//! Kubernetes RBAC evaluated over rendered manifests: who may do what, by the rendered
//! ClusterRoles, Roles and their bindings (plus any extra cluster-wide grants a test adds,
//! such as a cluster-admin). The rules of the RBAC authorizer: a rule matches when its
//! apiGroups, resources (with `resource/subresource`) and verbs each contain the wanted value
//! or `*`; a Role grants only in its own namespace.
#![allow(dead_code)]

use serde_json::Value;

/// Who is asking: a username and its groups, as the API server authenticates them.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    /// A pod's ServiceAccount token.
    pub fn service_account(namespace: &str, name: &str) -> User {
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    pub fn named(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_string()).collect(),
        }
    }
}

/// What is asked: an API group, a resource (`leases`, `nodebgpstatuses/status`), a verb, and
/// the namespace for namespaced resources.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub verb: &'a str,
    pub namespace: Option<&'a str>,
}

fn list_has(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v == "*" || v == want))
}

/// Does one PolicyRule grant `ask`?
pub fn rule_grants(rule: &Value, ask: &Ask) -> bool {
    list_has(&rule["apiGroups"], ask.group)
        && list_has(&rule["resources"], ask.resource)
        && list_has(&rule["verbs"], ask.verb)
        && rule["resourceNames"]
            .as_array()
            .is_none_or(|n| n.is_empty())
}

fn subject_is(subject: &Value, user: &User) -> bool {
    match subject["kind"].as_str() {
        Some("ServiceAccount") => {
            let ns = subject["namespace"].as_str().unwrap_or_default();
            let name = subject["name"].as_str().unwrap_or_default();
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        Some("User") => subject["name"] == user.name.as_str(),
        Some("Group") => user.groups.iter().any(|g| subject["name"] == g.as_str()),
        _ => false,
    }
}

fn role<'a>(
    docs: &'a [Value],
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Option<&'a Value> {
    docs.iter().find(|d| {
        d["kind"] == kind
            && d["metadata"]["name"] == name
            && namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns)
    })
}

/// Does `user` hold `ask` through the rendered RBAC objects?
pub fn allowed(docs: &[Value], user: &User, ask: &Ask) -> bool {
    docs.iter().any(|binding| {
        let kind = binding["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
            return false;
        }
        let binding_ns = binding["metadata"]["namespace"].as_str();
        if kind == "RoleBinding" && (ask.namespace.is_none() || ask.namespace != binding_ns) {
            return false;
        }
        if !binding["subjects"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| subject_is(s, user)))
        {
            return false;
        }
        let role_ref = &binding["roleRef"];
        let role_name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str() {
            Some("ClusterRole") => role(docs, "ClusterRole", role_name, None),
            Some("Role") => role(docs, "Role", role_name, binding_ns),
            _ => None,
        };
        role.and_then(|r| r["rules"].as_array())
            .is_some_and(|rules| rules.iter().any(|rule| rule_grants(rule, ask)))
    })
}

/// Every ServiceAccount subject bound to a role that grants `ask`, as usernames.
pub fn service_accounts_allowed(docs: &[Value], ask: &Ask) -> Vec<String> {
    let mut out: Vec<String> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
        .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["kind"] == "ServiceAccount")
        .map(|s| {
            User::service_account(
                s["namespace"].as_str().unwrap_or_default(),
                s["name"].as_str().unwrap_or_default(),
            )
        })
        .filter(|u| allowed(docs, u, ask))
        .map(|u| u.name)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A ClusterRole `cluster-admin` bound to `user` (every verb on everything), as a cluster has.
pub fn with_cluster_admin(docs: &[Value], user: &User) -> Vec<Value> {
    let mut out = docs.to_vec();
    out.push(serde_json::json!({
        "kind": "ClusterRole", "metadata": {"name": "test-cluster-admin"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    }));
    out.push(serde_json::json!({
        "kind": "ClusterRoleBinding", "metadata": {"name": "test-cluster-admin"},
        "roleRef": {"kind": "ClusterRole", "name": "test-cluster-admin"},
        "subjects": [{"kind": "User", "name": user.name}]
    }));
    out
}

/// Every `(verb, apiGroup, resource)` the ClusterRoles and Roles named `name` grant.
pub fn granted(docs: &[Value], name: &str) -> std::collections::BTreeSet<(String, String, String)> {
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut out = std::collections::BTreeSet::new();
    let roles = docs.iter().filter(|d| {
        (d["kind"] == "ClusterRole" || d["kind"] == "Role") && d["metadata"]["name"] == name
    });
    for rule in roles.flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default()) {
        for g in strs(&rule["apiGroups"]) {
            for r in strs(&rule["resources"]) {
                for v in strs(&rule["verbs"]) {
                    out.insert((v, g.clone(), r.clone()));
                }
            }
        }
    }
    out
}
