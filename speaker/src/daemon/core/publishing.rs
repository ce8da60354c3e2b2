//! What the core publishes about the node: the Lease renewal, the report inputs and the
//! rate-limited NodeBGPStatus writes (moved out of core.rs to keep it focused).

use std::sync::Arc;
use std::time::Duration;

use super::report::{self, PeerInput, ReportInputs};
use super::{Core, Effect, LEASE_DURATION, STATUS_REFRESH};

impl Core {
    /// The UID of this node's Node, the owner of everything the speaker writes about it.
    /// After a rename, `node` still describes the old Node until the new one is seen: no
    /// owner then, rather than the wrong one (its garbage collection would take ours).
    pub(super) fn owner_uid(&self) -> Option<String> {
        self.node().uid.clone().filter(|_| !self.node.renamed)
    }

    /// The Lease says "this speaker runs": renewed every [`LEASE_RENEW`] (a failure retried
    /// after [`LEASE_RETRY`]), one renewal at a time, whenever status is published. It does
    /// not wait for the Node or the source: it is about the process. Once the Node's UID is
    /// known it is renewed at once with the Node as its owner (so deleting the Node deletes
    /// it), not a minute later.
    pub(super) fn maybe_renew_lease(&mut self, out: &mut Vec<Effect>, now: Duration, unix: u64) {
        if !self.api || !self.config.status.publish {
            return;
        }
        let uid = self.owner_uid();
        let owner_changed = uid.is_some() && uid != self.publishing.lease_owner;
        if !self.publishing.lease.due(now, owner_changed) {
            return;
        }
        self.publishing.lease.in_flight = true;
        self.publishing.lease_owner = uid.clone();
        out.push(Effect::RenewLease {
            node: self.node.name.clone(),
            node_uid: uid,
            duration: LEASE_DURATION,
            unix,
            at: now,
        });
    }

    pub fn report_inputs(&self) -> ReportInputs {
        let peers = self
            .sessions
            .peers
            .values()
            .filter_map(|p| {
                let status = self.sessions.statuses.get(&p.config.name)?.clone();
                Some(PeerInput {
                    config: p.config.clone(),
                    refused: Arc::clone(&p.refused),
                    status,
                })
            })
            .collect();
        let (local_asn, local_asn_source, asn_error) = match &self.node.asn {
            Some(Ok(r)) => (Some(r.asn), r.origin.to_string(), None),
            Some(Err(e)) => (None, String::new(), Some(e.clone())),
            None => (None, String::new(), None),
        };
        ReportInputs {
            source: self.config.source.kind(),
            local_asn: local_asn.unwrap_or(self.config.asn),
            local_asn_resolved: local_asn.is_some(),
            local_asn_source,
            asn_error,
            desired: Arc::clone(&self.announce.desired),
            guarded: self.announce.guarded.clone(),
            held: self.gate_report(),
            peers,
            cni: self
                .cni
                .condition(&self.config.cni, self.announce.guarded.as_deref()),
            transitions: Arc::clone(&self.publishing.transitions),
            unresolved: self.unresolved.clone(),
            config_rejected: self.config_rejected.clone(),
            lease: (self.api && self.config.status.publish)
                .then(|| self.publishing.lease_error.clone()),
            origin: self.origin.clone(),
            services: self.services_report(),
        }
    }

    /// Status is written only when its content changes (or [`STATUS_REFRESH`] has passed),
    /// at most once per `status.minInterval`, one write at a time. "Content" leaves out what
    /// moves without anything happening (message counters, a down session's retries: see
    /// [`report::content_fingerprint`]).
    pub(super) fn maybe_publish(
        &mut self,
        out: &mut Vec<Effect>,
        inputs: &ReportInputs,
        now: Duration,
        unix: u64,
    ) {
        // Before its configuration objects are known a node has nothing true to say.
        if !self.api
            || !self.config.status.publish
            || self.publishing.publish.in_flight
            || self.origin.waiting()
        {
            return;
        }
        let since = |t: Option<Duration>| t.map(|t| now.saturating_sub(t));
        if since(self.publishing.publish.rendered_at)
            .is_some_and(|a| a < self.config.status.min_interval)
        {
            return;
        }
        self.publishing.publish.rendered_at = Some(now);
        let mut report = inputs.render(unix);
        report::stamp_transitions(
            &mut report.conditions,
            Arc::make_mut(&mut self.publishing.transitions),
            unix,
        );
        let fingerprint = report::content_fingerprint(&report);
        let age = since(self.publishing.publish.last.map(|(_, at)| at));
        let changed = self
            .publishing
            .publish
            .last
            .is_none_or(|(f, _)| f != fingerprint);
        if !changed && age.is_some_and(|a| a < STATUS_REFRESH) {
            return;
        }
        report.updated_at = report::rfc3339(unix);
        self.publishing.publish.in_flight = true;
        out.push(Effect::Publish {
            node: self.node.name.clone(),
            report: Box::new(report),
            fingerprint,
            node_uid: self.owner_uid(),
            at: now,
        });
    }
}
