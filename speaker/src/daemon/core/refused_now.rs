//! What is refused now, per reason: the gauge `podcidr_guard_refused_prefixes`. The counter
//! `podcidr_guard_refused_total` counts refusals as they appear, so an alert on it goes quiet
//! while a refusal persists and never sees one that was already there before a restart.

use super::guard::GuardRefusal;
use super::routes::PeerRefusal;

/// Every reason label, guard reasons first: each has a gauge series from the start.
pub const REASONS: [&str; 8] = [
    GuardRefusal::ALL[0].as_str(),
    GuardRefusal::ALL[1].as_str(),
    GuardRefusal::ALL[2].as_str(),
    GuardRefusal::ALL[3].as_str(),
    GuardRefusal::ALL[4].as_str(),
    PeerRefusal::ALL[0].as_str(),
    PeerRefusal::ALL[1].as_str(),
    PeerRefusal::ALL[2].as_str(),
];

/// Counts per reason, in [`REASONS`] order (zeros included). A guard refusal counts once
/// per value; a session refusal once per prefix and peer (as the `Refused` condition lists
/// them).
pub fn count(
    guard: impl IntoIterator<Item = GuardRefusal>,
    peers: impl IntoIterator<Item = PeerRefusal>,
) -> [(&'static str, usize); 8] {
    let mut out = REASONS.map(|r| (r, 0));
    let reasons = guard
        .into_iter()
        .map(GuardRefusal::as_str)
        .chain(peers.into_iter().map(PeerRefusal::as_str));
    for reason in reasons {
        if let Some(slot) = out.iter_mut().find(|(r, _)| *r == reason) {
            slot.1 += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_label() {
        let mut labels = REASONS.to_vec();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), REASONS.len());
    }

    #[test]
    fn counts_are_per_reason_with_zeros_for_the_rest() {
        let c = count(
            [
                GuardRefusal::TooShort,
                GuardRefusal::TooShort,
                GuardRefusal::Conflict,
            ],
            [PeerRefusal::FamilyNotCarried],
        );
        let get = |r: &str| c.iter().find(|(x, _)| *x == r).unwrap().1;
        assert_eq!(get("shorter-than-minimum"), 2);
        assert_eq!(get("conflict"), 1);
        assert_eq!(get("family-not-carried"), 1);
        assert_eq!(get("outside-allowed-prefixes"), 0);
        assert_eq!(c.iter().map(|(_, n)| n).sum::<usize>(), 4);
    }
}
