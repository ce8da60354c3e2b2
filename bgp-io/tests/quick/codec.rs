//! The `tokio_util` codec over a stream: messages written in arbitrary pieces come out of a
//! `FramedRead` whole and in order, exactly as `bgp_proto::Framer` decodes them.

use bgp_io::BgpCodec;
use bgp_proto::message::{Message, WireOptions};
use bgp_proto::{Asn, HoldTime, Open, RouterId};
use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::FramedRead;

#[tokio::test]
async fn frames_split_anywhere_are_decoded_whole_and_in_order() {
    let opts = WireOptions::four_octet();
    let open = Message::Open(Open::new(
        Asn(65001),
        HoldTime::new(90).unwrap(),
        RouterId::new("198.18.0.1".parse().unwrap()).unwrap(),
        Vec::new(),
    ));
    let sent = vec![open, Message::Keepalive, Message::Keepalive];
    let mut stream = BytesMut::new();
    for m in &sent {
        m.encode(&opts, &mut stream).unwrap();
    }
    let (mut tx, rx) = tokio::io::duplex(64);
    let writer = tokio::spawn(async move {
        // Pieces of 7 bytes: every header and body is cut somewhere.
        for piece in stream.chunks(7) {
            tx.write_all(piece).await.unwrap();
        }
    });
    let mut frames = FramedRead::new(rx, BgpCodec::new(opts));
    let mut got = Vec::new();
    while let Some(frame) = frames.next().await {
        got.push(frame.unwrap().message);
    }
    writer.await.unwrap();
    assert_eq!(got, sent);
}
