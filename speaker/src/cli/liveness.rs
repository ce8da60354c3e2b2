//! Is a node's speaker running? Pure: the node's Lease (renewed every minute by the
//! speaker) and its `NodeBGPStatus` in, one of live / stale / dead / none out. The Lease
//! says whether the process runs; the status object, written on change and at least
//! hourly, holds the details and says whether what it reports is current.

use podcidr_api::SpeakerReport;
use serde::Serialize;

use crate::text::human_secs;

/// A node's speaker Lease (`coordination.k8s.io/v1`, named after the node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseInput {
    pub namespace: String,
    /// The Lease's name: the node's.
    pub name: String,
    /// `spec.holderIdentity`: `<node>/<pod>`.
    pub holder: Option<String>,
    /// `spec.renewTime`, Unix seconds.
    pub renewed_at: Option<i64>,
    /// `spec.leaseDurationSeconds`.
    pub duration_secs: Option<u64>,
}

/// What `diff` concludes about a node's speaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Liveness {
    /// The Lease is current and the status is no older than `--stale-after`.
    Live,
    /// The Lease is current (the speaker runs) but its status is older than `--stale-after`
    /// or was never written: its status writes do not land.
    Stale,
    /// The Lease expired (`renewTime + leaseDurationSeconds` is past) or there is none
    /// beside a status: the speaker is not running, or cannot reach the API.
    Dead,
    /// Neither a Lease nor a status: no speaker ever ran here (or `status.publish: false`).
    None,
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Stale => "stale",
            Self::Dead => "dead",
            Self::None => "none",
        }
    }
}

/// The verdict on one node's speaker, with the words for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeakerState {
    pub liveness: Liveness,
    /// Seconds since `renewTime`; `None` without a Lease or a valid `renewTime`.
    pub lease_age: Option<u64>,
    /// Seconds since the status's `updatedAt`; `None` without one.
    pub status_age: Option<u64>,
    /// Why the speaker is dead or stale (empty when live or none).
    pub detail: String,
}

/// Seconds since the report's `updatedAt`; `None` when it is missing or unparseable.
pub fn status_age(report: &SpeakerReport, now: i64) -> Option<u64> {
    let at: k8s_openapi::jiff::Timestamp = report.updated_at.parse().ok()?;
    Some(u64::try_from(now.saturating_sub(at.as_second())).unwrap_or(0))
}

fn age(at: i64, now: i64) -> u64 {
    u64::try_from(now.saturating_sub(at)).unwrap_or(0)
}

pub fn classify(
    lease: Option<&LeaseInput>,
    report: Option<&SpeakerReport>,
    now: i64,
    stale_after_secs: u64,
) -> SpeakerState {
    let status_age = report.and_then(|r| status_age(r, now));
    let lease_age = lease.and_then(|l| l.renewed_at).map(|t| age(t, now));
    let status_words = match (report, status_age) {
        (None, _) => "no NodeBGPStatus".to_owned(),
        (Some(_), None) => "status has no valid updatedAt".to_owned(),
        (Some(_), Some(a)) => format!("status is {} old", human_secs(a)),
    };
    let state = |liveness, detail: String| SpeakerState {
        liveness,
        lease_age,
        status_age,
        detail,
    };
    let Some(lease) = lease else {
        return match report {
            None => state(Liveness::None, String::new()),
            Some(_) => state(
                Liveness::Dead,
                format!(
                    "speaker dead: no Lease for this node (not running, cannot write Leases, \
                     or a version without them); {status_words}"
                ),
            ),
        };
    };
    let name = match &lease.holder {
        Some(h) => format!("Lease {}/{} (held by {h})", lease.namespace, lease.name),
        None => format!("Lease {}/{}", lease.namespace, lease.name),
    };
    match (lease.renewed_at, lease.duration_secs) {
        (Some(renewed), Some(duration))
            if now <= renewed.saturating_add(i64::try_from(duration).unwrap_or(i64::MAX)) => {}
        (Some(renewed), Some(duration)) => {
            let expired = age(renewed, now).saturating_sub(duration);
            return state(
                Liveness::Dead,
                format!(
                    "speaker dead: {name} expired {} ago (renewed {} ago, duration {duration}s); \
                     {status_words}",
                    human_secs(expired),
                    human_secs(age(renewed, now)),
                ),
            );
        }
        _ => {
            return state(
                Liveness::Dead,
                format!("speaker dead: {name} has no renewTime or leaseDurationSeconds"),
            );
        }
    }
    let renewed = human_secs(lease_age.unwrap_or(0));
    match (report, status_age) {
        (Some(_), Some(a)) if a <= stale_after_secs => state(Liveness::Live, String::new()),
        _ => state(
            Liveness::Stale,
            format!(
                "the speaker runs (Lease renewed {renewed} ago) but its {} \
                 (--stale-after {stale_after_secs}s): are its status writes failing?",
                if report.is_none() {
                    "NodeBGPStatus was never written".to_owned()
                } else {
                    status_words
                }
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn report(updated_at: &str) -> SpeakerReport {
        SpeakerReport {
            updated_at: updated_at.into(),
            ..SpeakerReport::default()
        }
    }

    fn lease(renewed_ago: i64, duration: u64) -> LeaseInput {
        LeaseInput {
            namespace: "podcidr-system".into(),
            name: "node-a".into(),
            holder: Some("node-a/speaker-x".into()),
            renewed_at: Some(NOW - renewed_ago),
            duration_secs: Some(duration),
        }
    }

    /// Every combination of Lease and status, in one table.
    #[test]
    fn liveness_truth_table() {
        let fresh = report("2025-12-31T23:30:00Z"); // 30 min old
        let old = report("2025-12-31T21:00:00Z"); // 3 h old
        let cases: [(Option<LeaseInput>, Option<&SpeakerReport>, Liveness, &str); 9] = [
            (Some(lease(20, 180)), Some(&fresh), Liveness::Live, ""),
            (Some(lease(180, 180)), Some(&fresh), Liveness::Live, ""),
            (
                Some(lease(181, 180)),
                Some(&fresh),
                Liveness::Dead,
                "speaker dead: Lease podcidr-system/node-a (held by node-a/speaker-x) expired 1s ago \
                 (renewed 3m1s ago, duration 180s); status is 30m0s old",
            ),
            (
                Some(lease(20, 180)),
                Some(&old),
                Liveness::Stale,
                "the speaker runs (Lease renewed 20s ago) but its status is 3h0m old \
                 (--stale-after 7200s): are its status writes failing?",
            ),
            (
                Some(lease(20, 180)),
                None,
                Liveness::Stale,
                "the speaker runs (Lease renewed 20s ago) but its NodeBGPStatus was never \
                 written (--stale-after 7200s): are its status writes failing?",
            ),
            (
                Some(lease(4000, 180)),
                Some(&old),
                Liveness::Dead,
                "speaker dead: Lease podcidr-system/node-a (held by node-a/speaker-x) expired 1h3m ago \
                 (renewed 1h6m ago, duration 180s); status is 3h0m old",
            ),
            (
                None,
                Some(&fresh),
                Liveness::Dead,
                "speaker dead: no Lease for this node (not running, cannot write Leases, or \
                 a version without them); status is 30m0s old",
            ),
            (None, None, Liveness::None, ""),
            (
                Some(LeaseInput {
                    renewed_at: None,
                    ..lease(0, 180)
                }),
                Some(&fresh),
                Liveness::Dead,
                "speaker dead: Lease podcidr-system/node-a (held by node-a/speaker-x) has no renewTime \
                 or leaseDurationSeconds",
            ),
        ];
        for (lease, report, want, detail) in cases {
            let got = classify(lease.as_ref(), report, NOW, 7200);
            assert_eq!(
                (got.liveness, got.detail.as_str()),
                (want, detail),
                "{lease:?}"
            );
        }
    }

    #[test]
    fn ages_are_reported_beside_the_verdict() {
        let s = classify(
            Some(&lease(42, 180)),
            Some(&report("2025-12-31T23:59:00Z")),
            NOW,
            7200,
        );
        assert_eq!((s.lease_age, s.status_age), (Some(42), Some(60)));
        // A renewTime in the future (clock skew) is age 0, not a wrap-around.
        let s = classify(Some(&lease(-30, 180)), None, NOW, 7200);
        assert_eq!(s.lease_age, Some(0));
    }
}
