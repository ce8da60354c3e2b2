//! Where the config comes from, as the core tells it: the configuration objects the node
//! runs (and which it does not) become the `ConfigApplied` condition, readiness, metrics,
//! log lines and Events about the Node. Pure.

use std::collections::BTreeSet;

use ipam_watch::source::DesiredSet;

use super::{ConfigOrigin, Core, Effect, EventReason, Notice};
use crate::objects::NodeConfig;

/// What is worth a line and an Event: objects running a last good version, and objects not
/// applied, each with why.
fn problems(c: &NodeConfig) -> BTreeSet<(EventReason, String, String)> {
    let last_good = c.last_good.iter().map(|(r, why)| {
        (
            EventReason::ConfigObjectLastGood,
            format!("{} {}", r.kind, r.name),
            format!(
                "{} {} runs its last good generation {} on this node: {why}",
                r.kind,
                r.name,
                r.generation.map_or_else(|| "?".into(), |g| g.to_string())
            ),
        )
    });
    let not_applied = c.not_applied.iter().map(|(kind, name, why)| {
        (
            EventReason::ConfigObjectNotApplied,
            format!("{kind} {name}"),
            format!("{kind} {name} is not applied on this node: {why}"),
        )
    });
    last_good.chain(not_applied).collect()
}

impl Core {
    /// Ready: the source is synced, or the objects select no config for this node (it does
    /// what it is configured to do: nothing).
    pub(super) fn ready(&self, desired: &DesiredSet) -> bool {
        desired.ready || self.origin.not_selected()
    }

    /// Takes the new origin; what newly goes wrong (or right again) is logged and becomes an
    /// Event about the Node.
    pub(super) fn set_origin(&mut self, out: &mut Vec<Effect>, origin: ConfigOrigin) {
        if origin == self.origin {
            return;
        }
        let before = match &self.origin {
            ConfigOrigin::Objects(Some(c)) => problems(c),
            _ => BTreeSet::new(),
        };
        let was_ready = self.ready(&self.announce.desired);
        self.origin = origin;
        if self.ready(&self.announce.desired) != was_ready {
            out.push(Effect::SetReady(self.ready(&self.announce.desired)));
        }
        let ConfigOrigin::Objects(Some(now)) = &self.origin else {
            return;
        };
        let after = problems(now);
        let new: Vec<_> = after.difference(&before).collect();
        out.push(Effect::Notice(Notice::ConfigObjects {
            applied: usize::from(now.speaker_config.is_some()) + now.peers.len(),
            last_good: now.last_good.len(),
            not_applied: now.not_applied.len(),
            cannot_run: now.cannot_run.len(),
            new: new.iter().map(|(_, _, note)| note.clone()).collect(),
        }));
        for (reason, subject, note) in new {
            self.node_event(
                out,
                *reason,
                true,
                format!("Config {subject}"),
                note.clone(),
            );
        }
        if after.is_empty() && !before.is_empty() {
            self.node_event(
                out,
                EventReason::ConfigObjectsApplied,
                false,
                "Config".into(),
                "every configuration object selecting this node runs at its current generation"
                    .into(),
            );
        }
    }
}
