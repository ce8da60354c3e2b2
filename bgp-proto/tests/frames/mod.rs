//! Raw BGP messages built byte by byte, for error cases an encoder would never produce.
#![allow(dead_code)]

/// A message: marker, length, type, `body`.
pub fn frame(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![0xff; 16];
    v.extend_from_slice(&u16::try_from(19 + body.len()).unwrap().to_be_bytes());
    v.push(msg_type);
    v.extend_from_slice(body);
    v
}

pub fn update(withdrawn: &[u8], attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&u16::try_from(withdrawn.len()).unwrap().to_be_bytes());
    b.extend_from_slice(withdrawn);
    b.extend_from_slice(&u16::try_from(attrs.len()).unwrap().to_be_bytes());
    b.extend_from_slice(attrs);
    b.extend_from_slice(nlri);
    frame(2, &b)
}

/// An OPEN with My AS 65000 (bytes 20..22 of the message), hold time and BGP identifier.
pub fn open(version: u8, hold: u16, id: [u8; 4], params: &[u8]) -> Vec<u8> {
    let mut b = vec![version, 0xfd, 0xe8];
    b.extend_from_slice(&hold.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(u8::try_from(params.len()).unwrap());
    b.extend_from_slice(params);
    frame(1, &b)
}

pub const ORIGIN: &[u8] = &[0x40, 1, 1, 0];
/// AS_PATH [4200000001] on a 4-octet session.
pub const AS_PATH: &[u8] = &[0x40, 2, 6, 2, 1, 0xfa, 0x56, 0xea, 0x01];
pub const NEXT_HOP: &[u8] = &[0x40, 3, 4, 192, 0, 2, 1];
/// 198.51.100.0/24.
pub const NLRI: &[u8] = &[24, 198, 51, 100];

/// A valid UPDATE of a 4-octet session plus `extra` attributes.
pub fn valid_with(extra: &[u8]) -> Vec<u8> {
    update(&[], &[ORIGIN, AS_PATH, NEXT_HOP, extra].concat(), NLRI)
}
