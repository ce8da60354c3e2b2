//! Leader election against the in-process fake API server with the real `kube` client:
//! two candidates whose wall clocks disagree never lead at the same time.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fake_kube::{FakeKube, Gvr};
use ipam_watch::allocator::lease::{DEFAULT_LEASE_NAME, LeaseElector};
use ipam_watch::allocator::{Clock, LeaderState, LeaseConfig, SystemClock};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "kube-system";
const DURATION: Duration = Duration::from_secs(3);

/// A wall clock running `ahead` of the real one (the monotonic clock is the real one).
#[derive(Debug)]
struct Ahead(Duration);

impl Clock for Ahead {
    fn now(&self) -> SystemTime {
        SystemTime::now() + self.0
    }
}

struct Candidate {
    states: watch::Receiver<LeaderState>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn candidate(fake: &FakeKube, identity: &str, clock: Arc<dyn Clock>) -> Candidate {
    let cfg = LeaseConfig {
        namespace: NS.into(),
        name: DEFAULT_LEASE_NAME.into(),
        identity: identity.into(),
        duration: DURATION,
    };
    let (tx, states) = watch::channel(LeaderState::Follower);
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(LeaseElector::new(fake.client(), cfg, clock).run(tx, stop_rx));
    Candidate { states, stop, task }
}

/// Start of the write window a `Leader` state grants (its renew's local send time).
fn window(state: &LeaderState, deadline: Duration) -> Option<(Instant, Instant)> {
    match state {
        LeaderState::Leader { valid_until } => Some((*valid_until - deadline, *valid_until)),
        _ => None,
    }
}

fn holder(fake: &FakeKube) -> Option<String> {
    fake.get(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME)
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
}

/// The bug: a candidate compared the holder's `renewTime` with its own wall clock, so one
/// running ahead by more than the remaining lease took a Lease that was still renewed, and
/// both processes held a write window at once. Now the candidate times expiry from when it
/// saw the record change, on its own monotonic clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_clock_skew_candidate_ahead_never_leads_while_the_holder_renews() {
    let fake = FakeKube::start().await.unwrap();
    let deadline = DURATION * 2 / 3;
    let mut a = candidate(&fake, "a", Arc::new(SystemClock));
    tokio::time::timeout(WAIT, a.states.wait_for(|s| s.may_write()))
        .await
        .expect("a leads")
        .unwrap();
    let mut b = candidate(&fake, "b", Arc::new(Ahead(Duration::from_secs(3))));

    // Several lease durations of renewals by a: b never leads, the Lease never moves.
    let mut a_last = window(&a.states.borrow_and_update(), deadline).unwrap();
    let mut renewals = 0;
    while renewals < 2 * 3 {
        tokio::select! {
            r = a.states.changed() => {
                r.expect("a's elector runs");
                let s = a.states.borrow_and_update().clone();
                a_last = window(&s, deadline).unwrap_or_else(|| panic!("a lost the lease: {s:?}"));
                renewals += 1;
            }
            r = b.states.changed() => {
                r.expect("b's elector runs");
                let s = b.states.borrow_and_update().clone();
                assert!(
                    window(&s, deadline).is_none(),
                    "b leads while a still renews (a may write until {:?} from now): {s:?}",
                    a_last.1.saturating_duration_since(Instant::now()),
                );
            }
            _ = tokio::time::sleep(WAIT) => panic!("a stopped renewing"),
        }
    }
    assert_eq!(holder(&fake).as_deref(), Some("a"));
    let lease = fake
        .get(&Gvr::leases(), Some(NS), DEFAULT_LEASE_NAME)
        .unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 0, "{lease}");

    // a stops renewing without releasing (a crash): b takes over, but only after a's last
    // write window has closed.
    a.stop.send_replace(true);
    tokio::time::timeout(WAIT, a.task)
        .await
        .expect("a stops")
        .unwrap();
    let a_final = window(&a.states.borrow(), deadline).map_or(a_last, |w| w.max(a_last));
    let b_state = tokio::time::timeout(WAIT, b.states.wait_for(|s| s.may_write()))
        .await
        .expect("b takes over")
        .unwrap()
        .clone();
    let (b_start, _) = window(&b_state, deadline).unwrap();
    assert!(
        b_start >= a_final.1,
        "two writers: b's window starts {:?} before a's ends",
        a_final.1 - b_start
    );
    // Not earlier than one lease duration after a's last renew was sent (less the latency
    // of one request: b's window starts when its round starts, before its GET).
    assert!(
        b_start + Duration::from_millis(200) >= a_final.0 + DURATION,
        "b took over {:?} after a's last renew",
        b_start.saturating_duration_since(a_final.0)
    );
    assert_eq!(holder(&fake).as_deref(), Some("b"));
    b.stop.send_replace(true);
    tokio::time::timeout(WAIT, b.task)
        .await
        .expect("b stops")
        .unwrap();
}
