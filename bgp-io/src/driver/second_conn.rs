//! The driver's side of RFC 4271 §6.8: a second connection from the peer is held, unread
//! beyond its first message, until its OPEN tells the session which connection survives.

use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::time::Instant;
use tokio_util::codec::FramedRead;

use crate::codec::BgpCodec;
use bgp_proto::codec::CodecError;
use bgp_proto::message::notification::Notification;
use bgp_proto::message::{Decoded, Message, WireOptions};

/// RFC 4271 §8.2.2's "large value" for the hold timer before an OPEN: a second connection
/// that sends nothing is closed after this.
pub(super) const SECOND_OPEN_WAIT: Duration = Duration::from_secs(240);

/// A second connection waiting for its first message.
pub(super) struct SecondConnection<S> {
    pub(super) reader: FramedRead<ReadHalf<S>, BgpCodec>,
    pub(super) writer: WriteHalf<S>,
    pub(super) deadline: Instant,
}

impl<S: AsyncRead + AsyncWrite> SecondConnection<S> {
    pub(super) fn new(stream: S) -> Self {
        let (rd, wr) = tokio::io::split(stream);
        SecondConnection {
            // Before OPEN nothing is negotiated: default wire options.
            reader: FramedRead::new(rd, BgpCodec::new(WireOptions::default())),
            writer: wr,
            deadline: Instant::now() + SECOND_OPEN_WAIT,
        }
    }
}

/// What the second connection did.
pub(super) enum SecondEvent {
    Frame(Decoded),
    /// It sent something undecodable: answer with this and close.
    Malformed(Notification),
    /// It closed, failed or sent nothing in time.
    Gone,
}

pub(super) async fn second_event<S: AsyncRead + AsyncWrite>(
    second: &mut Option<SecondConnection<S>>,
) -> SecondEvent {
    let Some(c) = second else {
        return std::future::pending().await;
    };
    let deadline = c.deadline;
    tokio::select! {
        frame = c.reader.next() => match frame {
            Some(Ok(d)) => SecondEvent::Frame(d),
            Some(Err(CodecError::Decode(e))) => SecondEvent::Malformed(e.handling().notification),
            Some(Err(_)) | None => SecondEvent::Gone,
        },
        () = tokio::time::sleep_until(deadline) => SecondEvent::Gone,
    }
}

/// Sends `notification` (if any) on a second connection and closes it, bounded in time so a
/// peer that does not read cannot keep it open.
pub(super) async fn close_second<S: AsyncRead + AsyncWrite>(
    second: SecondConnection<S>,
    notification: Option<Notification>,
) {
    let SecondConnection {
        reader, mut writer, ..
    } = second;
    let mut buf = BytesMut::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        if let Some(nt) = notification
            && Message::Notification(nt)
                .encode(&WireOptions::default(), &mut buf)
                .is_ok()
        {
            let _ = writer.write_all(&buf).await;
        }
        let _ = writer.shutdown().await;
    })
    .await;
    // As in the driver's linger: unread data at close would turn our FIN into a RST that
    // takes the NOTIFICATION with it.
    let mut rd = reader.into_inner();
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Ok(n) = rd.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
